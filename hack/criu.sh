#!/usr/bin/env bash
# CRIU 4.1.1, which checkpoints and restores need (runc and crun run the `criu` in PATH;
# swapcri's [checkpoint] criu names it). Debian bookworm's CRIU 3.17.1 fails `criu check` on
# newer kernels ("vdso: Unexpected rt vDSO area bounds" on 6.18), so this builds Debian
# trixie's 4.1.1 from its source archive (the upstream tarball, checked against the digest
# pinned here and in trixie's Sources index) with bookworm's libraries, and caches it.
#   sudo hack/criu.sh [DIR]     DIR default /var/cache/swapcri-tools; prints the binary's path
#                               (DIR/criu-4.1.1/criu), then `criu check`'s verdict on stderr
# About 30 s on 2 cores the first time. The binary needs, at run time, the libraries of the
# build packages hack/lib.sh lists (libprotobuf-c1, libnl-3-200, libnet1, libnftables1, …).
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
require_root
install_packages

version=4.1.1
sha256=f80a66cb3726bb2116266d4759ce3bcbfab7abdb6b6d430bf20dd41911717afe
dir=$(mkdir -p "${1:-/var/cache/swapcri-tools}" && cd "${1:-/var/cache/swapcri-tools}" && pwd)
out=$dir/criu-$version/criu
if [ ! -x "$out" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  # Where the node's apt finds Debian (its own mirror, proxy and all).
  mirror=$(apt-get indextargets --format '$(URI)' 'Created-By: Packages' 2>/dev/null |
    sed -n 's|^\(.*\)/dists/.*|\1|p' | head -n 1)
  tarball=criu_$version.orig.tar.xz
  echo "==> CRIU $version: downloading $tarball from ${mirror:-http://deb.debian.org/debian}" >&2
  curl -fsSL --retry 3 -o "$work/$tarball" "${mirror:-http://deb.debian.org/debian}/pool/main/c/criu/$tarball"
  echo "$sha256  $work/$tarball" | sha256sum -c --quiet -
  tar -C "$work" -xf "$work/$tarball"
  echo "==> CRIU $version: building" >&2
  if ! make -C "$work/criu-$version" -j"$(nproc)" criu >"$work/build.log" 2>&1; then
    tail -n 30 "$work/build.log" >&2
    echo "criu.sh: make criu failed" >&2
    exit 1
  fi
  install -D -m 0755 "$work/criu-$version/criu/criu" "$out.new"
  mv "$out.new" "$out"
fi
echo "$out"
# What this kernel lets CRIU do (a warning is not a failure: checkpoints may still work).
"$out" check >&2 || echo "criu.sh: \`criu check\` failed on $(uname -r)" >&2
