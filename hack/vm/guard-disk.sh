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
if [ -f /proc/pressure/io ] && [ -f /proc/pressure/memory ]; then
  GLIMITS="--memory-limit $((512 * MI)) --unified memory.high=$((64 * MI)) --unified memory.swap.max=$((256 * MI))"
  io_some_us() { awk '$1 == "some" { sub("total=", "", $5); print $5 }' /proc/pressure/io; }
  # probe_latency ID FROM TO: "p50/p99" ms of the probe's rounds between two epoch seconds.
  probe_latency() {
    $C client logs "$1" | awk -v a=$(($2 * 1000)) -v b=$(($3 * 1000)) '$1 == "probe" && $2 >= a && $2 < b { print $3 }' |
      sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "%d/%d", v[int((NR + 1) / 2)] / 1000, v[int(NR * 0.99 + 0.99)] / 1000; else printf "-/-" }'
  }
  # measure ID: the neighbour over the next SECONDS_SPAN: "P50/P99 IO%".
  measure() {
    a=$(date +%s) i0=$(io_some_us)
    sleep $SECONDS_SPAN
    b=$(date +%s) i1=$(io_some_us)
    echo "$(probe_latency "$1" "$a" "$b") $(((i1 - i0) / ((b - a) * 10000)))"
  }
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
    [ "$ACTION" = kill ] && sleep 15 # kill_after_seconds, then the kill
    set -- $(measure "$NB")
    DURING_LAT=$1 DURING_IO=$2
    THS=$($C client inspect "$TH" | tr -d ' \n' | grep -o '"state":[0-9]' | head -n 1)
    note "guard-disk $ACTION: before $BEFORE_LAT ms io $BEFORE_IO%; thrashing ${DET:-never} s after start, guard ${GA:-none}; during $DURING_LAT ms io $DURING_IO%; thrasher $THS"
    TABLE="$TABLE $ACTION:${DURING_LAT}ms,io${DURING_IO}%"
    eval "P99_$ACTION=\${DURING_LAT#*/}"
    check "guard-disk-$ACTION" '[ -n "$DET" ] && [ "$DURING_LAT" != "-/-" ]' \
      "neighbour p50/p99 $BEFORE_LAT ms, node io some $BEFORE_IO% before; thrasher thrashing ${DET:-never} s after its start, guard: ${GA:-none}; then $DURING_LAT ms, io $DURING_IO%"
    remove_all
    daemon_stop
  done
  # What the guard is for: its actions leave the neighbour better off than observing.
  check guard-disk-helps '[ "${P99_throttle:-999999}" -lt "${P99_observe:-0}" ] && [ "${P99_kill:-999999}" -lt "${P99_observe:-0}" ]' \
    "neighbour p50/p99 once the guard acted:$TABLE"
else
  result guard-disk FAIL "no /proc/pressure/io or /proc/pressure/memory on this kernel"
fi
