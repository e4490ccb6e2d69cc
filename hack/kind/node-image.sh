#!/usr/bin/env bash
# Builds stand-ins for kind's node images here, with no image registry, into the Docker daemon
# that DOCKER_HOST names:
#   kindest/base:swapcri-standin   kind's base image as kind v0.33.0 describes it (images/base
#                                  of its module): Debian trixie with systemd and the packages
#                                  kind installs, kind's own files from the pinned module (the
#                                  entrypoint, the kubelet and containerd units and drop-ins),
#                                  containerd 2.4.2 with ctr and its runc shim, runc 1.4.3,
#                                  crictl, and the CNI plugins kind ships (host-local, loopback,
#                                  ptp, portmap: trixie's containernetworking-plugins).
#   kindest/node:v1.37.2-standin   what `kind build node-image` makes of that base: kubeadm,
#                                  kubelet and kubectl of 1.37.2 in /usr/bin, /kind/version,
#                                  kind's default CNI and storage manifests (read from the
#                                  module), and every image kubeadm 1.37.2 lists, with kind's
#                                  pause, CNI and storage images, preloaded in containerd's
#                                  store as kind loads them (pinned, not unpacked).
# The preloaded images are built here from the pinned modules (hack/tools.sh): the control
# plane and kube-proxy from Kubernetes 1.37.2, etcd 3.7.0, CoreDNS 1.14.6, local-path-
# provisioner 0.0.30; a kindnetd stand-in of our own (hack/k8s/kindnetd: kind's has no module
# on the proxy); busybox for kind's local-path helper; our pause (hack/critest/src/pause.c).
#   hack/kind/node-image.sh WORKDIR      (WORKDIR keeps the image archives, images/*.tar)
# Prints the node image's name last. docs/kind.md lists what differs from a real kindest/node.
set -euo pipefail
cd "$(dirname "$0")/../.."
source hack/lib.sh
source hack/vm/lib.sh
[ -n "${DOCKER_HOST:-}" ] || { echo "DOCKER_HOST must name the Docker daemon to build into" >&2; exit 2; }
work=$(mkdir -p "${1:?usage: $0 WORKDIR}" && cd "$1" && pwd)
BASE=kindest/base:swapcri-standin
D=(/usr/bin/docker)
say() { echo "kind-image: $(date +%T) $*" >&2; }

say "tools from the pinned modules (hack/tools.sh, cached)"
T=/var/cache/swapcri-tools
hack/tools.sh "$T" containerd ctr containerd-shim-runc-v2 runc crictl kubeadm kubelet kubectl \
  kube-apiserver kube-controller-manager kube-scheduler kube-proxy kindnetd etcd coredns \
  local-path-provisioner kindconst >/dev/null
kind_src=$(hack/tools.sh "$T" kind-source | tail -n 1)
[ -d "$kind_src/images/base/files" ] || { echo "no images/base/files in the kind module at '$kind_src'" >&2; exit 1; }
kindconst() { "$T/kindconst" "$kind_src" "$1"; }
# The release is the one hack/k8s pins, as its kubeadm reports it.
K8S_VERSION=$("$T/kubeadm" version -o short)
NODE=kindest/node:$K8S_VERSION-standin

# --- the base image -------------------------------------------------------------------------
# The packages of kind's base Dockerfile, and the CNI plugins (kind builds them from source).
BASE_PACKAGES=systemd,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,fuse-overlayfs,nfs-common,open-iscsi,e2fsprogs,bash,ca-certificates,curl,jq,procps,containernetworking-plugins
say "base image $BASE (Debian trixie)"
base_tar=$(rootfs_tarball "$BASE_PACKAGES" trixie)
root=$work/base-root
rm -rf "$root" && mkdir -p "$root"
tar -C "$root" -xf "$base_tar"
# kind's files, as its Dockerfile copies them: scripts executable, the rest 0644.
cp -r "$kind_src/images/base/files/." "$root/"
chmod -R u+w,go-w "$root/kind" "$root/LICENSES" "$root/etc" "$root/usr/local/bin"
find "$root/kind" "$root/LICENSES" -type f -exec chmod 0644 {} +
chmod 0755 "$root/kind" "$root/kind/bin" "$root"/kind/bin/* "$root"/usr/local/bin/*
# What its Dockerfile's RUN steps do to systemd: no units but those enabled below.
rm -f "$root/lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service" \
  "$root"/lib/systemd/system/multi-user.target.wants/* "$root"/etc/systemd/system/*.wants/* \
  "$root"/lib/systemd/system/local-fs.target.wants/* "$root"/lib/systemd/system/sockets.target.wants/*udev* \
  "$root"/lib/systemd/system/sockets.target.wants/*initctl* "$root"/lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >>"$root/etc/systemd/journald.conf"
ln -sf /usr/lib/systemd/systemd "$root/sbin/init"
enable_in_root "$root" kubelet.service containerd.service undo-mount-hacks.service
ln -sf /dev/null "$root/etc/systemd/system/systemd-binfmt.service"
mkdir -p "$root/etc/kubernetes/manifests" "$root/opt/cni/bin"
install -m 0755 "$T/containerd" "$T/ctr" "$T/containerd-shim-runc-v2" "$T/crictl" "$root/usr/local/bin/"
install -m 0755 "$T/runc" "$root/usr/local/sbin/runc"
"$T/ctr" oci spec | jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' |
  jq 'del(.process.rlimits)' >"$root/etc/containerd/cri-base.json"
for plugin in host-local loopback ptp portmap; do
  install -m 0755 "$root/usr/lib/cni/$plugin" "$root/opt/cni/bin/$plugin"
done
mkdir -p "$work/base-ctx"
tar -C "$root" -cf "$work/base-ctx/rootfs.tar" .
rm -rf "$root"
cat >"$work/base-ctx/Dockerfile" <<'EOF'
FROM scratch
ADD rootfs.tar /
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]
EOF
"${D[@]}" build -q -t "$BASE" "$work/base-ctx" >/dev/null
rm -rf "$work/base-ctx"

# --- the images to preload ------------------------------------------------------------------
images=$work/images
rm -rf "$images" && mkdir -p "$images"
built=() # the references of the archives in $images
# image REF ROOT CONFIG: an archive of ROOT as the image REF.
image() {
  local file
  file=$images/$(echo "$1" | tr '/:@' '___')
  hack/oci-image.sh "$2" "$file" "$1" "$3" >/dev/null
  rm -rf "$file"
  built+=("$1")
}
# A root for a static program: certificates, passwd and group, /tmp (distroless/static's).
static_root() { # DIR
  mkdir -p "$1"/{etc/ssl/certs,tmp,usr/local/bin,var/run}
  chmod 1777 "$1/tmp"
  cp /etc/ssl/certs/ca-certificates.crt "$1/etc/ssl/certs/"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' >"$1/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$1/etc/group"
}
# A root with iptables and nftables (kube-proxy's and kindnetd's images carry them).
iptables_tar=$(rootfs_tarball iptables,nftables,conntrack,kmod,ca-certificates trixie)
iptables_root() { # DIR
  mkdir -p "$1"
  tar -C "$1" -xf "$iptables_tar"
}
path_env='"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]'

say "images: kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, etcd, CoreDNS, pause, kindnetd, local-path"
for prog in kube-apiserver kube-controller-manager kube-scheduler; do
  r=$work/r-$prog
  static_root "$r"
  install -m 0755 "$T/$prog" "$r/usr/local/bin/$prog"
  image "registry.k8s.io/$prog:$K8S_VERSION" "$r" "{$path_env,\"Entrypoint\":[\"/usr/local/bin/$prog\"]}"
  rm -rf "$r"
done
r=$work/r-kube-proxy
iptables_root "$r"
install -m 0755 "$T/kube-proxy" "$r/usr/local/bin/kube-proxy"
image "registry.k8s.io/kube-proxy:$K8S_VERSION" "$r" "{$path_env,\"Entrypoint\":[\"/usr/local/bin/kube-proxy\"]}"
rm -rf "$r"
# etcd and CoreDNS under the tags kubeadm asks for (read from kubeadm itself below).
required=$("$T/kubeadm" config images list --kubernetes-version "$K8S_VERSION" 2>/dev/null) ||
  { echo "kubeadm config images list failed" >&2; exit 1; }
etcd_ref=$(grep '/etcd:' <<<"$required") coredns_ref=$(grep '/coredns:' <<<"$required")
r=$work/r-etcd
static_root "$r"
install -m 0755 "$T/etcd" "$r/usr/local/bin/etcd"
mkdir -p "$r/var/lib/etcd"
image "$etcd_ref" "$r" "{$path_env,\"Entrypoint\":[\"/usr/local/bin/etcd\"]}"
rm -rf "$r"
r=$work/r-coredns
static_root "$r"
install -m 0755 "$T/coredns" "$r/coredns"
image "$coredns_ref" "$r" "{$path_env,\"Entrypoint\":[\"/coredns\"]}"
rm -rf "$r"
# pause: kind replaces kubeadm's with its containerd configuration's sandbox image.
pause_ref=$(sed -n 's/^[[:space:]]*sandbox_image[[:space:]]*=[[:space:]]*"\(.*\)".*/\1/p' "$kind_src/images/base/files/etc/containerd/config.toml")
[ -n "$pause_ref" ] || { echo "no sandbox_image in kind's containerd configuration" >&2; exit 1; }
r=$work/r-pause
mkdir -p "$r"
gcc -static -O2 -Wall -o "$r/pause" hack/critest/src/pause.c
strip "$r/pause"
image "$pause_ref" "$r" '{"Entrypoint":["/pause"]}'
rm -rf "$r"
r=$work/r-kindnetd
iptables_root "$r"
install -m 0755 "$T/kindnetd" "$r/bin/kindnetd"
image "$(kindconst kindnetdImage)" "$r" "{$path_env,\"Entrypoint\":[\"/bin/kindnetd\"]}"
rm -rf "$r"
r=$work/r-local-path
static_root "$r"
install -D -m 0755 "$T/local-path-provisioner" "$r/usr/bin/local-path-provisioner"
image "$(kindconst storageProvisionerImage)" "$r" "{$path_env}"
rm -rf "$r"
hack/build-busybox-image.sh "$work/helper" "$(kindconst storageHelperImage)" >/dev/null
mv "$work/helper.tar" "$images/$(kindconst storageHelperImage | tr '/:@' '___').tar"
rm -rf "$work/helper"
built+=("$(kindconst storageHelperImage)")

# What kind preloads: kubeadm's list without its pause, kind's pause, CNI and storage images.
# A name without a stand-in stops the build here, naming it.
wanted=$(grep -v pause <<<"$required"; echo "$pause_ref"; kindconst kindnetdImage; echo
  kindconst storageProvisionerImage; echo; kindconst storageHelperImage; echo)
missing=$(comm -23 <(grep . <<<"$wanted" | sort -u) <(printf '%s\n' "${built[@]}" | sort -u))
[ -z "$missing" ] || { echo "kind preloads images no stand-in is built for: $missing" >&2; exit 1; }

# --- the node image, as `kind build node-image` makes it ------------------------------------
say "node image $NODE"
c=kind-build-$$
"${D[@]}" rm -f "$c" >/dev/null 2>&1 || true
"${D[@]}" run -d --network none --entrypoint=sleep --name "$c" --security-opt seccomp=unconfined "$BASE" infinity >/dev/null
trap '"${D[@]}" rm -f -v "$c" >/dev/null 2>&1 || true' EXIT
for bin in kubeadm kubelet kubectl; do
  "${D[@]}" cp "$T/$bin" "$c:/usr/bin/$bin"
  "${D[@]}" exec "$c" sh -c "chmod +x /usr/bin/$bin && chown root:root /usr/bin/$bin"
done
in_node() { "${D[@]}" exec -i "$c" "$@"; }
# kubeadm, kubelet and kubectl of one release, the one /kind/version names: a skew stops here.
for v in "$(in_node kubelet --version)" "$(in_node kubeadm version -o short)" \
  "$(in_node kubectl version --client -o yaml | sed -n 's/^ *gitVersion: //p')"; do
  [ "${v#Kubernetes }" = "$K8S_VERSION" ] || { echo "version skew in the node image: '$v', not $K8S_VERSION" >&2; exit 1; }
done
printf '%s' "$K8S_VERSION" | in_node sh -c 'cat >/kind/version'
in_node mkdir -p /kind/manifests
kindconst defaultCNIManifest | in_node sh -c 'cat >/kind/manifests/default-cni.yaml'
kindconst defaultStorageManifest | in_node sh -c 'cat >/kind/manifests/default-storage.yaml'
in_node bash -c 'nohup containerd >/dev/null 2>&1 &'
in_node bash -c 'for i in $(seq 1 100); do [ -S /run/containerd/containerd.sock ] && ctr info >/dev/null 2>&1 && exit 0; sleep 0.1; done; echo "containerd did not start in the build container" >&2; exit 1'
for archive in "$images"/*.tar; do
  in_node ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned --all-platforms \
    --no-unpack --digests - <"$archive" >/dev/null 2>"$work/ctr.err" ||
    { cat "$work/ctr.err" >&2; echo "ctr images import $archive failed" >&2; exit 1; }
done
loaded=$(in_node ctr --namespace=k8s.io images list -q 2>/dev/null | grep -v '^sha256:' | sort)
missing=$(comm -23 <(grep . <<<"$wanted" | sort -u) <(echo "$loaded"))
[ -z "$missing" ] || { echo "containerd did not take these images: $missing" >&2; exit 1; }
# Stopped before the commit; it stays a zombie (sleep, the container's PID 1, reaps nothing).
in_node pkill containerd
in_node bash -c 'for i in $(seq 1 100); do ps -C containerd -o stat= | grep -q "^[^Z]" || exit 0; sleep 0.1; done
  echo "containerd did not stop in the build container" >&2; exit 1'
"${D[@]}" commit --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
  --change 'ENV HTTP_PROXY="" HTTPS_PROXY="" NO_PROXY=""' "$c" "$NODE" >/dev/null
say "built $NODE: $(grep -c . <<<"$wanted") images preloaded"
echo "$NODE"
