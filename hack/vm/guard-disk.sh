# The swap guard on a node that swaps to its own disk (`hack/vm/e2e.sh --only guard-disk`):
# init.sh put the daemon's state (the containers' writable layers), the pods' logs and the
# only swap (a swap file) on one ext4 disk, /dev/vdb. A latency-sensitive neighbour
# (`memtouch 16 disk`: every 200 ms it touches its memory, rewrites and fsyncs a file in its
# writable layer and reads another past the page cache) runs beside two CPU-bound containers
# (more busy tasks than the 2 vCPUs), then a thrasher starts. The daemon protects the system
# as an operator would set it up ([system]: io.cost on the swap disk). For each [guard] action the
# neighbour's round latency (p50/p99 ms) and the node's io pressure (some, % of the span)
# are measured before the thrash and once the guard has acted.
SECONDS_SPAN=60
DISK=$(cat /sys/block/vdb/dev 2>/dev/null)
if [ -f /proc/pressure/io ] && [ -f /proc/pressure/memory ]; then
  GLIMITS="--memory-limit $((512 * MI)) --unified memory.high=$((64 * MI)) --unified memory.swap.max=$((256 * MI))"
  io_some_us() { awk '$1 == "some" { sub("total=", "", $5); print $5 }' /proc/pressure/io; }
  # probe_latency ID FROM TO: "p50/p99" ms of the probe's rounds between two epoch seconds.
  probe_latency() {
    $C client logs "$1" | awk -v a=$(($2 * 1000)) -v b=$(($3 * 1000)) '$1 == "probe" && $2 >= a && $2 < b { print $3 }' |
      sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "%d/%d", v[int((NR + 1) / 2)] / 1000, v[int(NR * 0.99 + 0.99)] / 1000; else printf "-/-" }'
  }
  # probe_parts ID FROM TO: where the slowest 1 % of the rounds spent their time, mean ms:
  # "wait=W touch=T fsync=F read=R" (wait: for a CPU once the timer fired).
  probe_parts() {
    $C client logs "$1" | awk -v a=$(($2 * 1000)) -v b=$(($3 * 1000)) '$1 == "probe" && $2 >= a && $2 < b { print $3, $4, $5, $6 }' |
      sort -n | awk '{ l[NR] = $0 } END { n = int(NR / 100) + 1; for (i = NR - n + 1; i <= NR; i++) { split(l[i], f, " "); w += f[1] - f[2] - f[3] - f[4]; t += f[2]; s += f[3]; r += f[4] }
        if (NR) printf "wait=%d touch=%d fsync=%d read=%d", w / n / 1000, t / n / 1000, s / n / 1000, r / n / 1000 }'
  }
  vmstat() { awk -v k="$1" '$1 == k { print $2 }' /proc/vmstat; }
  # thrasher_figures ID: the counters its span is judged by, "KEY=VALUE ..." (cumulative).
  thrasher_figures() {
    dir=$(cg "$1")
    [ -n "$dir" ] || return 0
    io=$(awk -v d="$DISK" '$1 == d { for (i = 2; i <= NF; i++) printf "%s ", $i }' "$dir/io.stat" 2>/dev/null)
    cpu=$(awk '$1 == "usage_usec" || $1 == "throttled_usec" { printf "%s=%s ", $1, $2 }' "$dir/cpu.stat" 2>/dev/null)
    echo "$io$cpu pswpin=$(vmstat pswpin) pswpout=$(vmstat pswpout)"
  }
  # per_second BEFORE AFTER SECONDS: each counter's rate over the span (a counter missing
  # before counts from 0).
  per_second() {
    printf '%s\n%s\n' "$1" "$2" | awk -v s="$3" '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[NR, kv[1]] = kv[2]; if (NR == 2) k[++n] = kv[1] } }
      END { for (i = 1; i <= n; i++) printf "%s/s=%d ", k[i], (v[2, k[i]] - v[1, k[i]]) / s }'
  }
  # measure ID [THRASHER]: the neighbour over the next SECONDS_SPAN: "P50/P99 IO%"; the slow
  # rounds' parts and the thrasher's rates are noted.
  measure() {
    a=$(date +%s) i0=$(io_some_us) f0=${2:+$(thrasher_figures "$2")}
    sleep $SECONDS_SPAN
    b=$(date +%s) i1=$(io_some_us) f1=${2:+$(thrasher_figures "$2")}
    note "guard-disk $ACTION: the neighbour's slowest rounds: $(probe_parts "$1" "$a" "$b")${2:+; the thrasher: $(per_second "$f0" "$f1" $((b - a)))}" >&2
    echo "$(probe_latency "$1" "$a" "$b") $(((i1 - i0) / ((b - a) * 10000)))"
  }
  # ms P99: a measured p99, or 999999 when the span had no rounds.
  ms() { case $1 in '' | *[!0-9]*) echo 999999 ;; *) echo "$1" ;; esac; }
  is_thrashing() { [ "$(gstate "$1")" = thrashing ]; }
  is_acted() { [ -n "$(gaction "$1")" ]; }
  TABLE=""
  for ACTION in observe throttle kill; do
    write_config follow-kubelet follow-kubelet system
    printf '[guard]\naction = "%s"\nkill_after_seconds = 10\nkill_interval_seconds = 60\n' "$ACTION" >>$CONF
    daemon_start
    NB=$(gctr nb-$ACTION /kubepods/burstable/podnb$ACTION "16 disk")
    gctr cpu1-$ACTION /kubepods/burstable/podcpu1$ACTION "1 hot" >/dev/null
    gctr cpu2-$ACTION /kubepods/burstable/podcpu2$ACTION "1 hot" >/dev/null
    sleep 5
    set -- $(measure "$NB")
    BEFORE_LAT=$1 BEFORE_IO=$2
    # The thrasher reclaims at its memory limit (no memory.high to slow it down first).
    TH=$(GLIMITS="--memory-limit $((64 * MI)) --unified memory.swap.max=$((512 * MI))" gctr th-$ACTION /kubepods/burstable/podth$ACTION "320 hot 900")
    DET=$(wait_for 180 is_thrashing "$TH")
    ACT=$(wait_for 20 is_acted "$TH") GA=$(gaction "$TH")
    if [ "$ACTION" = throttle ]; then
      # io.cost weighs the container only within its pod: the pod's weight is lowered too.
      POD_W=$(awk '$1 == "default" { print $2 }' "$(dirname "$(cg "$TH")")/io.weight" 2>/dev/null)
      check guard-disk-pod-throttled '[ "$POD_W" = 10 ]' "the thrasher's pod: io.weight default ${POD_W:-absent} while throttled"
    fi
    [ "$ACTION" = kill ] && sleep 15 # kill_after_seconds, then the kill
    note "guard-disk $ACTION: the thrasher's files: swap.high=$(value "$TH" memory.swap.high) cpu.max=$(value "$TH" cpu.max | tr ' ' :) io.max=[$(value "$TH" io.max | tr ' \n' ':,')]"
    set -- $(measure "$NB" "$TH")
    DURING_LAT=$1 DURING_IO=$2
    THS=$($C client inspect "$TH" | tr -d ' \n' | grep -o '"state":[0-9]' | head -n 1)
    note "guard-disk $ACTION: before $BEFORE_LAT ms io $BEFORE_IO%; thrashing ${DET:-never} s after start, guard ${GA:-none}; during $DURING_LAT ms io $DURING_IO%; thrasher $THS"
    TABLE="$TABLE $ACTION:${DURING_LAT}ms,io${DURING_IO}%"
    eval "P99_$ACTION=$(ms "${DURING_LAT#*/}") BEFORE_P99_$ACTION=$(ms "${BEFORE_LAT#*/}")"
    check "guard-disk-$ACTION" '[ -n "$DET" ] && [ "$DURING_LAT" != "-/-" ]' \
      "neighbour p50/p99 $BEFORE_LAT ms, node io some $BEFORE_IO% before; thrasher thrashing ${DET:-never} s after its start, guard: ${GA:-none}; then $DURING_LAT ms, io $DURING_IO%"
    remove_all
    daemon_stop
  done
  # What the guard is for: where the thrasher hurt the neighbour (its p99 under `observe` over
  # 1.5 times its own before), the guard's actions leave it better off than observing; where
  # it did not, they must not make it worse than observing by as much (1.5 times).
  if [ "$P99_observe" -gt $(($BEFORE_P99_observe * 3 / 2)) ]; then
    check guard-disk-helps '[ "$P99_throttle" -lt "$P99_observe" ] && [ "$P99_kill" -lt "$P99_observe" ]' \
      "the thrasher hurt the neighbour (p99 $BEFORE_P99_observe -> $P99_observe ms); p50/p99 once the guard acted:$TABLE"
  else
    check guard-disk-harmless '[ "$P99_throttle" -le $((P99_observe * 3 / 2)) ] && [ "$P99_kill" -le $((P99_observe * 3 / 2)) ]' \
      "the thrasher did not hurt the neighbour (p99 $BEFORE_P99_observe -> $P99_observe ms under observe): nothing to save; the guard's actions must not hurt it either:$TABLE"
  fi
else
  result guard-disk FAIL "no /proc/pressure/io or /proc/pressure/memory on this kernel"
fi
