#!/usr/bin/env bash
# A real kind cluster of swapcri nodes on cgroup v2 with swap: kind 0.33.0, kubeadm and kubelet
# 1.37.2, in the systemd VM node with Docker's engine (hack/vm/systemd-node.sh --kind; kernel
# 6.12, QEMU under TCG). Builds everything here, with no image registry:
#   1. kind's node image, a stand-in made from the pinned modules (hack/kind/node-image.sh);
#   2. kindest/node:swapcri from it with the repository's top-level Dockerfile, unmodified
#      (RUNTIME=swapcri), on a stand-in Rust image of Debian trixie with this machine's toolchain;
#   3. in the VM: `kind create cluster --image … --config contrib/kind/cluster.yaml`, then the
#      checks (hack/vm/kind-node.sh), then `kind delete cluster`.
#   sudo hack/kind-cluster.sh
#   RUNTIME=swapcri|containerd   the nodes' runtime (containerd: the stand-in kindest/node as
#                                kind users run it, with the same kubelet settings)
#   FORM=short|long              short (CI): one control-plane node Ready, a loaded image's pod
#                                Running; long (default): both nodes and every check
#   REUSE_IMAGE=1                the node image the last run of this RUNTIME built, if any
# Prints one line per check, the measured figures, and `kind-cluster: N passed, N failed`; the VM's whole console stays
# in /var/cache/swapcri-vm/systemd-node-console.log. docs/kind.md has the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
source hack/vm/lib.sh
source hack/kind/lib.sh
require_root
install_packages
ensure_cargo
RUNTIME=${RUNTIME:-swapcri} FORM=${FORM:-long}
case $RUNTIME in swapcri | containerd) ;; *) echo "RUNTIME=swapcri or containerd" >&2; exit 2 ;; esac
case $FORM in short | long) ;; *) echo "FORM=short or long" >&2; exit 2 ;; esac
for p in docker.io libcap2-bin; do
  installed "$p" || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p" >/dev/null
done
t0=$(date +%s)
say() { echo "kind-cluster: $(date +%T) $*" >&2; }

work=$(mktemp -d /var/tmp/swapcri-kind-cluster.XXXXXX)
cleanup() {
  set +e
  stop_dockerd "$work/dockerd"
  rm -rf "$work"
}
trap cleanup EXIT
vm=$work/vm
mkdir -p "$vm/images"
echo "$RUNTIME" >"$vm/runtime"
echo "$FORM" >"$vm/form"

say "kind, kubectl (hack/tools.sh, cached)"
install -m 0755 "$(hack/tools.sh /var/cache/swapcri-tools kind | tail -n 1)" "$vm/kind"
install -m 0755 "$(hack/tools.sh /var/cache/swapcri-tools kubectl | tail -n 1)" "$vm/kubectl"
# build_node_image: kind's node image stand-in, then (swapcri) the Dockerfile on it, saved for
# the VM and kept for REUSE_IMAGE=1.
build_node_image() {
  # Its data root is kept between runs for BuildKit's cache: the Dockerfile's cache mounts
  # keep the crates and cargo's build directory, so a run compiles swapcri, not its dependencies.
  say "a private Docker daemon for the image builds (data root $cache/kind-docker)"
  start_dockerd "$work/dockerd" "$cache/kind-docker"
  local node image
  node=$(hack/kind/node-image.sh "$work/node" | tail -n 1)
  image=$node
  if [ "$RUNTIME" = swapcri ]; then
    say "a stand-in Rust image of Debian trixie (this machine's toolchain: $(rustc --version))"
    rust_image swapcri-standin/rust:trixie trixie
    say "docker build: the Dockerfile as it is, on $node"
    image=kindest/node:swapcri
    /usr/bin/docker build --network host --build-arg BASE_IMAGE="$node" --build-arg RUST_IMAGE=swapcri-standin/rust:trixie \
      -t "$image" . >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log" >&2; say "docker build failed"; exit 1; }
    # A binary linked against another glibc than the base image's stops here, with the loader's words.
    local ran
    ran=$(/usr/bin/docker run --rm --network none --entrypoint /usr/local/bin/swapcri "$image" --version 2>&1) ||
      { say "swapcri does not run in $image: $ran"; exit 1; }
    say "$image runs $ran"
  fi
  say "saving $image for the VM ($(/usr/bin/docker image inspect -f '{{.Size}}' "$image" | numfmt --to=iec))"
  /usr/bin/docker save -o "$vm/images/node.tar" "$image"
  echo "$image" >"$vm/image"
  # The images are built anew each run; only the build cache is kept, within a bound.
  /usr/bin/docker image prune -af >/dev/null
  /usr/bin/docker builder prune -f --keep-storage 12GB >/dev/null
  stop_dockerd "$work/dockerd"
  rm -rf "$work/dockerd" "$work/node"
  rm -f "$saved" "$saved.name"
  ln "$vm/images/node.tar" "$saved" 2>/dev/null || cp "$vm/images/node.tar" "$saved"
  cp "$vm/image" "$saved.name"
}
# The last node image built, kept for REUSE_IMAGE=1 (other checks on the same image).
saved=$cache/kind-node-$RUNTIME.tar
if [ "${REUSE_IMAGE:-0}" = 1 ] && [ -f "$saved" ] && [ -f "$saved.name" ]; then
  say "REUSE_IMAGE=1: the node image of an earlier run, $(cat "$saved.name") ($(date -r "$saved" +%F\ %T))"
  ln "$saved" "$vm/images/node.tar" 2>/dev/null || cp "$saved" "$vm/images/node.tar"
  cp "$saved.name" "$vm/image"
else
  build_node_image
fi

# The test image: busybox with memtouch (the swap checks' hog).
gcc -static -O2 -Wall -o "$work/memtouch" hack/vm/src/memtouch.c
EXTRA_BINS="$work/memtouch" hack/build-busybox-image.sh "$work/busybox" localhost/busybox:latest >/dev/null
mv "$work/busybox.tar" "$vm/busybox.tar"

# The cluster: contrib/kind/cluster.yaml as operators use it (containerd: the same kubelet
# settings on containerd's socket), one node in the short form; kubeadm waits longer than its
# 4-minute default for the control plane, which starts slowly under emulation.
if [ "$RUNTIME" = swapcri ]; then
  cp contrib/kind/cluster.yaml "$vm/cluster.yaml"
else
  cat >"$vm/cluster.yaml" <<'EOF'
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
  - role: worker
kubeadmConfigPatches:
  - |
    kind: KubeletConfiguration
    failSwapOn: false
    memorySwap:
      swapBehavior: LimitedSwap
EOF
fi
[ "$FORM" = short ] && sed -i '/role: worker/d' "$vm/cluster.yaml"
cat >>"$vm/cluster.yaml" <<'EOF'
  - |
    kind: InitConfiguration
    timeouts:
      controlPlaneComponentHealthCheck: 20m0s
      kubeletHealthCheck: 20m0s
  - |
    kind: JoinConfiguration
    timeouts:
      kubeletHealthCheck: 20m0s
      tlsBootstrap: 20m0s
      discovery: 20m0s
EOF

say "the VM (hack/vm/systemd-node.sh --kind)"
timeout=2400
[ "$FORM" = long ] && timeout=6000
status=0
KIND_DIR=$vm KIND_TIMEOUT=$timeout hack/vm/systemd-node.sh --kind 2>"$work/vm.log" || status=$?
grep -v '^\[systemd\] E2E-RESULT' "$work/vm.log" >&2 || true
pass=0 fail=0
while read -r _ _ name verdict details; do
  echo "  $verdict ${name#kind-}: $details"
  if [ "$verdict" = PASS ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
done < <({ grep -a '^\[systemd\] E2E-RESULT kind-' "$work/vm.log" || true; } | tr -d '\r')
{ grep -a '^\[systemd\] E2E-FIGURE kind-' "$work/vm.log" || true; } | tr -d '\r' | sed 's/^\[systemd\] E2E-FIGURE kind-/  figure /'
[ "$status" = 0 ] || [ "$fail" != 0 ] || fail=1 # the VM failed without a failed check: count it
say "$RUNTIME, form $FORM: $(($(date +%s) - t0)) s in all"
echo "kind-cluster: $pass passed, $fail failed"
[ "$fail" = 0 ] && [ "$pass" != 0 ]
