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
