#!/bin/sh
# PID 1 of the e2e VM: cgroup v2 only, swap on zram and on a virtio disk, then the scenarios.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin:/usr/local/bin
# A root filesystem the OCI runtimes can pivot_root out of, as on a real node: the
# initramfs is copied to a tmpfs and becomes the root.
if [ ! -e /.tmpfs-root ]; then
  mkdir -p /newroot
  mount -t tmpfs -o mode=0755,size=90% root /newroot
  for d in /*; do
    case $d in /newroot | /proc | /sys | /dev) ;; *) cp -a "$d" /newroot/ ;; esac
  done
  mkdir -p /newroot/proc /newroot/sys /newroot/dev
  touch /newroot/.tmpfs-root
  exec switch_root /newroot /init
fi
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# Pseudo-terminals as a node has them (CRIU's check opens /dev/ptmx).
mkdir -p /dev/pts && mount -t devpts -o ptmxmode=0666 devpts /dev/pts
[ -e /dev/ptmx ] || ln -s pts/ptmx /dev/ptmx
mkdir -p /sys/fs/cgroup /run /tmp /var/lib/swapcri /var/log/pods
# /tmp, /run and the state stay on the root tmpfs: nothing is mounted over what the
# initramfs brought (the test binaries' daemon sits at the checkout's path, maybe under /tmp).
chmod 1777 /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup
ip link set lo up
for m in $(cat /modules/order); do insmod "/modules/$m" 2>/dev/null || echo "E2E-LOG insmod $m failed"; done
echo "+memory +io +cpu +pids" > /sys/fs/cgroup/cgroup.subtree_control
i=0
while [ ! -b /dev/vda ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
if [ "$(cat /e2e/only 2>/dev/null)" = guard-disk ]; then
  # A node that swaps to its own disk: the daemon's state, the pods' logs and a swap file
  # share one ext4 disk (/dev/vdb); no zram.
  i=0
  while [ ! -b /dev/vdb ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  mkfs.ext4 -q /dev/vdb && mkdir -p /node && mount /dev/vdb /node || echo "E2E-LOG no ext4 on /dev/vdb"
  mkdir -p /node/swapcri /node/pods
  mount --bind /node/swapcri /var/lib/swapcri && mount --bind /node/pods /var/log/pods
  dd if=/dev/zero of=/node/swapfile bs=1M count=1024 2>/dev/null && chmod 0600 /node/swapfile
  mkswap /node/swapfile >/dev/null && swapon /node/swapfile || echo "E2E-LOG no swap file on /dev/vdb: $(df /node | tail -n 1)"
else
  echo 768M > /sys/block/zram0/disksize
  mkswap /dev/zram0 >/dev/null && swapon /dev/zram0
  mkswap /dev/vda >/dev/null && swapon /dev/vda || echo "E2E-LOG no swap on /dev/vda"
fi
echo "E2E-LOG kernel $(uname -r), $(grep -E 'MemTotal|SwapTotal' /proc/meminfo | tr -s ' ' | tr '\n' ' ')"
sh /e2e/scenarios.sh
[ -x /e2e/itests.sh ] && sh /e2e/itests.sh
echo "E2E-DONE"
sync
poweroff -f
