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

tar --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 -C "$root" -cf "$work/layer.tar" .
diff_id=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
gzip -n -c "$work/layer.tar" >"$work/layer.tar.gz"

rm -rf "$out"
mkdir -p "$out/blobs/sha256"
put() { # put FILE -> prints "digest size"
  local d s
  d=$(sha256sum "$1" | cut -d' ' -f1)
  s=$(stat -c %s "$1")
  cp "$1" "$out/blobs/sha256/$d"
  echo "$d $s"
}
read -r layer_digest layer_size < <(put "$work/layer.tar.gz")
cat >"$work/config.json" <<JSON
{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/sbin:/usr/bin:/sbin:/bin"],"Cmd":["/bin/sh"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:$diff_id"]}}
JSON
read -r config_digest config_size < <(put "$work/config.json")
cat >"$work/manifest.json" <<JSON
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:$config_digest","size":$config_size},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:$layer_digest","size":$layer_size}]}
JSON
read -r manifest_digest manifest_size < <(put "$work/manifest.json")
echo '{"imageLayoutVersion":"1.0.0"}' >"$out/oci-layout"
cat >"$out/index.json" <<JSON
{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:$manifest_digest","size":$manifest_size,"annotations":{"org.opencontainers.image.ref.name":"$ref"}}]}
JSON
tar -C "$out" -cf "$out.tar" .
echo "built $out (and $out.tar): image sha256:$config_digest, ref $ref"
