#!/usr/bin/env bash
# Installs what is missing, builds swapcri, installs it and runs the daemon in the
# foreground with /etc/swapcri/config.toml (written with the defaults if absent) and a
# bridge pod network in /etc/cni/net.d (when the node has none).
#   sudo hack/run.sh [extra swapcri flags, e.g. --log-level debug]
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
require_root
install_packages
ensure_cargo
echo "==> building swapcri (release)"
cargo build --release --locked
install -m 0755 target/release/swapcri /usr/local/bin/swapcri
# CRIU 4 for CheckpointContainer, where the node has none (bookworm's 3.17.1 fails on newer
# kernels): built by hack/criu.sh into /usr/local/sbin, which PATH lists first.
criu_major=$( (criu --version 2>/dev/null || true) | sed -n 's/^Version: \([0-9]*\)\..*/\1/p')
if [ "${criu_major:-0}" -lt 4 ]; then
  if criu=$(hack/criu.sh 2>/dev/null); then
    install -m 0755 "$criu" /usr/local/sbin/criu
    echo "==> installed CRIU 4.1.1 as /usr/local/sbin/criu (checkpoints)"
  else
    echo "==> hack/criu.sh failed: checkpoints will answer FailedPrecondition until CRIU 4 is installed" >&2
  fi
fi
if [ ! -f /etc/swapcri/config.toml ]; then
  mkdir -p /etc/swapcri
  swapcri config default >/etc/swapcri/config.toml
  echo "==> wrote the default configuration to /etc/swapcri/config.toml"
fi
# A pod network unless the node already has one: a bridge on 10.88.0.0/16 with host ports.
if ! has_cni_config /etc/cni/net.d; then
  install -D -m 0644 contrib/cni/10-swapcri-bridge.conflist /etc/cni/net.d/10-swapcri-bridge.conflist
  echo "==> wrote the default pod network to /etc/cni/net.d/10-swapcri-bridge.conflist"
fi
echo "==> starting swapcri on unix:///run/swapcri/swapcri.sock (Ctrl-C stops it)"
exec /usr/local/bin/swapcri --config /etc/swapcri/config.toml serve "$@"
