#!/usr/bin/env bash
# Runs the CRI validation suite (critest, from the kit in ../shared/critest) against a
# swapcri daemon started here, once per runc: Debian's runc, then runc 1.4.3 built by
# ../shared/runc. The daemon mirrors the registries critest names to a local registry
# on 127.0.0.1:5000 holding images built on this machine, and gives pods a CNI bridge.
#   sudo hack/critest.sh [OUTDIR]       (default /tmp/swapcri-critest)
# Environment: KIT (default ../shared/critest), RUNCS ("debian new", or one of them),
# FOCUS (a ginkgo focus regex, for a partial run).
# Writes OUTDIR/<runc>/summary.txt and OUTDIR/summary.txt; exits 1 when a spec failed.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
require_root
install_packages
ensure_cargo

OUT=$(mkdir -p "${1:-/tmp/swapcri-critest}" && cd "${1:-/tmp/swapcri-critest}" && pwd)
KIT=$(cd "${KIT:-../shared/critest}" && pwd)
RUNCS=${RUNCS:-"debian new"}
WORK=/run/swapcri-critest
SOCK=$WORK/swapcri.sock

echo "==> critest and crictl (cached in /var/cache/critest)"
"$KIT/build.sh" /var/cache/critest >/dev/null
export PATH=/var/cache/critest:$PATH
echo "==> local registry and the suite's images"
"$KIT/registry.sh" start >/dev/null
if [ ! -s /tmp/verify-build/images.txt ] || ! curl -sf http://127.0.0.1:5000/v2/e2e-test-images/busybox/tags/list >/dev/null; then
  "$KIT/build-images.sh" >"$OUT/images.log" 2>&1 || { tail -20 "$OUT/images.log"; exit 1; }
fi
echo "==> swapcri (release build)"
cargo build --release --locked --quiet

runc_binary() {
  case "$1" in
    debian) echo /usr/sbin/runc ;;
    new) ../shared/runc/build.sh /var/cache/swapcri-runc >/dev/null && echo /var/cache/swapcri-runc/runc ;;
    *) echo "unknown runc '$1' (debian or new)" >&2; return 1 ;;
  esac
}

write_config() { # BINARY
  local mirrors=""
  for r in registry.k8s.io gcr.io k8s.gcr.io docker.io registry-1.docker.io quay.io public.ecr.aws; do
    mirrors+="[registries.\"$r\"]"$'\n'"mirrors = [\"127.0.0.1:5000\"]"$'\n'
  done
  mkdir -p "$WORK/cni"
  cat >"$WORK/cni/10-critest.conflist" <<CNI
{ "cniVersion": "1.0.0", "name": "swapcri-critest",
  "plugins": [
    { "type": "bridge", "bridge": "swapcri-crit0", "isGateway": true, "ipMasq": false,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "10.89.0.0/16" }]] } },
    { "type": "portmap", "capabilities": { "portMappings": true } } ] }
CNI
  cat >"$WORK/config.toml" <<CONF
socket = "$SOCK"
state_root = "$WORK/state"
run_root = "$WORK/run"
log_level = "info"
[runtime]
default_cgroup_parent = "/swapcri-critest"
[runtime.handlers.runc]
binary = "$1"
[network]
config_dir = "$WORK/cni"
$mirrors
CONF
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
  echo "==> critest with $which runc ($("$binary" --version | head -1))"
  stop_daemon
  rm -rf "$WORK" && mkdir -p "$WORK"
  write_config "$binary"
  target/release/swapcri --config "$WORK/config.toml" >"$OUT/daemon-$which.log" 2>&1 &
  echo $! >"$WORK/pid"
  for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
  [ -S "$SOCK" ] || { tail -20 "$OUT/daemon-$which.log"; exit 1; }
  MODE=mirror FOCUS="${FOCUS:-}" "$KIT/critest.sh" "unix://$SOCK" "$OUT/$which" >"$OUT/$which.log" 2>&1 || true
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
