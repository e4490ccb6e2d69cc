#!/usr/bin/env bash
# End-to-end on real cgroup v2 with real swap: boots Debian's kernels under QEMU (TCG) with an
# initramfs holding busybox, runc, swapcri and a test image, runs hack/vm/scenarios.sh there
# and turns its E2E-RESULT lines into pass/fail.
#   hack/vm/e2e.sh [--kernel 6.1|6.12|all]      (default: all)
#   hack/vm/e2e.sh --node systemd               (a systemd-booted node: hack/vm/systemd-node.sh)
#   hack/vm/e2e.sh --only offload               (only hack/vm/offload.sh's scenarios, no itests)
#   hack/vm/e2e.sh --only itests                (only the integration tests, SWAPCRI_VM_ITESTS)
#   hack/vm/e2e.sh --only guard-disk            (the guard on a node that swaps to its own disk:
#                                               hack/vm/guard-disk.sh; about 10 minutes per
#                                               kernel; measure with --kernel, one VM at a time)
#   hack/vm/e2e.sh --only kubelet-thrash        (kubelet's health while a pod thrashes, on the
#                                               systemd node swapping to its throttled root disk:
#                                               hack/vm/kubelet-thrash.sh; one VM at a time;
#                                               --kernel 6.1, 6.12 (the default) or all)
#   SWAPCRI_VM_OFFLOAD_SECONDS=300              how long the offload watches its hot container
#                                               (default 60; 300 is the long form)
# 6.1 is bookworm's linux-image-amd64, 6.12 bookworm-backports'. Downloaded packages are cached
# in $SWAPCRI_VM_CACHE (default /var/cache/swapcri-vm), keyed by package version.
set -euo pipefail
cd "$(dirname "$0")/../.."
source hack/lib.sh

kernels="6.1 6.12"
kernels_set=0
only=""
# Integration test binaries (tests/*.rs) also run inside the VM; NAME=FILTER runs only the
# tests of NAME whose names contain FILTER (TCG is slow: the rest of it runs on the host).
ITESTS=${SWAPCRI_VM_ITESTS:-memory_plan_as_root oom_watch_as_root metrics_as_root stats_as_root top_as_root pod_lifecycle_as_root pod_namespace_loss_as_root userns_as_root nri_as_root cgroup_libcgroups cri_features_as_root=cri_metrics checkpoint_as_root checkpoint_swap_as_root}
while [ $# -gt 0 ]; do
  case $1 in
    --kernel) kernels=$2 kernels_set=1; [ "$kernels" = all ] && kernels="6.1 6.12"; shift 2 ;;
    --only)
      only=$2
      case $only in
        offload | guard-disk) ITESTS="" ;;
        itests) ;;
        kubelet-thrash) ;;
        *) echo "--only offload|guard-disk|itests|kubelet-thrash" >&2; exit 2 ;;
      esac
      shift 2 ;;
    --node)
      case $2 in
        systemd) shift 2; exec hack/vm/systemd-node.sh "$@" ;;
        initramfs) shift 2 ;;
        *) echo "--node systemd or initramfs" >&2; exit 2 ;;
      esac ;;
    *) echo "usage: $0 [--kernel 6.1|6.12|all] [--node initramfs|systemd]" >&2; exit 2 ;;
  esac
done
for k in $kernels; do
  case $k in 6.1 | 6.12) ;; *) echo "kernel $k: 6.1 or 6.12" >&2; exit 2 ;; esac
done
if [ "$only" = kubelet-thrash ]; then
  # A systemd node (kubelet needs one here), 6.12 unless --kernel says; one VM at a time, since
  # what it measures is a node under load.
  [ "$kernels_set" = 1 ] || kernels=6.12
  status=0
  for k in $kernels; do SWAPCRI_NODE_KERNEL=$k hack/vm/systemd-node.sh --kubelet-thrash || status=1; done
  exit $status
fi

source hack/vm/lib.sh

log "building swapcri (release)"
cargo build --release --locked --quiet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The part of the initramfs every kernel shares.
base=$work/base
mkdir -p "$base"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,etc/swapcri,e2e,images,proc,sys,dev,run,tmp,var/lib,var/log,lib64,lib/x86_64-linux-gnu}
cp /bin/busybox "$base/bin/busybox"
for applet in $(/bin/busybox --list); do
  [ -e "$base/bin/$applet" ] || ln -s busybox "$base/bin/$applet"
done
copy_libs() { # copy_libs BINARY: the shared libraries it needs
  for lib in $(ldd "$1" | grep -o '/[^ ]*\.so[^ ]*'); do
    mkdir -p "$base$(dirname "$lib")"
    cp -L "$lib" "$base$lib"
  done
}
copy_with_libs() { # copy_with_libs BINARY DEST
  cp "$1" "$base$2"
  copy_libs "$1"
}
copy_with_libs /usr/sbin/runc /usr/sbin/runc
# A second runtime handler, configured in phase D (crun refuses hybrid hosts; here it runs).
copy_with_libs /usr/bin/crun /usr/bin/crun
# runc 1.4.3 (id-mapped mounts) for the user-namespace tests.
copy_with_libs "$(newer_runc)" /usr/local/bin/runc-new
copy_with_libs target/release/swapcri /usr/local/bin/swapcri
# CRIU 4.1.1 (hack/criu.sh) for the checkpoint tests; its check runs first (itests.sh).
mkdir -p "$base/usr/local/sbin"
copy_with_libs "$(criu_binary 2>/dev/null)" /usr/local/sbin/criu
# CRIU locks a container's network with iptables-restore while it dumps: iptables (nft)
# with its extensions, as every node running kube-proxy has.
copy_with_libs /usr/sbin/xtables-nft-multi /usr/sbin/xtables-nft-multi
for tool in iptables iptables-restore ip6tables ip6tables-restore; do ln -s xtables-nft-multi "$base/usr/sbin/$tool"; done
# CRIU saves a container's tmpfs mounts (its /dev among them) with GNU tar's options, which
# busybox's tar lacks.
rm "$base/bin/tar"
copy_with_libs /bin/tar /bin/tar
mkdir -p "$base/usr/lib/x86_64-linux-gnu/xtables"
cp -a /usr/lib/x86_64-linux-gnu/xtables/. "$base/usr/lib/x86_64-linux-gnu/xtables/"
# Pods get a loopback-only CNI network (the VM has no other network).
mkdir -p "$base/usr/lib/cni" "$base/etc/cni/net.d"
copy_with_libs /usr/lib/cni/loopback /usr/lib/cni/loopback
echo '{"cniVersion": "1.0.0", "name": "lo-only", "plugins": [{"type": "loopback"}]}' >"$base/etc/cni/net.d/99-loopback.conflist"
cp hack/vm/init.sh "$base/init"
chmod +x "$base/init"
cp hack/vm/scenarios.sh hack/vm/helpers.sh hack/vm/offload.sh hack/vm/guard-disk.sh "$base/e2e/"
# mkfs.ext4 for the disk-backed node (--only guard-disk).
copy_with_libs /sbin/mke2fs /sbin/mke2fs
ln -s mke2fs "$base/sbin/mkfs.ext4"
[ -z "$only" ] || echo "$only" >"$base/e2e/only"
offload_seconds=${SWAPCRI_VM_OFFLOAD_SECONDS:-60}
case $offload_seconds in [1-9][0-9] | [1-9][0-9][0-9] | [1-9][0-9][0-9][0-9]) ;; *) echo "SWAPCRI_VM_OFFLOAD_SECONDS=60..9999" >&2; exit 2 ;; esac
echo "$offload_seconds" >"$base/e2e/offload-seconds"
# memtouch: hot, cold and one-off memory for the swap-safety scenarios.
gcc -static -O2 -Wall -o "$work/memtouch" hack/vm/src/memtouch.c
EXTRA_BINS="$work/memtouch" hack/build-busybox-image.sh "$work/busybox" localhost/busybox:latest >/dev/null
cp "$work/busybox.tar" "$base/images/busybox.tar"

# The root integration tests run in the VM too: a cgroup v2 node with swap. They start the
# daemon at the path cargo compiled into them; the release build stands in there.
if [ -n "$ITESTS" ]; then
  log "building the integration tests for the VM: $ITESTS"
  tests=$(cargo test --locked --no-run --message-format=json $(printf -- '--test %s ' $(printf '%s\n' $ITESTS | sed 's/=.*//')) 2>/dev/null |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["executable"])')
  mkdir -p "$base/e2e/itests" "$base$PWD/target/debug"
  for t in $tests; do
    name=$(basename "$t" | sed 's/-[0-9a-f]*$//')
    strip -o "$base/e2e/itests/$name" "$t"
    copy_libs "$t"
  done
  for item in $ITESTS; do
    case $item in *=*) echo "${item#*=}" >"$base/e2e/itests/${item%%=*}.filter" ;; esac
  done
  cp target/release/swapcri "$base$PWD/target/debug/swapcri"
  # The NRI test starts the example plugin from beside the daemon's binary.
  cargo build --locked --example nri_swap_limiter 2>/dev/null
  mkdir -p "$base$PWD/target/debug/examples"
  strip -o "$base$PWD/target/debug/examples/nri_swap_limiter" target/debug/examples/nri_swap_limiter
  cp hack/vm/itests.sh "$base/e2e/itests.sh"
fi

# boot_vm K: runs kernel K's VM to the end; its console in $work/console-K.log.
boot_vm() {
  local k=$1 started
  started=$(date +%s)
  # One TCG thread for both vCPUs: with multi-threaded TCG the 6.12 kernel sometimes oopses
  # at boot while patching its own code (int3 in sched_clock_cpu).
  # The disk-backed node's disk (--only guard-disk) is throttled as a cloud volume is (400
  # IOPS, 40 MB/s) and syncs for real, so swapping and the neighbour's fsyncs contend on it.
  local disk=() limit=1200
  [ "$only" != guard-disk ] || limit=2400 disk=(-drive "file=$work/disk-$k.img,if=virtio,format=raw,cache=none,throttling.iops-total=400,throttling.bps-total=41943040")
  timeout $limit qemu-system-x86_64 -accel tcg,thread=single -m 2048 -smp 2 -nographic -no-reboot \
    -kernel "${kdirs[$k]}/boot/vmlinuz-${releases[$k]}" -initrd "$work/initrd-$k.gz" \
    -drive "file=$work/swap-$k.img,if=virtio,format=raw,cache=unsafe" "${disk[@]}" \
    -append "console=ttyS0 rdinit=/init panic=-1 quiet systemd.unified_cgroup_hierarchy=1" \
    </dev/null >"$work/console-$k.log" 2>&1 || log "qemu ($k) exited with $?"
  rm -f "$work/swap-$k.img" "$work/disk-$k.img"
  echo $(($(date +%s) - started)) >"$work/took-$k"
}

failed=0
summary=()
declare -A releases kdirs
booted=()
for k in $kernels; do
  if ! fetch_kernel "$k"; then
    failed=1; summary+=("kernel $k: not available"); continue
  fi
  releases[$k]=$release kdirs[$k]=$kdir
  root=$work/root-$k
  cp -a "$base" "$root"
  # For CRIU, what a node with its modules loads on demand and this initramfs up front:
  # nf_tables (CRIU probes it at start; iptables-nft's network lock), nft_compat and xt_mark
  # (the lock's rules), veth (`criu check` makes a pair), and the socket diagnostics CRIU
  # lists a dumped netns's sockets with and conntrack's netlink it reads the connections with
  # (without any of them the dump fails).
  add_modules "$root" virtio_pci virtio_blk zram overlay crc32c_generic ext4 nf_tables nft_compat xt_mark veth \
    unix_diag inet_diag tcp_diag udp_diag raw_diag af_packet_diag netlink_diag nf_conntrack_netlink
  (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initrd-$k.gz"
  rm -rf "$root"
  # The second swap area: a virtio disk, so the io protection has a real disk to work on.
  truncate -s 256M "$work/swap-$k.img"
  [ "$only" != guard-disk ] || truncate -s 2G "$work/disk-$k.img"
  booted+=("$k")
done
# Each VM is one emulation thread: they run side by side, a host core each.
for k in "${booted[@]}"; do
  log "booting ${releases[$k]} under QEMU (TCG)"
  boot_vm "$k" &
done
wait
for k in "${booted[@]}"; do
  release=${releases[$k]} out=$work/console-$k.log took=$(cat "$work/took-$k")
  log "VM $release ran $took s"
  grep -a '^E2E-' "$out" | tr -d '\r' | sed "s/^/[$k] /" >&2 || true
  if ! grep -aq '^E2E-DONE' "$out"; then
    log "kernel $release: the VM did not finish; console:"
    tail -n 80 "$out" >&2
    failed=1; summary+=("kernel $release: did not finish ($took s)"); continue
  fi
  pass=$(grep -ac '^E2E-RESULT [^ ]* PASS' "$out" || true)
  fail=$(grep -ac '^E2E-RESULT [^ ]* FAIL' "$out" || true)
  summary+=("kernel $release: $pass passed, $fail failed ($took s)")
  if [ "$fail" != 0 ] || [ "$pass" = 0 ]; then
    failed=1
    grep -a '^E2E-RESULT [^ ]* FAIL' "$out" | tr -d '\r' | sed 's/^/  /' >&2 || true
    log "swapcri log (kernel $release):"
    sed -n '/^E2E-SWAPCRI-LOG-BEGIN/,/^E2E-SWAPCRI-LOG-END/p' "$out" | tail -n 60 >&2
  fi
done
for line in "${summary[@]}"; do log "$line"; done
exit $failed
