#!/usr/bin/env bash
# Starts a registry on 127.0.0.1 (Debian's docker-registry, see registry_up in hack/lib.sh)
# and pushes a busybox image built from busybox-static into it, for trying pulls without
# internet access.
#   sudo hack/local-registry.sh [PORT]   (default 5000)
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
require_root
install_packages
port=${1:-5000}
REGISTRY_ADDR=127.0.0.1:$port
[ "$port" = 5000 ] || REGISTRY_DIR=$REGISTRY_DIR-$port
registry_up
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
hack/build-busybox-image.sh "$work/busybox" busybox:latest >/dev/null
skopeo copy --quiet --dest-tls-verify=false "oci:$work/busybox:busybox:latest" "docker://$REGISTRY_ADDR/busybox:latest"
echo "registry on $REGISTRY_ADDR (pid $(cat "$REGISTRY_DIR/registry.pid" 2>/dev/null || echo '?'), log $REGISTRY_DIR/registry.log)"
echo "image: $REGISTRY_ADDR/busybox:latest"
