#!/usr/bin/env bash
# `kind load docker-image` for nodes whose runtime is swapcri: copies images from the local
# Docker daemon into a node's swapcri store.
#   hack/kind-load.sh NODE IMAGE…       (NODE: the node container, e.g. kind-worker)
#   hack/kind-load.sh NODE ARCHIVE.tar   (an OCI image layout archive)
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 NODE IMAGE|ARCHIVE.tar…" >&2; exit 2; }
node=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for image in "$@"; do
  if [ -f "$image" ]; then
    archive=$image
  else
    command -v skopeo >/dev/null || { echo "skopeo is needed to export $image (apt-get install skopeo)" >&2; exit 1; }
    archive=$tmp/image.tar
    rm -f "$archive"
    skopeo copy -q "docker-daemon:$image" "oci-archive:$archive:$image"
  fi
  # Streamed in: `docker cp` cannot write under the node's tmpfs mounts (/tmp, /run), and
  # /var/tmp lies on the node's /var volume, beside swapcri's store.
  docker exec -i "$node" sh -c 'umask 077 && cat >/var/tmp/swapcri-load.tar' <"$archive"
  docker exec "$node" swapcri image import /var/tmp/swapcri-load.tar
  docker exec "$node" rm -f /var/tmp/swapcri-load.tar
done
