#!/usr/bin/env bash
# Makes a one-layer OCI image of a root directory: an image layout in OUT_DIR and the same as
# an archive, OUT_DIR.tar, for `swapcri image import`, `ctr images import` or a registry push.
#   hack/oci-image.sh ROOT OUT_DIR REF [CONFIG]
# REF is the image's name (registry.k8s.io/etcd:3.7.0-0, localhost/busybox:latest); CONFIG is
# the JSON of the image configuration's "config" object (Entrypoint, Cmd, Env, User…; default:
# a PATH and /bin/sh). Files are owned by root, timestamps fixed: the same tree gives the same
# digests. Prints the image's config digest.
set -euo pipefail
root=${1:?usage: $0 ROOT OUT_DIR REF [CONFIG]}
out=${2:?usage: $0 ROOT OUT_DIR REF [CONFIG]}
ref=${3:?usage: $0 ROOT OUT_DIR REF [CONFIG]}
config=${4:-'{"Env":["PATH=/usr/sbin:/usr/bin:/sbin:/bin"],"Cmd":["/bin/sh"],"WorkingDir":"/"}'}
jq -e 'type == "object"' >/dev/null <<<"$config" || { echo "CONFIG is not a JSON object: $config" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

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
jq -cn --argjson config "$config" --arg diff "sha256:$diff_id" \
  '{architecture: "amd64", os: "linux", config: $config, rootfs: {type: "layers", diff_ids: [$diff]}}' >"$work/config.json"
read -r config_digest config_size < <(put "$work/config.json")
cat >"$work/manifest.json" <<JSON
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:$config_digest","size":$config_size},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:$layer_digest","size":$layer_size}]}
JSON
read -r manifest_digest manifest_size < <(put "$work/manifest.json")
echo '{"imageLayoutVersion":"1.0.0"}' >"$out/oci-layout"
# containerd's importer names an image by its full-name annotation, skopeo's `oci:DIR:REF` by
# the OCI ref name: both carry REF.
jq -cn --arg d "sha256:$manifest_digest" --argjson s "$manifest_size" --arg name "$ref" \
  '{schemaVersion: 2, manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $d, size: $s,
    platform: {architecture: "amd64", os: "linux"}, annotations: {"io.containerd.image.name": $name, "org.opencontainers.image.ref.name": $name}}]}' >"$out/index.json"
tar -C "$out" -cf "$out.tar" .
echo "sha256:$config_digest"
