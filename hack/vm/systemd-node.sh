#!/usr/bin/env bash
# End-to-end on a node as operators run it: a Debian bookworm root filesystem (debootstrap,
# cached) on a virtio disk, systemd as PID 1 on cgroup v2, swap on zram and on a partition of
# a second virtio disk, swapcri installed from its Debian package (hack/package.sh) with dpkg
# as swapcri.service with the systemd cgroup driver, upgraded and removed at the end
# (hack/vm/package-scenarios.sh). Boots bookworm-backports' 6.12 kernel under QEMU (TCG); the
# scenarios (hack/vm/systemd-scenarios.sh) run in a unit of their own and print E2E-RESULT
# lines, which become pass/fail here.
#   hack/vm/systemd-node.sh [--critest]   (also: hack/vm/e2e.sh --node systemd [--critest])
# --critest: instead of the scenarios, the whole CRI validation suite once per cgroup driver
# (hack/vm/critest-node.sh; a long form, about 18 minutes under emulation).
# --node-e2e: instead of the scenarios, Kubernetes' node e2e suite with a real kubelet
# (hack/vm/node-e2e-node.sh; hack/node-e2e.sh prepares and names what it runs: NODE_E2E_DIR
# holds kubelet, e2e_node.test, and the files driver, focus, skip and timeout; the reports
# come back in NODE_E2E_DIR/report).
# --kubelet-thrash: instead of the scenarios, kubelet's health while a pod thrashes
# (hack/vm/kubelet-thrash.sh): the node's only swap is a file on its root disk, throttled as
# a cloud volume is (400 IOPS, 40 MB/s); KUBELET_THRASH_ARMS (observe throttle kill
# containerd) and KUBELET_THRASH_SECONDS (60: each measure); SWAPCRI_NODE_KERNEL 6.12 or 6.1.
# --kind: instead of the scenarios, a kind cluster made by Docker's engine on the node
# (hack/vm/kind-node.sh; hack/kind-cluster.sh prepares KIND_DIR: the node images, kind, kubectl,
# the cluster configuration and the files runtime, form and image).
# SWAPCRI_VM_CRITEST=N: after the scenarios, critest's basic and pod specs N times with the
# systemd driver and the node's vCPUs kept busy (hack/vm/critest-soak.sh; a long form, about
# 3 minutes a run under emulation).
set -euo pipefail
cd "$(dirname "$0")/../.."
source hack/lib.sh
source hack/vm/lib.sh
t_start=$(date +%s)
full_critest=0 node_e2e=0 kind=0 thrash=0
case ${1:-} in
  --critest) full_critest=1 ;;
  --node-e2e) node_e2e=1 ;;
  --kind) kind=1 ;;
  --kubelet-thrash) thrash=1 ;;
  "") ;;
  *) echo "usage: $0 [--critest|--node-e2e|--kind|--kubelet-thrash]" >&2; exit 2 ;;
esac
# They run CRI clients (a suite, or kubelet) with pods on a bridge.
suite=$((full_critest + node_e2e + thrash))
kernel=${SWAPCRI_NODE_KERNEL:-6.12}
case $kernel in 6.1 | 6.12) ;; *) echo "SWAPCRI_NODE_KERNEL=6.1 or 6.12" >&2; exit 2 ;; esac

# What the node's root filesystem holds besides swapcri; the cache key follows it.
PACKAGES=systemd,systemd-sysv,dbus,udev,kmod,iproute2,runc,procps,e2fsprogs,util-linux,fdisk,ca-certificates
# The suite also needs iptables (host ports), apparmor (its AppArmor specs load profiles
# with apparmor_parser, run through sudo; swapcri loads its default profile), python3 (its
# summary) and curl (the node e2e's Summary API check talks to the API server and kubelet).
if [ "$suite" = 1 ]; then PACKAGES+=,iptables,apparmor,sudo,python3,curl; fi
# The node e2e's checkpoint spec: the libraries of CRIU 4.1.1 (hack/criu.sh, built against
# bookworm's; installed as /usr/local/sbin/criu, where the runtimes find it).
if [ "$node_e2e" = 1 ]; then PACKAGES+=,libprotobuf-c1,libnl-3-200,libnet1,libnftables1,libbsd0,libgnutls30,libuuid1; fi
# kind: Docker's engine (with its containerd and runc), and what the checks read with.
if [ "$kind" = 1 ]; then PACKAGES+=,docker.io,iptables,python3,curl; fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "$kind" = 0 ]; then # the kind node runs swapcri inside its kind nodes only
  log "building swapcri's Debian package (hack/package.sh), and the same as a newer version"
  # Two nodes may start side by side (the node e2e compares runtimes so): package.sh edits
  # debian/ in the tree and writes the same file names, so one node builds and copies at a time.
  mkdir -p target
  exec 8>>target/.systemd-node-package.lock
  flock 8
  pkglog=$(mktemp)
  hack/package.sh >"$pkglog" || { cat "$pkglog" >&2; rm -f "$pkglog"; exit 1; }
  grep -v '^N:' "$pkglog" >&2 # lintian's tags, without their explanations
  built=$(tail -n 1 "$pkglog")
  rm -f "$pkglog"
  first=$work/first.deb next=$work/next.deb
  cp "$built" "$first"
  cp "$(hack/package.sh --no-lintian --version "$(dpkg-deb -f "$built" Version)+e2e1" | tail -n 1)" "$next"
  exec 8>&-
fi
hack/tools.sh /var/cache/swapcri-tools crictl >/dev/null
fetch_kernel "$kernel"

tarball=$(rootfs_tarball "$PACKAGES")

log "preparing the node's root filesystem"
root=$work/root
mkdir -p "$root"
tar -C "$root" -xf "$tarball"
echo swapcri-node >"$root/etc/hostname"
# The node resolves its own name (sudo warns on stderr otherwise).
printf '127.0.0.1 localhost\n127.0.1.1 swapcri-node\n' >"$root/etc/hosts"
echo "/dev/vda / ext4 rw,relatime 0 1" >"$root/etc/fstab"
# A machine id of its own (the host need not have systemd to make one).
tr -d - </proc/sys/kernel/random/uuid >"$root/etc/machine-id"
# Nothing on the console but the test's output; nothing else running meanwhile.
for unit in serial-getty@ttyS0.service getty@tty1.service systemd-firstboot.service apt-daily.timer \
  apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer systemd-timesyncd.service; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
netfilter=
if [ "$suite" = 1 ] || [ "$kind" = 1 ]; then
  # Host ports: iptables (nft) loads its modules on demand; these and what they need from
  # outside net/ (crc32c, …) come with their dependencies.
  mkdir -p "$root/lib/modules/$release/kernel"
  cp -a "$kdir/lib/modules/$release/kernel/net" "$root/lib/modules/$release/kernel/"
  netfilter="nf_tables nft_compat nft_chain_nat nf_nat nf_conntrack xt_MASQUERADE xt_mark xt_comment xt_multiport xt_conntrack xt_addrtype"
fi
# dummy: the node e2e node's default route (its API server needs one to advertise).
[ "$kind" = 1 ] && netfilter+=" br_netfilter xt_statistic xt_nat ip6_tables ip6table_nat ip6table_filter iptable_nat iptable_filter"
install_modules "$root" zram overlay bridge veth dummy $netfilter  # bridge, veth: the critest soak's pod network
# Pods get a loopback-only network (the VM has no other; the critest soak brings a bridge of
# its own).
for plugin in loopback bridge host-local portmap; do
  install -D -m 0755 /usr/lib/cni/$plugin "$root/usr/lib/cni/$plugin"
done
mkdir -p "$root/etc/cni/net.d"
echo '{"cniVersion": "1.0.0", "name": "lo-only", "plugins": [{"type": "loopback"}]}' >"$root/etc/cni/net.d/99-loopback.conflist"
if [ "$kind" = 0 ]; then
  install -D -m 0644 "$first" "$root/e2e/pkg/first.deb"
  install -D -m 0644 "$next" "$root/e2e/pkg/next.deb"
fi
install -m 0755 /var/cache/swapcri-tools/crictl "$root/usr/local/bin/crictl"
install -m 0644 contrib/crictl.yaml "$root/etc/crictl.yaml"
install -D -m 0755 hack/vm/package-scenarios.sh "$root/e2e/package-scenarios.sh"
# memtouch: the swap guard's thrasher.
gcc -static -O2 -Wall -o "$work/memtouch" hack/vm/src/memtouch.c
EXTRA_BINS="$work/memtouch" hack/build-busybox-image.sh "$work/busybox" localhost/busybox:latest >/dev/null
install -D -m 0644 "$work/busybox.tar" "$root/images/busybox.tar"
install -D -m 0755 hack/vm/systemd-scenarios.sh "$root/e2e/systemd-scenarios.sh"
critest_runs=${SWAPCRI_VM_CRITEST:-0}
if [ "$full_critest" = 1 ]; then
  install -m 0755 "$(newer_runc)" "$root/usr/local/bin/runc-new"
  install -m 0755 hack/vm/critest-node.sh "$root/e2e/critest-node.sh"
  install -m 0644 hack/critest/summary.py "$root/e2e/summary.py"
  mkdir -p "$root/etc/swapcri/cni-critest"
  write_bridge_conflist "$root/etc/swapcri/cni-critest/10-critest.conflist" critest critest0 10.89.0.0/16
fi
if [ "$node_e2e" = 1 ]; then
  install -m 0755 "$(newer_runc)" "$root/usr/local/bin/runc-new"
  install -D -m 0755 "$(criu_binary 2>/dev/null)" "$root/usr/local/sbin/criu"
  install -m 0755 hack/vm/node-e2e-node.sh "$root/e2e/node-e2e-node.sh"
  install -m 0755 hack/vm/summary-swap.sh "$root/e2e/summary-swap.sh"
  install -m 0644 hack/critest/summary.py "$root/e2e/summary.py"
  cp -a "$NODE_E2E_DIR/." "$root/e2e/node-e2e/"
  rm -rf "$root/e2e/node-e2e/report"
  # The suite's system validation reads the kernel's build configuration.
  install -D -m 0644 "$kdir/boot/config-$release" "$root/boot/config-$release"
  mkdir -p "$root/etc/swapcri/cni-node-e2e"
  write_bridge_conflist "$root/etc/swapcri/cni-node-e2e/10-pods.conflist" node-e2e pods0 10.89.0.0/16
fi
if [ "$thrash" = 1 ]; then
  log "kubelet, the node e2e binary (its services mode), kubectl and containerd 2.4.2 (hack/tools.sh, cached)"
  mkdir -p "$root/e2e/kubelet-thrash"
  for tool in $(hack/tools.sh /var/cache/swapcri-tools kubelet e2e_node.test containerd containerd-shim-runc-v2 ctr); do
    install -m 0755 "$tool" "$root/e2e/kubelet-thrash/"
  done
  install -m 0755 "$(hack/tools.sh /var/cache/swapcri-tools kubectl)" "$root/usr/local/bin/kubectl"
  install -m 0755 "$(newer_runc)" "$root/usr/local/bin/runc-new"
  install -m 0755 hack/vm/kubelet-thrash.sh "$root/e2e/kubelet-thrash.sh"
  echo "${KUBELET_THRASH_ARMS:-observe throttle kill containerd}" >"$root/e2e/kubelet-thrash/arms"
  echo "${KUBELET_THRASH_SECONDS:-60}" >"$root/e2e/kubelet-thrash/seconds"
  mkdir -p "$root/etc/swapcri/cni-kubelet-thrash"
  write_bridge_conflist "$root/etc/swapcri/cni-kubelet-thrash/10-pods.conflist" kubelet-thrash pods0 10.89.0.0/16
fi
if [ "$critest_runs" -gt 0 ] || [ "$suite" = 1 ]; then
  log "critest and the suite's images for the node"
  prepare_critest "$work" >/dev/null
  install -m 0755 /var/cache/swapcri-tools/critest /usr/bin/docker-registry "$root/usr/local/bin/"
  mkdir -p "$root/var/lib/e2e-registry"
  cp -a "$REGISTRY_DIR/data" "$root/var/lib/e2e-registry/"
  printf 'version: 0.1\nstorage: { filesystem: { rootdirectory: /var/lib/e2e-registry/data } }\nhttp: { addr: 127.0.0.1:5000 }\n' \
    >"$root/e2e/registry.yml"
  install -m 0755 hack/vm/critest-soak.sh "$root/e2e/critest-soak.sh"
  if [ "$critest_runs" -gt 0 ]; then echo "$critest_runs" >"$root/e2e/critest-runs"; fi
fi
if [ "$kind" = 1 ]; then
  mkdir -p "$root/e2e/kind"
  cp -a "$KIND_DIR/." "$root/e2e/kind/"
  install -m 0755 "$root/e2e/kind/kind" "$root/e2e/kind/kubectl" "$root/usr/local/bin/"
  install -m 0755 hack/vm/kind-node.sh "$root/e2e/kind-node.sh"
  install -m 0755 hack/kind-load.sh "$root/e2e/kind-load.sh"
fi
install -m 0644 hack/vm/helpers.sh "$root/e2e/helpers.sh"
cat >"$root/e2e/run.sh" <<'EOF'
#!/bin/sh
# Swap on a disk partition (first) and on zram, then the scenarios, then power off. The
# kubelet thrash node swaps only to a file on its own (throttled) root disk.
if [ -f /e2e/kubelet-thrash.sh ]; then
  fallocate -l 2G /swapfile && chmod 0600 /swapfile && mkswap /swapfile >/dev/null && swapon /swapfile
else
  modprobe zram
  echo 256M >/sys/block/zram0/disksize
  mkswap /dev/zram0 >/dev/null && swapon -p 10 /dev/zram0
  mkswap /dev/vdb1 >/dev/null && swapon -p 100 /dev/vdb1
fi
echo "E2E-LOG booted in $(cut -d' ' -f1 /proc/uptime) s; $(systemctl is-system-running)"
[ -f /e2e/kind-node.sh ] || sh /e2e/package-scenarios.sh install
if [ -f /e2e/kind-node.sh ]; then
  HOME=/root bash /e2e/kind-node.sh
elif [ -f /e2e/node-e2e-node.sh ]; then
  sh /e2e/node-e2e-node.sh
elif [ -f /e2e/kubelet-thrash.sh ]; then
  sh /e2e/kubelet-thrash.sh
elif [ -f /e2e/critest-node.sh ]; then
  sh /e2e/critest-node.sh
else
  sh /e2e/systemd-scenarios.sh || echo "E2E-RESULT scenarios-ran-through FAIL the script stopped with status $?"
  sh /e2e/package-scenarios.sh upgrade
fi
[ -s /e2e/critest-runs ] && sh /e2e/critest-soak.sh
echo "E2E-DONE"
systemctl poweroff
EOF
cat >"$root/etc/systemd/system/swapcri-e2e.service" <<'EOF'
[Unit]
Description=swapcri systemd-node e2e

[Service]
Type=oneshot
ExecStart=/bin/sh /e2e/run.sh
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0

[Install]
WantedBy=multi-user.target
EOF
enable_in_root "$root" swapcri-e2e.service

# The root disk (ext4 made from the tree, no mount needed) and the swap disk: vdb1 swap,
# vdb2 data the system.slice reader reads.
qemu-img create -q -f raw "$work/root.img" $((3 + node_e2e * 5 + kind * 21 + thrash * 4))G
mkfs.ext4 -q -F -d "$root" -L root "$work/root.img"
rm -rf "$root"
# The node e2e node gets 2 GiB more swap: the suite's LimitedSwap stress specs size their pods
# from the node's memory and expect the swap share of such a pod to hold what passes its limit
# (with 640 MiB of swap for 4 GiB, the Summary API spec's pod is OOM-killed).
swap_mib=$((384 + node_e2e * 2048 + kind * 2048))
qemu-img create -q -f raw "$work/swap.img" $((swap_mib + 256))M
printf 'label: dos\nsize=%sMiB, type=82\ntype=83\n' "$swap_mib" | sfdisk -q "$work/swap.img" >/dev/null
# The node e2e suite's reports come back on a third disk, as a tar.
report_drive=()
if [ "$node_e2e" = 1 ]; then
  qemu-img create -q -f raw "$work/report.img" 512M
  report_drive=(-drive "file=$work/report.img,if=virtio,format=raw,cache=unsafe")
fi

# An initramfs that loads the disk and ext4 modules and hands over to systemd.
initrd=$work/initrd
mkdir -p "$initrd"/{bin,dev,proc,sys,newroot}
cp /bin/busybox "$initrd/bin/busybox"
for applet in sh mount umount insmod sleep switch_root echo cat dmesg tail poweroff; do ln -s busybox "$initrd/bin/$applet"; done
# ext4 asks the crypto API for crc32c at mount time: no modprobe here to load it then.
add_modules "$initrd" virtio_pci virtio_blk crc32c_generic ext4
cat >"$initrd/init" <<'EOF'
#!/bin/sh
mount -t proc proc /proc
mount -t devtmpfs dev /dev
for m in $(cat /modules/order); do insmod "/modules/$m" || echo "E2E-LOG insmod $m failed"; done
i=0
while [ ! -b /dev/vda ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
if ! mount -t ext4 -o rw /dev/vda /newroot; then
  echo "E2E-LOG cannot mount the root disk; partitions: $(cat /proc/partitions)"
  dmesg | tail -n 30
  poweroff -f
fi
umount /proc
mount --move /dev /newroot/dev
exec switch_root /newroot /sbin/init
EOF
chmod +x "$initrd/init"
(cd "$initrd" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initrd.gz"

t_boot=$(date +%s)
log "prepared in $((t_boot - t_start)) s; booting $release with systemd under QEMU (TCG)"
out=$work/console.log
# transparent_hugepage=madvise: with THP on every anonymous mapping, 6.12 hardly swaps huge
# pages out to a rotational disk under a cgroup limit (the hog's read fails short instead).
# zswap off: swapped pages go to the devices, where the io protection is measured.
vm_timeout=$((900 + critest_runs * 400 + full_critest * 10800 + node_e2e * ${NODE_E2E_TIMEOUT:-0} + kind * ${KIND_TIMEOUT:-0} + thrash * 5400))
# The kubelet thrash node's root disk carries its swap file: throttled, and synced for real.
root_drive="file=$work/root.img,if=virtio,format=raw,cache=unsafe"
[ "$thrash" = 0 ] || root_drive="file=$work/root.img,if=virtio,format=raw,cache=none,throttling.iops-total=400,throttling.bps-total=41943040"
# The kind node's two vCPUs run on two host threads: its nodes boot systemd on a deadline
# kind sets (30 s to reach multi-user.target).
tcg_thread=single
[ "$kind" = 1 ] && tcg_thread=multi
timeout $vm_timeout qemu-system-x86_64 -accel tcg,thread=$tcg_thread -m $((2048 + node_e2e * 2048 + kind * 6144 + thrash * 2048)) -smp 2 -nographic -no-reboot \
  -kernel "$kdir/boot/vmlinuz-$release" -initrd "$work/initrd.gz" \
  -drive "$root_drive" \
  -drive "file=$work/swap.img,if=virtio,format=raw,cache=unsafe" "${report_drive[@]}" \
  -append "console=ttyS0 panic=-1 quiet loglevel=3 systemd.show_status=0 systemd.unified_cgroup_hierarchy=1 transparent_hugepage=madvise zswap.enabled=0" \
  </dev/null >"$out" 2>&1 || log "qemu exited with $?"
t_end=$(date +%s)
cp "$out" "$cache/systemd-node-console.log" # the whole console of the latest run, for a closer look
if [ "$node_e2e" = 1 ]; then
  rm -rf "$NODE_E2E_DIR/report"
  tar -C "$NODE_E2E_DIR" -xf "$work/report.img" 2>/dev/null || log "no reports came back from the node"
fi
grep -a '^E2E-' "$out" | tr -d '\r' | sed "s/^/[systemd] /" >&2 || true
if ! grep -aq '^E2E-DONE' "$out"; then
  log "the systemd node did not finish; console:"
  tail -n 80 "$out" >&2
  log "systemd node: did not finish (VM $((t_end - t_boot)) s)"
  exit 1
fi
pass=$(grep -ac '^E2E-RESULT [^ ]* PASS' "$out" || true)
fail=$(grep -ac '^E2E-RESULT [^ ]* FAIL' "$out" || true)
if [ "$fail" != 0 ] || [ "$pass" = 0 ]; then
  grep -a '^E2E-RESULT [^ ]* FAIL' "$out" | tr -d '\r' | sed 's/^/  /' >&2 || true
  sed -n '/^E2E-SWAPCRI-LOG-BEGIN/,/^E2E-SWAPCRI-LOG-END/p' "$out" | tail -n 60 >&2
fi
log "systemd node (kernel $release): $pass passed, $fail failed; prepared in $((t_boot - t_start)) s, VM ran $((t_end - t_boot)) s, $((t_end - t_start)) s in all"
[ "$fail" = 0 ] && [ "$pass" != 0 ]
