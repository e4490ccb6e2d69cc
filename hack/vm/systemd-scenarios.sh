#!/bin/sh
# The systemd node's scenarios, run by swapcri-e2e.service once the node is up: swapcri is
# installed as swapcri.service, systemd is PID 1 and owns the cgroup tree. Prints
# `E2E-RESULT <name> PASS|FAIL <details>`; every value asserted is read from the kernel.
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CONF=/etc/swapcri/config.toml
C="swapcri --config $CONF"
T0=$(date +%s)
. /e2e/helpers.sh

# write_config DRIVER SWAP_BEHAVIOR RESERVATION: the daemon's configuration for one phase.
write_config() {
  cat >$CONF <<EOF
log_level = "info"
[runtime]
cgroup_driver = "$1"
default_cgroup_parent = "/swapcri"
[swap]
behavior = "$2"
[memory_qos]
reservation = "$3"
throttling_factor = 0.25
[system]
cgroup = "system.slice"
swap_max = 0
io_latency_target_us = 10000
io_weight = 1000
io_devices = ["$VDB"]
EOF
}
daemon_restart() {
  systemctl restart swapcri.service || { result "restart-$1" FAIL "systemctl restart failed"; dump_log; }
  note "swapcri.service $(systemctl is-active swapcri.service) ($1)"
}
dump_log() {
  echo "E2E-SWAPCRI-LOG-BEGIN"
  journalctl -u swapcri.service --no-pager -n 80 -o cat
  echo "E2E-SWAPCRI-LOG-END"
}
unit_of() { cat "/proc/$1/cgroup" | sed 's/^0:://'; }
running_count() { $C client ps | grep -c '"state": 1'; }

# pod_parent DRIVER QOS UID: the cgroup parent kubelet sends for a pod of that QoS class.
pod_parent() {
  case "$1/$2" in
    systemd/guaranteed) echo "kubepods-pod$3.slice" ;;
    systemd/*) echo "kubepods-$2-pod$3.slice" ;;
    cgroupfs/guaranteed) echo "/kubepods/pod$3" ;;
    cgroupfs/*) echo "/kubepods/$2/pod$3" ;;
  esac
}

# kubelet_pod DRIVER QOS UID: makes the pod cgroup as kubelet would (a slice through systemd,
# a directory with cgroupfs), then RunPodSandbox with it; prints the pod id.
kubelet_pod() {
  parent=$(pod_parent "$1" "$2" "$3")
  if [ "$1" = systemd ]; then
    systemctl start "$parent"
  else
    d=/sys/fs/cgroup
    for part in $(echo "$parent" | tr / ' '); do
      echo "+memory +io +cpu +pids" >"$d/cgroup.subtree_control" 2>/dev/null
      d=$d/$part
      mkdir -p "$d"
    done
  fi
  $C client runp "k$3" --cgroup-parent "$parent"
}

# kubelet_ctr POD OOM_SCORE_ADJ LIMIT ALLOC [--unified K=V …]: a container as kubelet sends it.
kubelet_ctr() {
  pod=$1 oom=$2 limit=$3 alloc=$4
  shift 4
  ctr=$($C client create "$pod" app localhost/busybox:latest --oom-score-adj "$oom" --memory-limit "$limit" "$@" \
    -- sh -c "$(hold "$alloc")")
  $C client start "$ctr" >/dev/null && echo "$ctr"
}

# qos_checks DRIVER: kubelet-shaped pods of each QoS class; what each container's cgroup
# holds, what a container sees of itself, and how hogs swap.
qos_checks() {
  d=$1
  LIM=$((128 * MI)) KSWAP=$((64 * MI)) KMIN=$((96 * MI)) KHIGH=$((112 * MI))
  PB=$(kubelet_pod "$d" burstable "b$d")
  B=$(kubelet_ctr "$PB" 937 $LIM $((160 * MI)) \
    --unified memory.swap.max=$KSWAP --unified memory.min=$KMIN --unified memory.high=$KHIGH)
  PG=$(kubelet_pod "$d" guaranteed "g$d")
  G=$(kubelet_ctr "$PG" -997 $LIM $((32 * MI)))
  PE=$(kubelet_pod "$d" besteffort "e$d")
  E=$(kubelet_ctr "$PE" 1000 0 $((96 * MI)))
  # Memory pressure on the BestEffort pod (kubelet leaves it unlimited): with swap it would
  # swap; with nothing sent it must not.
  E_POD=$(dirname "$(cg "$E")")
  echo $((64 * MI)) >"$E_POD/memory.max"
  settle "$B" "$G"
  # Swapping is slow on an emulated disk: wait for it rather than for a quiet moment.
  i=0
  while [ $i -lt 60 ] && [ "$(value "$B" memory.swap.current)" -lt $((16 * MI)) ]; do sleep 1; i=$((i + 1)); done
  where=$(cg "$B" | sed 's|/sys/fs/cgroup||')
  case "$d" in
    systemd) check "$d-scope" 'echo "$where" | grep -q "^/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podb$d.slice/swapcri-$B.scope$"' "container cgroup $where" ;;
    *) check "$d-cgroup" '[ "$where" = "/kubepods/burstable/podb$d/$B" ]' "container cgroup $where" ;;
  esac
  GOT="$(value "$B" memory.swap.max) $(value "$B" memory.min) $(value "$B" memory.high)"
  WANT="$(pages $KSWAP) $(pages $KMIN) $(pages $KHIGH)"
  check "$d-burstable-files" '[ "$GOT" = "$WANT" ]' "memory.swap.max memory.min memory.high = $GOT (sent $WANT)"
  B_SC=$(value "$B" memory.swap.current)
  check "$d-burstable-swaps-within-limit" '[ "$B_SC" -ge $((16 * MI)) ] && [ "$B_SC" -le "$(pages $KSWAP)" ]' \
    "hog of 160 MiB over a 128 MiB limit: memory.swap.current=$B_SC (limit $(pages $KSWAP))"
  G_SM=$(value "$G" memory.swap.max) G_MAX=$(value "$G" memory.max)
  check "$d-guaranteed-files" '[ "$G_SM" = 0 ] && [ "$G_MAX" = "$(pages $LIM)" ]' "memory.swap.max=$G_SM memory.max=$G_MAX"
  E_SM=$(value "$E" memory.swap.max) E_SC=$(value "$E" memory.swap.current)
  E_EV=$(awk '$1 == "oom_kill" || $1 == "max" { printf "%s=%s ", $1, $2 }' "$E_POD/memory.events")
  check "$d-besteffort-no-swap" '[ "$E_SM" = 0 ] && [ "$E_SC" = 0 ] && echo "$E_EV" | grep -qv "max=0 oom_kill=0"' \
    "96 MiB hog in a 64 MiB pod: memory.swap.max=$E_SM memory.swap.current=$E_SC pod events: $E_EV"
  INSIDE=$($C client exec "$B" -- cat /sys/fs/cgroup/memory.swap.max /sys/fs/cgroup/memory.max | tr '\n' ' ')
  check "$d-container-sees-own-limits" '[ "$INSIDE" = "$(pages $KSWAP) $(pages $LIM) " ]' \
    "in the container: memory.swap.max memory.max = $INSIDE"
  # A hog that needs more swap than its limit: it reaches the limit and is killed, never past.
  PO=$(kubelet_pod "$d" burstable "o$d")
  O=$(kubelet_ctr "$PO" 937 $LIM $((256 * MI)) --unified memory.swap.max=$KSWAP)
  O_DIR=$(cg "$O")
  i=0
  while [ $i -lt 60 ] && ! grep -q "^max [1-9]" "$O_DIR/memory.swap.events" && ! grep -q "oom_kill [1-9]" "$O_DIR/memory.events"; do
    sleep 1
    i=$((i + 1))
  done
  O_SWAPMAX_EV=$(awk '$1 == "max" { print $2 }' "$O_DIR/memory.swap.events" 2>/dev/null)
  O_PEAK=$(cat "$O_DIR/memory.swap.peak" 2>/dev/null || echo n/a)
  O_OOM=$(awk '$1 == "oom_kill" { print $2 }' "$O_DIR/memory.events" 2>/dev/null)
  # It fills its swap up to the limit (memory.swap.peak, 6.5+), never past it, then the
  # kernel refuses it more: a swap charge fails (swap.events max) or the OOM killer ends it.
  check "$d-burstable-stops-at-swap-limit" '[ "$O_PEAK" != n/a ] && [ "$O_PEAK" -le "$(pages $KSWAP)" ] && [ "$O_PEAK" -ge $((KSWAP * 3 / 4)) ] && [ $((${O_SWAPMAX_EV:-0} + ${O_OOM:-0})) -ge 1 ]' \
    "256 MiB hog, 128 MiB limit, swap limit $(pages $KSWAP): swap peak=$O_PEAK, then swap.events max=$O_SWAPMAX_EV oom_kill=$O_OOM"
  S_BEFORE=$(value "$B" memory.swap.current)
  S_CRI=$($C client stats "$B" | json_number swap_usage_bytes)
  S_AFTER=$(value "$B" memory.swap.current)
  check "$d-stats-swap" '[ "$S_CRI" = "$S_BEFORE" ] || [ "$S_CRI" = "$S_AFTER" ]' \
    "ContainerStats swap_usage_bytes=$S_CRI, memory.swap.current of its cgroup $S_BEFORE..$S_AFTER"
  BAD=""
  for id in $B $G $E; do held "$id" || BAD="$BAD $id"; done
  check "$d-read-back" '[ -z "$BAD" ]' "containers whose plan the kernel did not hold:${BAD:- none}"
}

# oom_checks DRIVER: containers shaped as critest's OOM spec (15 MiB limit, no swap, dd of
# 20 MiB blocks), at once and after 2 s, 4 of each: each is reported exited with code 137 and
# reason OOMKilled, its exit record written within 1 s of the kernel's kill (the kill's time
# from the kernel log, the record's from its mtime; ContainerStatus answers from the record),
# and no read-back error is logged for them, nor for containers that exit at once (which may
# die before StartContainer returned). Under the systemd driver systemd removes each emptied
# scope at once.
oom_checks() {
  d=$1
  P=$(kubelet_pod "$d" burstable "oom$d")
  journal_from=$(date '+%Y-%m-%d %H:%M:%S')
  for kind in at-once delayed; do
    case $kind in at-once) cmd="dd if=/dev/zero of=/dev/null bs=20M" ;; *) cmd="sleep 2; dd if=/dev/zero of=/dev/null bs=20M" ;; esac
    bad="" worst=0 shown=0 n=0
    while [ $n -lt 4 ]; do
      n=$((n + 1))
      K=$($C client create "$P" "oom-$kind-$n" localhost/busybox:latest --oom-score-adj 937 \
        --memory-limit $((15 * MI)) --unified memory.swap.max=0 -- sh -c "$cmd")
      dmesg -C
      if ! $C client start "$K" >/dev/null 2>/tmp/start.err; then
        bad="$bad #$n: StartContainer failed: $(head -c 200 /tmp/start.err)"
        continue
      fi
      started=$(cut -d' ' -f1 /proc/uptime)
      # Polled gently: each call is a process, and the node has two emulated CPUs.
      i=0 state=""
      while [ $i -lt 120 ]; do
        state=$($C client inspect "$K" | tr -d ' \n')
        echo "$state" | grep -q '"state":2' && break
        sleep 0.5
        i=$((i + 1))
      done
      seen=$(cut -d' ' -f1 /proc/uptime)
      killed=$(dmesg | sed -n 's/^\[ *\([0-9.]*\)\] Memory cgroup out of memory: Killed process.*/\1/p' | tail -n 1)
      code=$(echo "$state" | sed -n 's/.*"exit_code":\(-*[0-9]*\).*/\1/p')
      reason=$(echo "$state" | sed -n 's/.*"reason":"\([A-Za-z]*\)".*/\1/p')
      record=$(find /var/lib/swapcri -path "*$K*" -name exit.json | head -n 1)
      # The record's mtime on the kernel log's clock (seconds since boot).
      lag=$(awk -v m="$(stat -c %.3Y "$record" 2>/dev/null || echo 0)" -v now="$(date +%s.%N)" \
        -v up="$(cut -d' ' -f1 /proc/uptime)" -v k="${killed:-0}" 'BEGIN { printf "%d", (m - (now - up) - k) * 1000 }')
      poll=$(awk -v a="$seen" -v b="$started" 'BEGIN { printf "%d", (a - b) * 1000 }')
      [ "$lag" -gt "$worst" ] && worst=$lag
      [ "$poll" -gt "$shown" ] && shown=$poll
      if [ -z "$killed" ] || [ "$code" != 137 ] || [ "$reason" != OOMKilled ] || [ -z "$record" ] || [ "$lag" -gt 1000 ]; then
        bad="$bad #$n: exit code ${code:-none}, reason ${reason:-none}, record ${lag} ms after the kill at ${killed:-never} s;"
      fi
    done
    check "$d-oom-$kind" '[ -z "$bad" ]' "4 containers: 137/OOMKilled each, exit records at most $worst ms after the kernel's kill, shown exited at most $shown ms after StartContainer returned${bad:+; failures:$bad}"
  done
  # Containers that exit at once: their cgroup can be gone before StartContainer reads it.
  bad="" n=0
  while [ $n -lt 4 ]; do
    n=$((n + 1))
    K=$($C client create "$P" "quick-$n" localhost/busybox:latest --oom-score-adj 937 --memory-limit $((15 * MI)) \
      --unified memory.swap.max=0 -- true)
    $C client start "$K" >/dev/null 2>/tmp/start.err || { bad="$bad #$n: StartContainer failed: $(head -c 200 /tmp/start.err)"; continue; }
    i=0
    until $C client inspect "$K" | tr -d ' \n' | grep -q '"state":2' || [ $i -ge 60 ]; do sleep 0.5; i=$((i + 1)); done
    state=$($C client inspect "$K" | tr -d ' \n')
    code=$(echo "$state" | sed -n 's/.*"exit_code":\(-*[0-9]*\).*/\1/p')
    [ "${code:-0}" = 0 ] && echo "$state" | grep -q '"reason":"Completed"' || bad="$bad #$n: exit code ${code:-0}, $(echo "$state" | grep -o '"reason":"[A-Za-z]*"')"
  done
  check "$d-exit-at-once" '[ -z "$bad" ]' "4 containers running true: exited 0, Completed${bad:+; failures:$bad}"
  ERRS=$(journalctl -u swapcri.service --since "$journal_from" --no-pager -o cat | grep -c 'memory plan not applied')
  GONE=$(journalctl -u swapcri.service --since "$journal_from" --no-pager -o cat | grep -c 'its cgroup is gone')
  check "$d-oom-read-back" '[ "$ERRS" = 0 ]' "$ERRS read-back errors; $GONE containers exited before their plan was read back"
  $C client rmp "$P" >/dev/null
}

MEM=$(meminfo MemTotal)
SWAP=$(meminfo SwapTotal)
VDB=$(cat /sys/block/vdb/dev 2>/dev/null)
note "systemd $(systemctl --version | head -n 1 | cut -d' ' -f2), kernel $(uname -r), MemTotal $MEM SwapTotal $SWAP swap disk vdb $VDB"
note "$(swapon --show=NAME,SIZE,PRIO --noheadings | tr -s ' ' | tr '\n' ';')"
check node-systemd '[ "$(cat /proc/1/comm)" = systemd ] && [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]' \
  "PID 1 $(cat /proc/1/comm), /sys/fs/cgroup is $(stat -fc %T /sys/fs/cgroup)"
check installed-unit-active '[ "$(systemctl is-active swapcri.service)" = active ]' \
  "swapcri.service $(systemctl is-active swapcri.service) with the installed configuration"
$C image import /images/busybox.tar >/dev/null || { result image-import FAIL "swapcri image import"; dump_log; }

# ---- systemd driver: kubelet's pods, system.slice protection, reloads and restarts -----------
write_config systemd follow-kubelet follow-kubelet
daemon_restart systemd
DRIVER=$($C client status --verbose | tr -d ' \n' | grep -o '"cgroup_driver":"[a-z]*"')
qos_checks systemd
oom_checks systemd
B_SCOPE=$(cg "$B")

# Helpers in scopes of their own, in swapcri-monitors.slice.
MON=$($C client inspect --verbose "$B" | tr -d ' \n' | sed -n 's/.*"monitor":{"pid":\([0-9]*\).*/\1/p')
MON_UNIT=$(unit_of "$MON")
check systemd-monitor-scope 'echo "$MON_UNIT" | grep -q "^/swapcri.slice/swapcri-monitors.slice/swapcri-helper-$MON.scope$"' \
  "monitor $MON in $MON_UNIT"

# system.slice: no swap and io protection, as unit properties that survive a reload.
SYS=/sys/fs/cgroup/system.slice
before="$(cat $SYS/memory.swap.max) $(grep "^$VDB " $SYS/io.weight)"
BEFORE_B="$(cat "$B_SCOPE/memory.swap.max") $(cat "$B_SCOPE/memory.min") $(cat "$B_SCOPE/memory.high")"
systemctl daemon-reload
sleep 1
after="$(cat $SYS/memory.swap.max) $(grep "^$VDB " $SYS/io.weight)"
AFTER_B="$(cat "$B_SCOPE/memory.swap.max") $(cat "$B_SCOPE/memory.min") $(cat "$B_SCOPE/memory.high")"
check system-slice-after-reload '[ "$after" = "0 $VDB 1000" ] && [ "$before" = "$after" ]' \
  "system.slice memory.swap.max and io.weight: before reload '$before', after '$after'; $(grep "^$VDB " /sys/fs/cgroup/io.cost.qos | cut -d' ' -f1-2)"
QOS=$(grep "^$VDB " /sys/fs/cgroup/io.cost.qos 2>/dev/null)
check io-cost-latency-targets 'echo "$QOS" | grep -q "enable=1 ctrl=user rpct=95.00 rlat=10000 wpct=95.00 wlat=10000"' \
  "io.cost.qos of the swap disk $VDB: $QOS"
check scope-after-reload '[ "$BEFORE_B" = "$AFTER_B" ]' "container scope swap.max min high: '$BEFORE_B' -> '$AFTER_B'"
check runtime-config-driver '[ "$DRIVER" = "\"cgroup_driver\":\"systemd\"" ]' "status: $DRIVER"

# The io protection in effect: io.cost governs the swap disk and a system.slice reader of it
# keeps a share while a container swaps hard to it (320 MiB of random bytes made under a
# 64 MiB limit).
io_reader() { # io_reader SECONDS OUT: MB/s read directly from the swap disk's data partition
  systemd-run --quiet --wait --collect --slice=system.slice -p StandardOutput=file:/tmp/reader.raw \
    sh -c "timeout $1 dd if=/dev/vdb2 of=/dev/null bs=256k iflag=direct 2>&1 | tail -n 1" >/dev/null 2>&1
  awk '{ for (i = 1; i < NF; i++) if ($(i + 1) ~ /^(MB|GB)\/s/) { v = $i; if ($(i + 1) ~ /^GB/) v *= 1000; print int(v) } }' /tmp/reader.raw >"$2"
}
swap_writes() { awk '{ print $7 * 512 }' /sys/block/vdb/vdb1/stat; }
contended_read() { # contended_read NAME: "MB/s swap-bytes-written" with a hog swapping meanwhile
  P=$(kubelet_pod systemd burstable "$1")
  # Random bytes: the kernel keeps zero-filled pages out of the swap device (6.12 zeromap).
  HOG=$($C client create "$P" app localhost/busybox:latest --oom-score-adj 937 --memory-limit $((64 * MI)) \
    --unified memory.swap.max=$((512 * MI)) -- sh -c "dd if=/dev/urandom bs=$((320 * MI)) count=1 2>/dev/null | sleep 100000")
  $C client start "$HOG" >/dev/null
  # The reader starts as the hog reaches its limit: from then on it swaps out what it makes.
  i=0
  while [ $i -lt 120 ] && [ "$(value "$HOG" memory.current)" -lt $((56 * MI)) ]; do sleep 0.5; i=$((i + 1)); done
  W0=$(swap_writes)
  io_reader 10 /tmp/reader.busy
  # io.cost's own account of the hog's I/O on the disk (io.stat cost.usage, microseconds).
  usage=$(grep "^$VDB " "$(cg "$HOG")/io.stat" | tr ' ' '\n' | sed -n 's/^cost.usage=//p')
  echo "$(cat /tmp/reader.busy) $(($(swap_writes) - W0)) ${usage:-0}"
  $C client rmp "$P" >/dev/null
}
io_reader 8 /tmp/reader.solo
SOLO=$(cat /tmp/reader.solo)
set -- $(contended_read hogp)
PROTECTED=$1 PROTECTED_IO=$2 COST_USAGE=$3
# The same beside the default weight, for the record: under emulation the reader is bound by
# the emulated CPUs more than by the disk, and the two do not differ measurably.
systemctl set-property --runtime system.slice "IODeviceWeight=/dev/block/$VDB 100"
set -- $(contended_read hogu)
systemctl set-property --runtime system.slice "IODeviceWeight=/dev/block/$VDB 1000"
note "system.slice reader: alone $SOLO MB/s; with io.weight 1000 $PROTECTED MB/s beside $PROTECTED_IO bytes of swap writes; with the default 100 $1 MB/s beside $2 bytes"
check system-io-share '[ "$PROTECTED_IO" -ge $((16 * MI)) ] && [ "${COST_USAGE:-0}" -gt 0 ] && [ $((PROTECTED * 100)) -ge $((SOLO * 25)) ]' \
  "reader alone $SOLO MB/s, $PROTECTED MB/s while a container wrote $PROTECTED_IO bytes to swap on the same disk (>= 25% kept); io.cost accounted the container's I/O there (cost.usage=$COST_USAGE)"

# Restart and stop of the service kill no container and lose none.
PIDS_BEFORE=$(for id in $B $G; do cat "$(cg "$id")/cgroup.procs"; done | sort | tr '\n' ' ')
RUN_BEFORE=$(running_count)
daemon_restart again
RUN_AFTER=$(running_count)
PIDS_AFTER=$(for id in $B $G; do cat "$(cg "$id")/cgroup.procs"; done | sort | tr '\n' ' ')
check restart-keeps-containers '[ "$RUN_BEFORE" = "$RUN_AFTER" ] && [ "$PIDS_BEFORE" = "$PIDS_AFTER" ] && held "$B"' \
  "running before $RUN_BEFORE, after $RUN_AFTER; processes '$PIDS_BEFORE' -> '$PIDS_AFTER'"
systemctl stop swapcri.service
sleep 1
ALIVE=0
for p in $PIDS_BEFORE $MON; do kill -0 "$p" 2>/dev/null && ALIVE=$((ALIVE + 1)); done
WANT=$(($(echo $PIDS_BEFORE | wc -w) + 1))
check stop-kills-none '[ "$ALIVE" = "$WANT" ]' "$ALIVE of $WANT container and monitor processes alive with swapcri.service stopped"
systemctl start swapcri.service
check start-accounts-for-all '[ "$(running_count)" = "$RUN_BEFORE" ]' "running after start: $(running_count) of $RUN_BEFORE"

# A crictl pod (no parent): a transient slice of swapcri's, its reservation as properties.
write_config systemd LimitedSwap min
daemon_restart owned
REQ=$((64 * MI))
PO=$($C client runp owned --annotation swapcri.io/qos-class=Burstable)
O=$($C client create "$PO" app localhost/busybox:latest --annotation swapcri.io/memory-request=$REQ \
  --memory-limit $((128 * MI)) -- sleep 100000)
$C client start "$O" >/dev/null
O_DIR=$(cg "$O")
O_SLICE=$(basename "$(dirname "$O_DIR")")
systemctl daemon-reload
sleep 1
O_MIN="$(cat "$O_DIR/memory.min") $(cat "$(dirname "$O_DIR")/memory.min")"
O_SWAP=$(cat "$O_DIR/memory.swap.max")
EXPECT=$(pages $((REQ * SWAP / MEM)))
check owned-pod-slice '[ "$O_SLICE" = "swapcri-pod$PO.slice" ] && [ "$O_MIN" = "$(pages $REQ) $(pages $REQ)" ] && [ "$O_SWAP" = "$EXPECT" ]' \
  "$O_SLICE: container and pod memory.min after a reload '$O_MIN', LimitedSwap memory.swap.max=$O_SWAP (expected $EXPECT)"
remove_all
SLICES=$(systemctl list-units --all --no-legend 'swapcri-pod*' 'swapcri-*.scope' | grep -vc helper)
check systemd-removal-leaves-nothing '[ "$SLICES" = 0 ] && [ -z "$(ls /sys/fs/cgroup/swapcri.slice | grep pod)" ]' \
  "$SLICES swapcri pod slices or container scopes left"
SWAPCRI_DOCTOR=$(swapcri --config $CONF doctor 2>&1)
check doctor-systemd 'echo "$SWAPCRI_DOCTOR" | grep -q "ok\] cgroup driver" && echo "$SWAPCRI_DOCTOR" | grep -q "ok\] system io protection"' \
  "$(echo "$SWAPCRI_DOCTOR" | grep -E "cgroup driver|system io" | tr -s ' ' | tr '\n' ';')"

# ---- the swap guard under the systemd driver: a throttle holds across a daemon-reload -------
# systemd owns a scope's cpu.weight, io.weight and cpu.max (CPUWeight, IOWeight,
# CPUQuotaPerSecUSec), and the pod slice's io.weight, and writes them again
# at every daemon-reload. The throttle sets them as the container scope's runtime
# properties, so a reload in the middle keeps it; putting back goes the same way. Its io.max
# cap on the swap disk is written directly (systemd writes io.max only for devices a unit
# names), and must survive the reload too.
write_config systemd follow-kubelet follow-kubelet
printf '[guard]\naction = "throttle"\n' >>$CONF
daemon_restart guard
# The pod's slice too: io.cost weighs the container only within its pod, so the throttle
# lowers the pod slice's IOWeight as well.
weights() { echo "cpu=$(value "$1" cpu.weight) cpu.max=$(value "$1" cpu.max | tr ' ' :) io=$(value "$1" io.weight 2>/dev/null | head -n 1 | tr ' ' :) io.max=[$(value "$1" io.max 2>/dev/null | tr ' \n' ':,')] pod=$(head -n 1 "$(dirname "$(cg "$1")")/io.weight" 2>/dev/null | tr ' ' :)"; }
properties() { systemctl show -p CPUWeight -p IOWeight -p CPUQuotaPerSecUSec "$(basename "$(cg "$1")")" | tr '\n' ' '; }
is_throttled() { [ "$(gaction "$1")" = throttled ]; }
is_released() { [ -z "$(gaction "$1")" ] && [ "$(gstate "$1")" = normal ]; }
PT=$(kubelet_pod systemd burstable thr)
TH=$($C client create "$PT" app localhost/busybox:latest --memory-limit $((512 * MI)) \
  --unified memory.high=$((64 * MI)) --unified memory.swap.max=$((256 * MI)) -- memtouch 96 hot 60)
# Read before it starts: it thrashes within a second or two of its start.
W0=$(weights "$TH")
$C client start "$TH" >/dev/null
ACT=$(wait_for 120 is_throttled "$TH")
W1=$(weights "$TH") P1=$(properties "$TH")
systemctl daemon-reload
sleep 2
W2=$(weights "$TH")
check guard-throttle-survives-reload '[ -n "$ACT" ] && [ "$W1" != "$W0" ] && [ "$W2" = "$W1" ] && echo "$W1" | grep -q "pod=default:10$"' \
  "throttled ${ACT:-never} s after its start: $W0 -> $W1 ($P1), after daemon-reload $W2"
REL=$(wait_for 180 is_released "$TH")
systemctl daemon-reload
sleep 2
W3=$(weights "$TH")
check guard-restore-survives-reload '[ -n "$REL" ] && [ "$W3" = "$W0" ]' \
  "put back ${REL:-never} s after the throttle: $W3 after a daemon-reload (before the throttle $W0; $(properties "$TH"))"
$C client rmp "$PT" >/dev/null

# ---- the same kubelet checks with the cgroupfs driver on this node -------------------------
write_config cgroupfs follow-kubelet follow-kubelet
daemon_restart cgroupfs
qos_checks cgroupfs
oom_checks cgroupfs
remove_all
[ -n "$FAILED" ] && dump_log
true
