# Shared by the VM e2e scripts (sourced): the package cache, Debian's kernels and their modules.
cache=${SWAPCRI_VM_CACHE:-/var/cache/swapcri-vm}
mkdir -p "$cache"
log() { echo "e2e: $(date +%T) $*" >&2; }

# apt for bookworm-backports only, in the cache: the host's sources stay untouched.
backports_apt() {
  local dir=$cache/apt-backports
  mkdir -p "$dir/parts" "$dir/lists/partial" "$dir/cache"
  cat >"$dir/parts/backports.sources" <<EOF
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  local opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$dir/parts"
    -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache")
  if [ -z "$(find "$dir/lists" -name '*Packages*' -mmin -1440 2>/dev/null)" ]; then
    apt-get "${opts[@]}" update -qq >/dev/null 2>&1 || log "bookworm-backports index update failed"
  fi
  echo "${opts[@]}"
}

# fetch_kernel 6.1|6.12: unpacks the kernel package into the cache; sets kdir and release.
fetch_kernel() {
  local opts=()
  [ "$1" = 6.12 ] && read -ra opts <<<"$(backports_apt)"
  local pkg
  pkg=$(apt-cache "${opts[@]}" depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
  [ -n "$pkg" ] || { log "no linux-image-amd64 for $1"; return 1; }
  release=${pkg#linux-image-}
  case $release in "$1".*) ;; *) log "kernel $1: the archive offers $release"; return 1 ;; esac
  kdir=$cache/$pkg
  if [ ! -f "$kdir/boot/vmlinuz-$release" ]; then
    log "downloading $pkg"
    (cd "$cache" && apt-get "${opts[@]}" download "$pkg" >/dev/null 2>&1)
    dpkg -x "$cache/${pkg}"_*.deb "$kdir"
  fi
  # The package leaves modules.dep to its postinst.
  [ -f "$kdir/lib/modules/$release/modules.dep" ] || depmod -b "$kdir" "$release"
}

# add_modules ROOT [MODULE…]: the modules the VM loads (default: virtio, zram, overlay) and
# their dependencies, uncompressed, in load order (listed in ROOT/modules/order).
add_modules() {
  local dest=$1/modules moddir=$kdir/lib/modules/$release
  shift
  local wanted="${*:-virtio_pci virtio_blk zram overlay}"
  mkdir -p "$dest"
  : >"$dest/order"
  declare -A done_mods=()
  load() { # load PATH (relative to moddir, as modules.dep names it)
    local path=$1 dep
    [ -n "${done_mods[$path]:-}" ] && return 0
    done_mods[$path]=1
    local deps
    deps=$(awk -v m="$path:" '$1 == m { for (i = NF; i > 1; i--) print $i }' "$moddir/modules.dep")
    for dep in $deps; do load "$dep"; done
    local name
    name=$(basename "${path%%.ko*}").ko
    case $path in
      *.ko.xz) xz -dc "$moddir/$path" >"$dest/$name" ;;
      *.ko.zst) zstd -qdc "$moddir/$path" >"$dest/$name" ;;
      *) cp "$moddir/$path" "$dest/$name" ;;
    esac
    echo "$name" >>"$dest/order"
  }
  local m path
  for m in $wanted; do
    path=$(awk -F: -v m="$m" '{ n = $1; sub(/.*\//, "", n); sub(/\.ko.*/, "", n); if (n == m) { print $1; exit } }' "$moddir/modules.dep")
    [ -n "$path" ] && load "$path" # absent from modules.dep: built into the kernel
  done
}

# install_modules ROOT MODULE…: the modules and their dependencies, as packaged, under
# ROOT/lib/modules/<release> with a modules.dep, for modprobe on a booted root filesystem.
install_modules() {
  local root=$1 moddir=$kdir/lib/modules/$release m path dep
  shift
  mkdir -p "$root/lib/modules/$release"
  cp "$moddir"/modules.builtin* "$moddir"/modules.order "$root/lib/modules/$release/" 2>/dev/null || true
  for m in "$@"; do
    path=$(awk -F: -v m="$m" '{ n = $1; sub(/.*\//, "", n); sub(/\.ko.*/, "", n); if (n == m) { print $0; exit } }' "$moddir/modules.dep")
    [ -n "$path" ] || continue # built into the kernel
    for dep in $(echo "$path" | tr -d ':'); do
      mkdir -p "$root/lib/modules/$release/$(dirname "$dep")"
      cp "$moddir/$dep" "$root/lib/modules/$release/$dep"
    done
  done
  depmod -b "$root" "$release"
}

# rootfs_tarball PACKAGES [SUITE]: a Debian root filesystem of SUITE (default bookworm;
# debootstrap, minbase, plus the comma-separated PACKAGES) as a tarball in the cache, made once
# per suite and package list; prints its path.
rootfs_tarball() {
  local suite=${2:-bookworm}
  local tarball=$cache/rootfs-$suite-$(echo "$suite $1" | sha256sum | cut -c1-12).tar dir
  if [ ! -f "$tarball" ]; then
    dir=$(mktemp -d)
    log "debootstrap $suite with $1 (cached as $tarball)"
    debootstrap --variant=minbase --include="$1" "$suite" "$dir/root" "${SWAPCRI_DEBIAN_MIRROR:-http://deb.debian.org/debian}" \
      >"$dir/debootstrap.log" 2>&1 || { tail -n 20 "$dir/debootstrap.log" >&2; rm -rf "$dir"; return 1; }
    rm -f "$dir/root/var/cache/apt/archives"/*.deb
    # A part of its own: two runs that build the same tarball at once must not write one file.
    tar -C "$dir/root" -cf "$dir/rootfs.tar" . && mv "$dir/rootfs.tar" "$tarball"
    rm -rf "$dir"
  fi
  echo "$tarball"
}
