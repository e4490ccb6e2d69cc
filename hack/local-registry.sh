#!/usr/bin/env bash
# Starts a throwaway registry on 127.0.0.1 (Debian's docker-registry) and pushes a busybox
# image built from busybox-static into it, for trying pulls without internet access.
#   sudo hack/local-registry.sh [PORT]   (default 5000)
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
require_root
install_packages
port=${1:-5000}
dir=/var/tmp/swapcri-local-registry
mkdir -p "$dir"
cat >"$dir/config.yml" <<YAML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
YAML
if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
  nohup docker-registry serve "$dir/config.yml" >"$dir/registry.log" 2>&1 &
  echo $! >"$dir/registry.pid"
  for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
fi
hack/build-busybox-image.sh "$dir/busybox" busybox:latest >/dev/null
skopeo copy --quiet --dest-tls-verify=false "oci:$dir/busybox:busybox:latest" "docker://127.0.0.1:$port/busybox:latest"
echo "registry on 127.0.0.1:$port (pid $(cat "$dir/registry.pid" 2>/dev/null || echo '?'), log $dir/registry.log)"
echo "image: 127.0.0.1:$port/busybox:latest"
