#!/bin/sh
# The e2e scenarios, run inside the VM. Each prints `E2E-RESULT <name> PASS|FAIL <details>`;
# every value asserted is read from the kernel's cgroup files.
CONF=/etc/swapcri/config.toml
C="swapcri --config $CONF"
LOG=/tmp/swapcri.log
T0=$(date +%s)

. /e2e/helpers.sh

# write_config SWAP_BEHAVIOR RESERVATION [SYSTEM]: the daemon's configuration for one phase.
write_config() {
  cat >$CONF <<EOF
log_level = "info"
[runtime]
tmpfs_noswap = "auto"
[runtime.handlers.runc]
binary = "/usr/sbin/runc"
root = "/run/swapcri/runc"
no_pivot = true
[swap]
behavior = "$1"
[memory_qos]
reservation = "$2"
throttling_factor = 0.25
[metrics]
address = "127.0.0.1:9117"
EOF
  if [ "$3" = system ]; then
    cat >>$CONF <<EOF
[system]
cgroup = "system.slice"
create_cgroup = true
swap_max = 0
io_latency_target_us = 10000
io_weight = 1000
EOF
  fi
}

daemon_start() {
  $C serve >>$LOG 2>&1 &
  DAEMON=$!
  i=0
  until $C client version >/dev/null 2>&1 || [ $i -ge 300 ]; do sleep 0.1; i=$((i + 1)); done
  note "daemon up (pid $DAEMON) after $((i / 10)) s"
}
daemon_stop() { # daemon_stop [SIGNAL]
  kill -"${1:-TERM}" $DAEMON
  i=0
  while kill -0 $DAEMON 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
}
dump_log() {
  echo "E2E-SWAPCRI-LOG-BEGIN"
  tail -n 80 $LOG
  echo "E2E-SWAPCRI-LOG-END"
}

# start_ctr NAME QOS REQUEST LIMIT ALLOC [client create flags…]: crictl-style pod and
# container (QoS and request as annotations); prints the container id.
start_ctr() {
  name=$1 qos=$2 request=$3 limit=$4 alloc=$5
  shift 5
  pod=$($C client runp "$name" --annotation swapcri.io/qos-class="$qos" "$@")
  [ "$request" = 0 ] || set -- --annotation swapcri.io/memory-request="$request"
  [ "$request" = 0 ] && set --
  ctr=$($C client create "$pod" app localhost/busybox:latest "$@" --memory-limit "$limit" -- sh -c "$(hold "$alloc")")
  $C client start "$ctr" >/dev/null && echo "$ctr"
}

# kubelet_ctr NAME PARENT OOM_SCORE_ADJ LIMIT ALLOC [--unified K=V …]: a pod and container the
# way kubelet (cgroupfs driver) sends them: its own pod cgroup as parent, no annotations.
kubelet_ctr() {
  name=$1 parent=$2 oom=$3 limit=$4 alloc=$5
  shift 5
  mkdir -p "/sys/fs/cgroup$parent"
  d=/sys/fs/cgroup
  for part in $(echo "$parent" | tr / ' '); do
    echo "+memory +io +cpu +pids" >"$d/cgroup.subtree_control" 2>/dev/null
    d=$d/$part
  done
  pod=$($C client runp "$name" --cgroup-parent "$parent")
  ctr=$($C client create "$pod" app localhost/busybox:latest --oom-score-adj "$oom" --memory-limit "$limit" "$@" \
    -- sh -c "$(hold "$alloc")")
  $C client start "$ctr" >/dev/null && echo "$ctr"
}

MEM=$(meminfo MemTotal)
SWAP=$(meminfo SwapTotal)
VDA=$(cat /sys/block/vda/dev 2>/dev/null)
note "MemTotal $MEM SwapTotal $SWAP vda $VDA page $PAGE"
# hack/vm/e2e.sh --only NAME: just the scenarios of /e2e/NAME.sh (none for the itests).
if [ -f /e2e/only ]; then
  [ "$(cat /e2e/only)" = itests ] && exit 0
  write_config follow-kubelet follow-kubelet
  daemon_start
  $C image import /images/busybox.tar >/dev/null || result image-import FAIL "swapcri image import"
  daemon_stop
  . "/e2e/$(cat /e2e/only).sh"
  exit 0
fi

# ---- Phase A: LimitedSwap, "min" reservations, system protection -------------------------
write_config LimitedSwap min system
daemon_start
$C image import /images/busybox.tar >/dev/null || { result image-import FAIL "swapcri image import"; dump_log; exit 0; }
STATUS=$($C client status --verbose)
check status-memtotal 'echo "$STATUS" | grep -q "mem_total[^0-9]*$MEM"' "MemTotal $MEM"

# System protection: no swap for system.slice, io weight on the virtio swap disk, zram noted.
SYS=/sys/fs/cgroup/system.slice
SYS_SWAP=$(cat $SYS/memory.swap.max 2>/dev/null)
check system-swap-max '[ "$SYS_SWAP" = 0 ]' "system.slice memory.swap.max=$SYS_SWAP"
SYS_IO=$(grep "^$VDA " $SYS/io.weight 2>/dev/null)
check system-io-weight '[ "$SYS_IO" = "$VDA 1000" ] && echo "$STATUS" | grep -q "io.latency unsupported"' \
  "system.slice io.weight has '$SYS_IO' for vda $VDA; io.latency reported unsupported; $(grep "^$VDA " /sys/fs/cgroup/io.cost.qos | cut -d' ' -f1-2)"
QOS=$(grep "^$VDA " /sys/fs/cgroup/io.cost.qos 2>/dev/null)
check io-cost-latency-targets 'echo "$QOS" | grep -q "enable=1 ctrl=user rpct=95.00 rlat=10000 wpct=95.00 wlat=10000"' \
  "io.cost.qos of the swap disk $VDA: $QOS"
check system-zram-unprotectable 'echo "$STATUS" | grep -q "zram has no disk to protect"' "zram noted as having no disk"

REQ=$((128 * MI)) LIM=$((256 * MI)) LOAD=$((200 * MI))
B=$(start_ctr burstable Burstable $REQ $LIM $LOAD)
G=$(start_ctr guaranteed Guaranteed 0 $LIM $LOAD)
E=$(start_ctr besteffort BestEffort 0 0 $LOAD)
Q=$(start_ctr equal Burstable $LIM $LIM $LOAD)
K=$(start_ctr critical Burstable $REQ $LIM $LOAD --annotation swapcri.io/critical=true)
note "phase A containers started"
settle "$B" "$G" "$E" "$Q" "$K"

# Scenario 2: kubelet's LimitedSwap value, page-rounded; swapping past memory.high within it.
EXPECT=$(pages $((REQ * SWAP / MEM)))
B_SWAP_MAX=$(value "$B" memory.swap.max)
check limited-burstable-swap-max '[ "$B_SWAP_MAX" = "$EXPECT" ]' \
  "memory.swap.max=$B_SWAP_MAX expected=$EXPECT (floor($REQ / $MEM x $SWAP), whole pages)"
B_HIGH=$(value "$B" memory.high)
EXPECT_HIGH=$(pages $((REQ + (LIM - REQ) / 4)))
check limited-burstable-memory-high '[ "$B_HIGH" = "$EXPECT_HIGH" ]' "memory.high=$B_HIGH expected=$EXPECT_HIGH (factor 0.25)"
B_SC=$(value "$B" memory.swap.current)
B_OVER=$((LOAD - B_HIGH))
check limited-burstable-swaps '[ "$B_SC" -ge $((B_OVER / 2)) ] && [ "$B_SC" -le "$B_SWAP_MAX" ]' \
  "memory.swap.current=$B_SC (load $LOAD is $B_OVER over memory.high) limit=$B_SWAP_MAX"
for pair in "guaranteed:$G" "besteffort:$E" "request-equals-limit:$Q" "critical:$K"; do
  name=${pair%%:*} id=${pair#*:}
  SM=$(value "$id" memory.swap.max) SC=$(value "$id" memory.swap.current)
  check "limited-$name-no-swap" '[ "$SM" = 0 ] && [ "$SC" = 0 ]' "memory.swap.max=$SM memory.swap.current=$SC"
done
K_EV=$(value "$K" memory.events | awk '$1 == "high" { print $2 }')
note "critical container throttled $K_EV times at memory.high"

# Scenario 4 (crictl pods swapcri owns): "min" puts the request in memory.min of the
# container and of its pod cgroup; no memory.high when request == limit.
B_MIN=$(value "$B" memory.min) B_POD_MIN=$(parent_value "$B" memory.min)
check reservation-min '[ "$B_MIN" = "$(pages $REQ)" ] && [ "$B_POD_MIN" = "$(pages $REQ)" ]' \
  "container memory.min=$B_MIN pod memory.min=$B_POD_MIN request=$REQ"
Q_HIGH=$(value "$Q" memory.high)
check request-equals-limit-no-high '[ "$Q_HIGH" = max ]' "memory.high=$Q_HIGH"
BAD=""
for id in $B $G $E $Q $K; do held "$id" || BAD="$BAD $id"; done
check read-back '[ -z "$BAD" ]' "containers whose plan the kernel did not hold:${BAD:- none}"

# Scenario 5: the pods' /dev/shm (mounted by swapcri) with noswap where the kernel has it.
SHM_ALL=$(grep -c "/shm tmpfs" /proc/mounts)
SHM_NOSWAP=$(grep "/shm tmpfs" /proc/mounts | grep -c noswap)
case "$(uname -r)" in
  6.1.*) check noswap-fallback '[ "$SHM_ALL" -gt 0 ] && [ "$SHM_NOSWAP" = 0 ] && echo "$STATUS" | grep -q "tmpfs refused noswap" && grep noswap $LOG | grep -q WARN' \
    "6.1: probe mount refused, warning logged, $SHM_ALL pod shm mounts without noswap" ;;
  *) check noswap-mounted '[ "$SHM_ALL" -gt 0 ] && [ "$SHM_NOSWAP" = "$SHM_ALL" ] && echo "$STATUS" | grep -q "kernel-version"' \
    "$SHM_NOSWAP of $SHM_ALL pod shm mounts with noswap (decided by kernel version)" ;;
esac

# Scenario 7: CRI stats and /metrics agree with memory.swap.current; doctor runs.
S_BEFORE=$(value "$B" memory.swap.current)
S_CRI=$($C client stats "$B" | json_number swap_usage_bytes)
S_AFTER=$(value "$B" memory.swap.current)
check stats-swap '[ "$S_CRI" = "$S_BEFORE" ] || [ "$S_CRI" = "$S_AFTER" ]' \
  "ContainerStats swap_usage_bytes=$S_CRI memory.swap.current=$S_BEFORE..$S_AFTER"
METRICS=$(wget -q -O - http://127.0.0.1:9117/metrics 2>&1)
S_METRIC=$(echo "$METRICS" | grep "^swapcri_container_swap_usage_bytes{.*$B" | awk '{ print $2 }')
S_AFTER=$(value "$B" memory.swap.current)
check metrics-swap '[ "$S_METRIC" = "$S_AFTER" ] || [ "$S_METRIC" = "$S_BEFORE" ]' \
  "swapcri_container_swap_usage_bytes=$S_METRIC memory.swap.current=$S_AFTER"
[ -n "$S_METRIC" ] || echo "$METRICS" | grep -m 5 "swap\|rror" | sed 's/^/E2E-LOG metrics: /' 
# Scenario 7b: the kernel's swap detail of the swapping container and its pod, in verbose
# status and /metrics, equal to the files read around them: the peak (memory.swap.peak, from
# 6.5; absent on 6.1), the limit's events, anon refaults; the pod's swap covers the container's.
B_PEAK=$(value "$B" memory.swap.peak 2>/dev/null)
B_MAX0=$(value "$B" memory.swap.events | awk '$1 == "max" { print $2 }')
B_RF0=$(value "$B" memory.stat | awk '$1 == "workingset_refault_anon" { print $2 }')
B_INFO=$($C client inspect --verbose "$B" | tr -d ' \n')
BP=$(echo "$B_INFO" | sed -n 's/.*"sandboxID":"\([0-9a-f]*\)".*/\1/p')
METRICS=$(wget -q -O - http://127.0.0.1:9117/metrics 2>&1)
B_MAX1=$(value "$B" memory.swap.events | awk '$1 == "max" { print $2 }')
B_RF1=$(value "$B" memory.stat | awk '$1 == "workingset_refault_anon" { print $2 }')
metric() { echo "$METRICS" | grep "^$1{.*$2" | awk '{ print $2 }' | head -n 1; }
M_PEAK=$(metric swapcri_container_swap_peak_bytes "$B")
M_MAX=$(metric swapcri_container_swap_events_total "$B.*event=\"max\"")
M_RF=$(metric swapcri_container_swap_anon_refaults_total "$B")
M_POD=$(metric swapcri_pod_swap_usage_bytes "id=\"$BP\"")
I_PEAK=$(echo "$B_INFO" | sed -n 's/.*"peak_bytes":\([0-9a-z]*\).*/\1/p')
if [ -n "$B_PEAK" ]; then
  check swap-peak '[ "$M_PEAK" = "$B_PEAK" ] && [ "$I_PEAK" = "$B_PEAK" ] && [ "$B_PEAK" -ge "$S_AFTER" ]' \
    "memory.swap.peak=$B_PEAK metric=$M_PEAK verbose=$I_PEAK current=$S_AFTER"
else
  check swap-peak-absent '[ -z "$M_PEAK" ] && [ "$I_PEAK" = null ]' "no memory.swap.peak: metric '${M_PEAK}' verbose $I_PEAK"
fi
check swap-events '[ -n "$M_MAX" ] && [ "$M_MAX" -ge "$B_MAX0" ] && [ "$M_MAX" -le "$B_MAX1" ] && echo "$B_INFO" | grep -q "\"events\":{[^}]*\"max\":"' \
  "swap events max: file $B_MAX0..$B_MAX1 metric $M_MAX"
check swap-refaults '[ -n "$M_RF" ] && [ "$M_RF" -ge "$B_RF0" ] && [ "$M_RF" -le "$B_RF1" ]' \
  "workingset_refault_anon $B_RF0..$B_RF1 metric $M_RF"
M_CTR=$(metric swapcri_container_swap_usage_bytes "$B")
check pod-swap '[ -n "$M_POD" ] && [ -n "$M_CTR" ] && [ "$M_POD" -ge "$M_CTR" ]' "pod $BP swap $M_POD, container $M_CTR"
DOCTOR=$(swapcri doctor 2>&1)
check doctor 'echo "$DOCTOR" | grep -q "ok\] cgroup v2" && echo "$DOCTOR" | grep -q "zram"' \
  "$(echo "$DOCTOR" | grep -E "^\[.*(cgroup v2|zram|swap +)" | tr -s ' ' | tr '\n' ';')"

# Scenario 8: kill -9 the daemon; after a restart the cgroup files and plans are unchanged.
snapshot() {
  for id in $B $G $E $Q $K; do
    for f in memory.swap.max memory.high memory.min memory.low memory.max; do echo "$id $f $(value "$id" $f)"; done
    $C client inspect --verbose "$id" | sed -n '/"memoryPlan"/,/"monitor"/p'
  done
}
BEFORE=$(snapshot)
daemon_stop KILL
daemon_start
AFTER=$(snapshot)
RUNNING=$($C client ps | grep -c '"state": 1')
check restart-unchanged '[ "$BEFORE" = "$AFTER" ] && [ "$RUNNING" = 5 ]' \
  "$(echo "$BEFORE" | grep -c memory) files and plans compared; $RUNNING containers running"
[ "$BEFORE" = "$AFTER" ] || { echo "$BEFORE" >/tmp/before; echo "$AFTER" | diff /tmp/before - | head -n 20; }
for p in $($C client pods | grep '"id"' | cut -d'"' -f4); do $C client rmp "$p" >/dev/null; done
daemon_stop
note "phase A done"

# ---- Phase B: follow-kubelet, requests as kubelet sends them ------------------------------
write_config follow-kubelet follow-kubelet
daemon_start
KSWAP=$((64 * MI + 123)) KMIN=$((128 * MI)) KHIGH=$((192 * MI + 5))
KB=$(kubelet_ctr kb /kubepods/burstable/podkb 937 $LIM $((32 * MI)) \
  --unified memory.swap.max=$KSWAP --unified memory.min=$KMIN --unified memory.high=$KHIGH)
KN=$(kubelet_ctr kn /kubepods/burstable/podkn 937 $LIM $((32 * MI)))
KE=$(kubelet_ctr ke /kubepods/besteffort/podke 1000 0 $((32 * MI)))
KG=$(kubelet_ctr kg /kubepods/podkg -997 $LIM $((32 * MI)))
note "phase B containers started"
GOT="$(value "$KB" memory.swap.max) $(value "$KB" memory.min) $(value "$KB" memory.high)"
WANT="$(pages $KSWAP) $(pages $KMIN) $(pages $KHIGH)"
check kubelet-values-applied '[ "$GOT" = "$WANT" ]' "memory.swap.max memory.min memory.high = $GOT (sent $KSWAP $KMIN $KHIGH)"
for pair in "burstable:$KN" "besteffort:$KE" "guaranteed:$KG"; do
  name=${pair%%:*} id=${pair#*:}
  SM=$(value "$id" memory.swap.max)
  check "kubelet-$name-unsent-is-zero" '[ "$SM" = 0 ]' "nothing sent: memory.swap.max=$SM ($(cg "$id" | cut -d/ -f5-6))"
done
BAD=""
for id in $KB $KN $KE $KG; do held "$id" || BAD="$BAD $id"; done
check kubelet-read-back '[ -z "$BAD" ]' "containers whose plan the kernel did not hold:${BAD:- none}"
for id in $KB $KN $KE $KG; do $C client stop "$id" --timeout 0 >/dev/null; $C client rm "$id" >/dev/null; done
daemon_stop
note "phase B done"

# ---- Phase C: NoSwap, "tiered" reservations ------------------------------------------------
write_config NoSwap tiered
daemon_start
N=$(start_ctr noswap Burstable $REQ $LIM $LOAD)
settle "$N"
N_SM=$(value "$N" memory.swap.max) N_SC=$(value "$N" memory.swap.current)
N_EV=$(value "$N" memory.events | awk '$1 == "high" || $1 == "oom_kill" { printf "%s=%s ", $1, $2 }')
check noswap-burstable '[ "$N_SM" = 0 ] && [ "$N_SC" = 0 ] && echo "$N_EV" | grep -qv "high=0 oom_kill=0"' \
  "memory.swap.max=$N_SM memory.swap.current=$N_SC under load $LOAD past memory.high ($N_EV)"
N_LOW=$(value "$N" memory.low) N_POD_LOW=$(parent_value "$N" memory.low) N_MIN=$(value "$N" memory.min)
check reservation-tiered '[ "$N_LOW" = "$(pages $REQ)" ] && [ "$N_POD_LOW" = "$(pages $REQ)" ] && [ "$N_MIN" = 0 ]' \
  "Burstable: container memory.low=$N_LOW pod memory.low=$N_POD_LOW memory.min=$N_MIN"
daemon_stop
note "phase C done"

# ---- Phase D: a second runtime handler (crun), by configuration alone ---------------------
if [ -x /usr/bin/crun ]; then
  write_config LimitedSwap min
  printf '[runtime.handlers.crun]\nbinary = "/usr/bin/crun"\n' >>$CONF
  daemon_start
  HANDLERS=$($C client status --verbose | tr -d ' \n')
  check crun-handler-probed 'echo "$HANDLERS" | grep -q "\"name\":\"crun\"" && echo "$HANDLERS" | grep -q "\"engine\":\"crun\""' \
    "crun listed with engine crun beside the built-in runc"
  P=$($C client runp crunpod --runtime-handler crun --annotation swapcri.io/qos-class=Burstable)
  CR=$($C client create "$P" app localhost/busybox:latest --annotation swapcri.io/memory-request=$REQ \
    --memory-limit $LIM -- sleep 100000)
  $C client start "$CR" >/dev/null
  CR_STATE=$(crun --root /run/swapcri/crun state "$CR" 2>&1 | tr -d ' \n')
  OUT=$($C client exec "$CR" -- sh -c 'echo from-crun; cat /sys/fs/cgroup/memory.swap.max')
  INSIDE=$(echo "$OUT" | tail -n 1) OUTSIDE=$(value "$CR" memory.swap.max)
  check crun-create-start-exec 'echo "$CR_STATE" | grep -q "\"status\":\"running\"" && echo "$OUT" | grep -q from-crun' \
    "crun state: $(echo "$CR_STATE" | grep -o '"status":"[a-z]*"'); exec said: $(echo "$OUT" | head -n 1)"
  check crun-cgroup-namespace '[ -n "$INSIDE" ] && [ "$INSIDE" = "$OUTSIDE" ] && [ "$INSIDE" != max ]' \
    "memory.swap.max seen in the container $INSIDE, in the kernel $OUTSIDE"
  $C client stop "$CR" --timeout 5 >/dev/null
  CR_EXIT=$($C client inspect "$CR" | tr -d ' \n')
  # CRI container state 2: exited.
  check crun-stop 'echo "$CR_EXIT" | grep -q "\"state\":2"' "$(echo "$CR_EXIT" | grep -o '"state":[0-9]*')"
  $C client rmp "$P" >/dev/null
  CR_GONE=$(crun --root /run/swapcri/crun list 2>/dev/null | grep -c "$CR")
  check crun-remove '[ "$CR_GONE" = 0 ]' "crun list after removal: $CR_GONE entries"
  daemon_stop
  note "phase D done"
else
  result crun-handler FAIL "crun is not in the VM"
fi
# ---- Phase E: thrash detection -----------------------------------------------------------
# Two containers with the same limits as kubelet sends them (memory.high 64 MiB, swap up to
# 256 MiB): one keeps 96 MiB hot, so a third of it is always being swapped back in; the
# other writes 96 MiB once and idles, so its third stays in swap untouched.
if [ -f /proc/pressure/memory ]; then
  write_config follow-kubelet follow-kubelet
  daemon_start
  LIMITS="--unified memory.high=$((64 * MI)) --unified memory.swap.max=$((256 * MI))"
  mkdir -p /sys/fs/cgroup/kubepods/burstable
  echo "+memory +io +cpu +pids" >/sys/fs/cgroup/kubepods/cgroup.subtree_control 2>/dev/null
  echo "+memory +io +cpu +pids" >/sys/fs/cgroup/kubepods/burstable/cgroup.subtree_control 2>/dev/null
  thrash_ctr() { # thrash_ctr NAME MODE
    p=$($C client runp "$1" --cgroup-parent "/kubepods/burstable/pod$1")
    c=$($C client create "$p" app localhost/busybox:latest --memory-limit $((512 * MI)) $LIMITS -- memtouch 96 "$2")
    $C client start "$c" >/dev/null && echo "$c"
  }
  # Only swapState has a "state" that is a word (the container's own state is a number).
  state_of() { $C client inspect --verbose "$1" | tr -d ' \n' | grep -o '"state":"[a-z]*"' | head -n 1 | cut -d'"' -f4; }
  COLD=$(thrash_ctr cold cold)
  settle "$COLD"
  HOT=$(thrash_ctr hot hot)
  STARTED=$(date +%s) DETECTED="" COLD_SEEN=""
  while [ $(($(date +%s) - STARTED)) -lt 120 ]; do
    [ "$(state_of "$HOT")" = thrashing ] && { DETECTED=$(($(date +%s) - STARTED)); break; }
    sleep 1
  done
  for i in 1 2 3 4 5 6 7 8 9 10; do COLD_SEEN="$COLD_SEEN $(state_of "$COLD")"; sleep 1; done
  HOT_RF=$(value "$HOT" memory.stat | awk '$1 == "workingset_refault_anon" { print $2 }')
  COLD_SC=$(value "$COLD" memory.swap.current)
  METRICS=$(wget -q -O - http://127.0.0.1:9117/metrics 2>&1)
  M_HOT=$(echo "$METRICS" | grep "^swapcri_container_swap_thrashing{.*$HOT" | awk '{ print $2 }')
  M_COLD=$(echo "$METRICS" | grep "^swapcri_container_swap_thrashing{.*$COLD" | awk '{ print $2 }')
  check thrash-detected '[ -n "$DETECTED" ] && [ "$M_HOT" = 1 ] && grep -q "to=\"*thrashing" $LOG' \
    "hot container thrashing after ${DETECTED:-never} s from its start (refaults $HOT_RF), metric $M_HOT; $(grep -m1 'to="*thrashing' $LOG | sed 's/.*memory_some/memory_some/')"
  check thrash-cold-normal '[ "$COLD_SC" -gt $((16 * MI)) ] && [ "$(echo $COLD_SEEN | tr " " "\n" | grep -c "^normal$")" = 10 ] && [ "$M_COLD" = 0 ]' \
    "cold container with $COLD_SC bytes in swap:$COLD_SEEN; metric $M_COLD"
  # Phase C's container was throttled at memory.high with no swap at all: never thrashing
  # (pressured when its stall outlasts a sample, as on 6.1; 6.12 ends it sooner).
  N_LINES=$(grep 'swap state changed' $LOG | grep 'pod=default/noswap')
  check throttled-not-thrashing '! echo "$N_LINES" | grep -q "to=\"*thrashing"' \
    "state changes of the throttled NoSwap container: $(echo "$N_LINES" | sed 's/.*from=/from=/' | tr '\n' ';')"
  TOP=$($C top --once --interval 1 2>&1)
  echo "$TOP" | sed 's/^/E2E-LOG top: /'
  check thrash-top '[ "$(echo "$TOP" | sed -n 2p | awk "{ print \$1, \$(NF - 1), \$NF }")" = "default/hot thrashing observe" ]' \
    "swapcri top lists the hot container first, thrashing, the guard observing: $(echo "$TOP" | sed -n 2p | tr -s ' ')"
  $C client stop "$HOT" --timeout 0 >/dev/null
  for p in $($C client pods | grep '"id"' | cut -d'"' -f4); do $C client rmp "$p" >/dev/null; done
  daemon_stop
  note "phase E done"
else
  result thrash-detection FAIL "no /proc/pressure/memory: the kernel runs without PSI"
fi
# ---- Phase F: the swap guard -------------------------------------------------------------
# A thrashing Burstable container (phase E's hot one, hot for a while) next to a
# well-behaved neighbour that runs a latency probe, under each [guard] action. Figures for
# the neighbour: its memory PSI some (% of the span) and its probe's median/max lateness
# (ms), before the thrash, during it and after the guard's action.
if [ -f /proc/pressure/memory ]; then
  GLIMITS="--memory-limit $((512 * MI)) --unified memory.high=$((64 * MI)) --unified memory.swap.max=$((256 * MI))"
  guard_config() { # guard_config ACTION
    write_config follow-kubelet follow-kubelet
    printf '[guard]\naction = "%s"\nkill_after_seconds = 10\nkill_interval_seconds = 60\n' "$1" >>$CONF
  }
  psi_us() { value "$1" memory.pressure | awk '$1 == "some" { sub("total=", "", $5); print $5 }'; }
  knobs() { echo "swap.high=$(value "$1" memory.swap.high) io=$(value "$1" io.weight 2>/dev/null | head -n 1 | tr ' ' :) cpu=$(value "$1" cpu.weight) cpu.max=$(value "$1" cpu.max | tr ' ' :)"; }
  # span ID SECONDS: the neighbour over the next SECONDS: "psi=P% probe=MEDIAN/MAX ms".
  span() {
    a=$(date +%s) p0=$(psi_us "$1")
    sleep "$2"
    b=$(date +%s) p1=$(psi_us "$1")
    lat=$($C client logs "$1" | awk -v a=$((a * 1000)) -v b=$((b * 1000)) '$1 == "probe" && $2 >= a && $2 < b { print $3 }' |
      sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "%d/%d", v[int((NR + 1) / 2)] / 1000, v[NR] / 1000; else printf "-" }')
    echo "psi=$(((p1 - p0) / ((b - a) * 10000)))% probe=${lat}ms"
  }
  is_thrashing() { [ "$(gstate "$1")" = thrashing ]; }
  # counted ACTION: the daemon's swapcri_swap_guard_actions_total for ACTION.
  counted() { wget -q -O - http://127.0.0.1:9117/metrics | grep "^swapcri_swap_guard_actions_total{action=\"$1\"}" | awk '{ print $2 }'; }
  is_acted() { [ -n "$(gaction "$1")" ]; }
  is_restored() { [ "$(value "$1" memory.swap.high)" = max ] && [ -z "$(gaction "$1")" ]; }
  is_exited() { $C client inspect "$1" | tr -d ' \n' | grep -q '"state":2'; }
  reason_of() { $C client inspect "$1" | tr -d ' \n' | grep -o '"reason":"[A-Za-z]*"' | cut -d'"' -f4; }

  for ACTION in observe throttle kill; do
    guard_config $ACTION
    daemon_start
    NB=$(gctr nb-$ACTION /kubepods/burstable/podnb$ACTION "16 probe")
    sleep 3
    BEFORE=$(span "$NB" 8)
    EXEMPT=""
    if [ $ACTION = kill ]; then
      # Thrashers the guard must never touch: a static (critical) pod and a Guaranteed one.
      CRIT=$(gctr crit /kubepods/burstable/podcrit "96 hot" --annotation kubernetes.io/config.source=file)
      GUAR=$(gctr guar /kubepods/podguar "96 hot")
      EXEMPT="$CRIT $GUAR"
      for id in $EXEMPT; do eval "KNOBS_$id=\"\$(knobs $id)\""; done
      # Three Burstable ones: the first is due alone and ended first; while the guard waits
      # after it (60 s: creating a container under this load takes seconds, and the last
      # one created must be throttled and due by then), the other two both come due, and
      # the lower priority goes next.
      FIRST=$(gctr first /kubepods/burstable/podfirst "96 hot")
      sleep 5
      HIGH=$(gctr high /kubepods/burstable/podhigh "96 hot" --annotation swapcri.io/priority=1000)
    fi
    # Hot for 45 s where the guard must see the thrash end (throttle), to the end for a kill:
    # the second kill comes 60 s after the first, and a thrasher whose hot phase ended by then
    # is rightly no longer a victim.
    hot_for=" 45"
    [ $ACTION = kill ] && hot_for=""
    HOT=$(gctr hot-$ACTION /kubepods/burstable/podhot$ACTION "96 hot$hot_for" --annotation swapcri.io/priority=-10)
    KNOBS0=$(knobs "$HOT")
    DET=$(wait_for 90 is_thrashing "$HOT") DET_AT=$(date +%s)
    ACT=$(wait_for 5 is_acted "$HOT") KNOBS1=$(knobs "$HOT") GA=$(gaction "$HOT")
    DURING=$(span "$NB" 8)
    case $ACTION in
      observe)
        check guard-observe '[ -n "$DET" ] && [ "$GA" = observe ] && [ "$KNOBS1" = "$KNOBS0" ]' \
          "thrashing after ${DET:-never} s, guard says ${GA:-nothing}, files unchanged ($KNOBS1); neighbour before: $BEFORE, during: $DURING"
        $C client stop "$HOT" --timeout 0 >/dev/null
        AFTER=$(span "$NB" 8)
        note "guard observe: neighbour after the thrasher stopped: $AFTER"
        ;;
      throttle)
        DURING2=$(span "$NB" 8)
        RESTORED=$(wait_for 90 is_restored "$HOT") RESTORED_S=$(($(date +%s) - DET_AT)) KNOBS2=$(knobs "$HOT")
        NT=$(counted throttle) NR=$(counted restore)
        AFTER=$(span "$NB" 8)
        check guard-throttle '[ -n "$DET" ] && [ "$GA" = throttled ] && [ "$KNOBS1" != "$KNOBS0" ] && ! echo "$KNOBS1" | grep -q "swap.high=max" && [ -n "$RESTORED" ] && [ "$KNOBS2" = "$KNOBS0" ] && [ "${NT:-0}" -ge 1 ] && [ "$NR" = "$NT" ]' \
          "thrashing after ${DET:-never} s, throttled ${ACT:-never} s later: $KNOBS0 -> $KNOBS1; put back ${RESTORED:+$RESTORED_S s after detection (hot for 45 s from its start)}: $KNOBS2; metrics: $NT throttle, $NR restore; neighbour before: $BEFORE, during: $DURING, throttled: $DURING2, after: $AFTER"
        ;;
      kill)
        for id in $FIRST $HOT $HIGH; do wait_for 120 is_exited "$id" >/dev/null; done
        AFTER=$(span "$NB" 8)
        MSG=$($C client inspect "$HOT" | tr -d '\n' | grep -o '"message": *"[^"]*"' | cut -d'"' -f4)
        ended() { $C client inspect "$1" | tr -d ' \n' | grep -o '"finished_at":[0-9]*' | cut -d: -f2; }
        F1=$(ended "$FIRST") F2=$(ended "$HOT") F3=$(ended "$HIGH")
        F1=${F1:-0} F2=${F2:-0} F3=${F3:-0}
        ORDER=$(printf '%s first\n%s hot\n%s high\n' "$F1" "$F2" "$F3" | sort -n | awk '{ printf "%s ", $2 }')
        GAPS="$(((F2 - F1) / 1000000000)) s, $(((F3 - F2) / 1000000000)) s"
        REASONS="$(reason_of "$FIRST") $(reason_of "$HOT") $(reason_of "$HIGH")" NK=$(counted kill)
        check guard-kill '[ "$ORDER" = "first hot high " ] && [ "$REASONS" = "SwapThrashing SwapThrashing SwapThrashing" ] && [ $(((F2 - F1) / 1000000000)) -ge 55 ] && [ $(((F3 - F2) / 1000000000)) -ge 55 ] && echo "$MSG" | grep -q "swap-ins/s" && [ "$NK" = 3 ]' \
          "ended in the order: $ORDER($REASONS), $GAPS apart, $NK kills counted; priority -10 thrashing since $DET s from its start, ended $(((F2 / 1000000000) - DET_AT)) s after that: $MSG; neighbour before: $BEFORE, during: $DURING, after: $AFTER"
        BAD=""
        for id in $EXEMPT; do
          eval "k0=\$KNOBS_$id"
          [ "$(knobs "$id")" = "$k0" ] && ! is_exited "$id" && [ "$(gaction "$id")" != throttled ] || BAD="$BAD $id($(knobs "$id"), $(gstate "$id"))"
        done
        check guard-exempt '[ -z "$BAD" ]' \
          "critical: $(gstate "$CRIT") guard=$(gaction "$CRIT"), Guaranteed: $(gstate "$GUAR") guard=$(gaction "$GUAR"); acted on:${BAD:- none}"
        ;;
    esac
    remove_all
    daemon_stop
    note "phase F ($ACTION) done"
  done
else
  result swap-guard FAIL "no /proc/pressure/memory: the kernel runs without PSI"
fi
# ---- Phase G: cold-memory offload (offload.sh) ------------------------------------------
. /e2e/offload.sh
[ -n "$FAILED" ] && dump_log
true
