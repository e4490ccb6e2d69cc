#!/usr/bin/env bash
# Runs every test: unit, integration (real daemon, registry and runc on this host), the CRI
# fuzzer, the crash churn, the VM e2e tests on real cgroup v2 with swap (the initramfs VMs,
# kernels 6.1 and 6.12, and a systemd-booted node), Kubernetes' node e2e suite with a real
# kubelet on that node (hack/node-e2e.sh), the CRI validation suite (critest, hack/critest.sh)
# and a kind cluster of swapcri nodes (hack/kind-cluster.sh); all but cargo test skipped when
# cargo test filters are given. Tools Debian does not package are built from the Go modules
# pinned under hack/ (hack/tools.sh).
#   sudo hack/test.sh [cargo test filters…]
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
require_root
install_packages
ensure_cargo
export RUST_BACKTRACE=${RUST_BACKTRACE:-0}
# Cargo's build directory is kept between clones in the tools' cache: a fresh clone then
# compiles swapcri itself, not its dependencies again. Not when target/ exists already or
# CARGO_TARGET_DIR is set; emptied first when over 40 GiB (old dependency versions pile up).
build_cache=/var/cache/swapcri-tools/cargo-target
if [ -z "${CARGO_TARGET_DIR:-}" ] && [ ! -e target ] && [ ! -L target ]; then
  if [ "$(du -s --block-size=1G "$build_cache" 2>/dev/null | cut -f1)" -gt 40 ] 2>/dev/null; then
    echo "==> emptying the build cache $build_cache (over 40 GiB)"
    rm -rf "$build_cache"
  fi
  mkdir -p "$build_cache"
  chmod 0700 "$build_cache"
  ln -s "$build_cache" target
  echo "==> cargo builds in $build_cache (kept between clones; target/ links to it)"
fi
echo "==> the repository refers to nothing outside it (hack/check-self-contained.py)"
status=0
hack/check-self-contained.py || status=1
echo "==> no import loop, no import up the layers (hack/check-module-cycles.py)"
hack/check-module-cycles.py || status=1
# runc 1.4.3 beside Debian's runc, for the runtime handler tests (built once from hack/runc,
# cached).
if [ -z "${SWAPCRI_TEST_RUNC_NEW:-}" ]; then
  echo "==> runc 1.4.3 (hack/tools.sh)"
  SWAPCRI_TEST_RUNC_NEW=$(newer_runc)
  export SWAPCRI_TEST_RUNC_NEW
fi
# CRIU 4.1.1 for the checkpoint tests (built once by hack/criu.sh, cached).
if [ -z "${SWAPCRI_TEST_CRIU:-}" ]; then
  echo "==> CRIU 4.1.1 (hack/criu.sh)"
  SWAPCRI_TEST_CRIU=$(criu_binary)
  export SWAPCRI_TEST_CRIU
fi
echo "==> cargo test (unit and integration)"
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
  # The long form: FORM=long, each driver, and RUNTIME=containerd; see docs/testing.md.
  echo "==> Kubernetes node e2e with a real kubelet (hack/node-e2e.sh, short form)"
  hack/node-e2e.sh || status=$?
  echo "==> CRI validation suite (hack/critest.sh)"
  hack/critest.sh /tmp/swapcri-critest || status=$?
  # The long form: FORM=long (two nodes, every check), and RUNTIME=containerd; see docs/kind.md.
  echo "==> a kind cluster of swapcri nodes (hack/kind-cluster.sh, short form)"
  FORM=short hack/kind-cluster.sh || status=$?
fi
exit $status
