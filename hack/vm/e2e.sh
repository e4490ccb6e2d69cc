#!/usr/bin/env bash
# End-to-end on real cgroup v2 with real swap: boots Debian's kernel under QEMU (TCG) with an
# initramfs holding busybox, runc, swapcri and a test image, runs hack/vm/scenarios.sh there
# and turns its E2E-RESULT lines into pass/fail.
#   hack/vm/e2e.sh [--kernel 6.1]
# Downloaded packages are cached in $SWAPCRI_VM_CACHE (default /var/cache/swapcri-vm).
set -euo pipefail
cd "$(dirname "$0")/../.."
source hack/lib.sh

kernel=6.1
while [ $# -gt 0 ]; do
  case $1 in
    --kernel) kernel=$2; shift 2 ;;
    *) echo "usage: $0 [--kernel 6.1]" >&2; exit 2 ;;
  esac
done
[ "$kernel" = 6.1 ] || { echo "kernel $kernel: only 6.1 (bookworm) is built by this harness" >&2; exit 2; }

cache=${SWAPCRI_VM_CACHE:-/var/cache/swapcri-vm}
mkdir -p "$cache"
log() { echo "e2e: $*" >&2; }

# The kernel and its modules, from Debian's linux-image-amd64 (cached by version).
pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
release=${pkg#linux-image-}
kdir=$cache/$pkg
if [ ! -f "$kdir/boot/vmlinuz-$release" ]; then
  log "downloading $pkg"
  (cd "$cache" && apt-get download "$pkg" >/dev/null 2>&1)
  dpkg -x "$cache/${pkg}"_*.deb "$kdir"
fi

log "building swapcri (release)"
cargo build --release --locked --quiet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,etc/swapcri,modules,e2e,images,proc,sys,dev,run,tmp,var/lib,var/log,lib64,lib/x86_64-linux-gnu}

cp /bin/busybox "$root/bin/busybox"
for applet in $(/bin/busybox --list); do
  [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done
copy_with_libs() { # copy_with_libs BINARY DEST
  cp "$1" "$root$2"
  for lib in $(ldd "$1" | grep -o '/[^ ]*\.so[^ ]*'); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
}
copy_with_libs /usr/sbin/runc /usr/sbin/runc
copy_with_libs target/release/swapcri /usr/local/bin/swapcri
for m in mm/zsmalloc.ko drivers/block/zram/zram.ko fs/overlayfs/overlay.ko; do
  cp "$kdir/lib/modules/$release/kernel/$m" "$root/modules/"
done
cp hack/vm/init.sh "$root/init"
cp hack/vm/scenarios.sh "$root/e2e/scenarios.sh"
cp hack/vm/config.toml "$root/etc/swapcri/config.toml"
chmod +x "$root/init"
hack/build-busybox-image.sh "$work/busybox" localhost/busybox:latest >/dev/null
cp "$work/busybox.tar" "$root/images/busybox.tar"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initrd.gz"

log "booting $release under QEMU (TCG)"
out=$work/console.log
started=$(date +%s)
timeout 900 qemu-system-x86_64 -accel tcg -m 2048 -smp 2 -nographic -no-reboot \
  -kernel "$kdir/boot/vmlinuz-$release" -initrd "$work/initrd.gz" \
  -append "console=ttyS0 rdinit=/init panic=-1 quiet systemd.unified_cgroup_hierarchy=1" \
  </dev/null >"$out" 2>&1 || log "qemu exited with $?"
log "VM ran $(( $(date +%s) - started )) s"

grep -a '^E2E-' "$out" | tr -d '\r' >&2 || true
if ! grep -aq '^E2E-DONE' "$out"; then
  log "the VM did not finish; console:"
  tail -n 60 "$out" >&2
  exit 1
fi
pass=$(grep -ac '^E2E-RESULT [^ ]* PASS' "$out" || true)
fail=$(grep -ac '^E2E-RESULT [^ ]* FAIL' "$out" || true)
log "kernel $release: $pass passed, $fail failed"
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
