#!/usr/bin/env bash
# Builds a one-layer busybox image from Debian's busybox-static as an OCI image layout.
#   hack/build-busybox-image.sh OUT_DIR [REF_NAME]   (REF_NAME default: busybox:latest)
# MARKER=text adds /etc/marker with that text: an image of its own, with a layer of its own.
# EXTRA_BINS="FILE…" copies those (static) programs into /bin.
# OUT_DIR.tar is written too: an archive for `swapcri image import`.
set -euo pipefail
out=${1:?usage: $0 OUT_DIR [REF_NAME]}
ref=${2:-busybox:latest}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

root=$work/rootfs
mkdir -p "$root"/{bin,etc,tmp,root,proc,sys,dev}
chmod 1777 "$root/tmp"
cp /bin/busybox "$root/bin/busybox"
for applet in $(/bin/busybox --list); do
  [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
if [ -n "${MARKER:-}" ]; then printf '%s\n' "$MARKER" >"$root/etc/marker"; fi
for bin in ${EXTRA_BINS:-}; do cp "$bin" "$root/bin/"; done

image=$("$(dirname "$0")/oci-image.sh" "$root" "$out" "$ref")
echo "built $out (and $out.tar): image $image, ref $ref"
