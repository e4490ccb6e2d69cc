#!/usr/bin/env bash
# Runs every test: unit, integration (real daemon, registry and runc on this host), the CRI
# fuzzer, the crash churn, and the VM e2e tests on real cgroup v2 with swap: the initramfs
# VMs (kernels 6.1 and 6.12) and a systemd-booted node (all but cargo test skipped when
# cargo test filters are given).
#   sudo hack/test.sh [cargo test filters…]
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
require_root
install_packages
ensure_cargo
export RUST_BACKTRACE=${RUST_BACKTRACE:-0}
# runc 1.4.3 beside Debian's runc, for the runtime handler tests (built once, cached).
if [ -z "${SWAPCRI_TEST_RUNC_NEW:-}" ] && [ -x ../shared/runc/build.sh ]; then
  echo "==> runc 1.4.3 (../shared/runc/build.sh)"
  ../shared/runc/build.sh /var/cache/swapcri-runc >/dev/null
  export SWAPCRI_TEST_RUNC_NEW=/var/cache/swapcri-runc/runc
fi
echo "==> cargo test (unit and integration)"
status=0
cargo test --locked --no-fail-fast "$@" || status=$?
if [ $# -eq 0 ]; then
  # The long form: SWAPCRI_FUZZ_INPUTS=1000000 (about 4 min); see docs/testing.md.
  echo "==> CRI fuzzer (${SWAPCRI_FUZZ_SECONDS:=60} s)"
  fuzz_log=$(mktemp)
  if SWAPCRI_FUZZ_SECONDS=$SWAPCRI_FUZZ_SECONDS cargo test --locked --lib cri_fuzz -- --ignored --nocapture \
    >"$fuzz_log" 2>&1; then
    grep -E '^fuzz' "$fuzz_log"
  else
    status=1
    tail -n 40 "$fuzz_log"
  fi
  rm -f "$fuzz_log"
  # The long form: hack/churn.sh 100 50; see docs/testing.md.
  echo "==> crash churn (hack/churn.sh, short form)"
  hack/churn.sh || status=$?
  echo "==> VM e2e (hack/vm/e2e.sh)"
  hack/vm/e2e.sh || status=$?
  echo "==> systemd node e2e (hack/vm/e2e.sh --node systemd)"
  hack/vm/e2e.sh --node systemd || status=$?
fi
exit $status
