#!/usr/bin/env bash
# Installs swapcri as a systemd service: the release binary, /etc/swapcri/config.toml (the
# defaults, with the systemd cgroup driver on a systemd node; an existing file is kept), the
# units, /etc/crictl.yaml (unless present) and a bridge pod network (unless one exists); then
# enables and starts swapcri.service.
#   sudo hack/install.sh [--socket] [--no-start] [--no-build] [--root DIR]
#     --socket    also enable swapcri.socket (socket activation)
#     --no-start  install and enable, do not start
#     --no-build  install target/release/swapcri as built
#     --root DIR  install into the root filesystem DIR (an image being built); implies --no-start
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
socket=0 start=1 build=1 root=
while [ $# -gt 0 ]; do
  case $1 in
    --socket) socket=1; shift ;;
    --no-start) start=0; shift ;;
    --no-build) build=0; shift ;;
    --root) root=$(realpath "$2"); start=0; shift 2 ;;
    *) echo "usage: $0 [--socket] [--no-start] [--no-build] [--root DIR]" >&2; exit 2 ;;
  esac
done
require_root
if [ "$build" = 1 ]; then
  install_packages
  ensure_cargo
  echo "==> building swapcri (release)"
  cargo build --release --locked
fi
[ -x target/release/swapcri ] || { echo "no target/release/swapcri: build it first" >&2; exit 1; }
[ -n "$root" ] || [ -d /run/systemd/system ] || { echo "systemd is not this node's init: use hack/run.sh" >&2; exit 1; }

echo "==> installing into ${root:-/}"
install -D -m 0755 target/release/swapcri "$root/usr/local/bin/swapcri"
install -D -m 0644 contrib/systemd/swapcri.service "$root/etc/systemd/system/swapcri.service"
install -D -m 0644 contrib/systemd/swapcri.socket "$root/etc/systemd/system/swapcri.socket"
if [ ! -f "$root/etc/swapcri/config.toml" ]; then
  mkdir -p "$root/etc/swapcri"
  # The driver must be the tree's manager: systemd on a systemd node (kubelet follows it).
  target/release/swapcri config default |
    sed 's/^cgroup_driver = "cgroupfs"/cgroup_driver = "systemd"/' >"$root/etc/swapcri/config.toml"
  echo "==> wrote $root/etc/swapcri/config.toml (cgroup_driver = \"systemd\")"
fi
[ -f "$root/etc/crictl.yaml" ] || install -m 0644 contrib/crictl.yaml "$root/etc/crictl.yaml"
if ! has_cni_config "$root/etc/cni/net.d"; then
  install -D -m 0644 contrib/cni/10-swapcri-bridge.conflist "$root/etc/cni/net.d/10-swapcri-bridge.conflist"
fi
units=(swapcri.service)
[ "$socket" = 1 ] && units+=(swapcri.socket)
if [ -n "$root" ]; then
  enable_in_root "$root" "${units[@]}"
  exit 0
fi
systemctl daemon-reload
systemctl enable "${units[@]}"
if [ "$start" = 1 ]; then
  [ "$socket" = 1 ] && systemctl start swapcri.socket
  systemctl restart swapcri.service
  echo "==> swapcri.service: $(systemctl is-active swapcri.service)"
fi
