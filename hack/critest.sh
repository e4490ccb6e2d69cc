#!/usr/bin/env bash
# Runs the CRI validation suite (critest, built from hack/cri-tools by hack/tools.sh) against a
# swapcri daemon started here, once per runc: Debian's runc, then runc 1.4.3 (also built by
# hack/tools.sh). The daemon mirrors the registries critest names to a local registry on
# 127.0.0.1:5000 holding images built on this machine (hack/critest/images.sh), gives pods
# a CNI bridge, and serves NRI on a socket of its own so the suite's 13 NRI specs run too.
#   sudo hack/critest.sh [OUTDIR]       (default /tmp/swapcri-critest)
# Environment: RUNCS ("debian new", or one of them), FOCUS (a ginkgo focus regex, for a
# partial run).
# Writes OUTDIR/<runc>/summary.txt and OUTDIR/summary.txt; exits 1 when a spec failed.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
require_root
install_packages
ensure_cargo

OUT=$(mkdir -p "${1:-/tmp/swapcri-critest}" && cd "${1:-/tmp/swapcri-critest}" && pwd)
RUNCS=${RUNCS:-"debian new"}
WORK=/run/swapcri-critest
SOCK=$WORK/swapcri.sock

prepare_critest "$OUT"
echo "==> swapcri (release build)"
cargo build --release --locked --quiet

runc_binary() {
  case "$1" in
    debian) echo /usr/sbin/runc ;;
    new) newer_runc ;;
    *) echo "unknown runc '$1' (debian or new)" >&2; return 1 ;;
  esac
}

stop_daemon() {
  if [ -s "$WORK/pid" ]; then
    kill "$(cat "$WORK/pid")" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$(cat "$WORK/pid")" 2>/dev/null || break; sleep 0.2; done
    rm -f "$WORK/pid"
  fi
}
trap stop_daemon EXIT

failed=0
: >"$OUT/summary.txt"
for which in $RUNCS; do
  binary=$(runc_binary "$which")
  echo "==> critest with $which runc ($("$binary" --version | sed -n 1p))"
  stop_daemon
  rm -rf "$WORK" && mkdir -p "$WORK"
  write_cri_test_config "$WORK" "$binary"
  with_private_nri "$WORK"
  target/release/swapcri --config "$WORK/config.toml" >"$OUT/daemon-$which.log" 2>&1 &
  echo $! >"$WORK/pid"
  for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
  [ -S "$SOCK" ] || { tail -20 "$OUT/daemon-$which.log"; exit 1; }
  FOCUS="${FOCUS:-}" NRI_SOCKET="$WORK/nri.sock" hack/critest/run.sh "unix://$SOCK" "$OUT/$which" >"$OUT/$which.log" 2>&1 || true
  stop_daemon
  counts=$(grep -m1 '^TOTAL' "$OUT/$which/summary.txt" || echo "no summary: see $OUT/$which.log")
  echo "    $counts"
  echo "$which runc: $counts" >>"$OUT/summary.txt"
  if ! grep -qE '^TOTAL .* FAILED 0 ' "$OUT/$which/summary.txt"; then
    failed=1
    sed -n '/^FAILED:/,/^SKIPPED/p' "$OUT/$which/summary.txt" | grep -v '^SKIPPED'
  fi
done
exit $failed
