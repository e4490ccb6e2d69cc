# The cold-memory offload's scenarios (sourced by scenarios.sh, or alone with
# `hack/vm/e2e.sh --only offload`). Two Burstable containers with a LimitedSwap share and room
# in memory: one writes 100 MiB once and idles, the other keeps 64 MiB hot. With [offload] on,
# the idle one's memory goes to swap step by step while its own memory pressure stays near
# zero; the hot one is never probed and faults nothing back. The hot one is watched for
# /e2e/offload-seconds (60 by default; hack/vm/e2e.sh's SWAPCRI_VM_OFFLOAD_SECONDS).
# The parents kubelet would have made (earlier phases may have).
mkdir -p /sys/fs/cgroup/kubepods/burstable
echo "+memory +io +cpu +pids" >/sys/fs/cgroup/kubepods/cgroup.subtree_control 2>/dev/null
if [ -f /proc/pressure/memory ] && [ -f /sys/fs/cgroup/kubepods/burstable/memory.reclaim ]; then
  SECONDS_HOT=$(cat /e2e/offload-seconds 2>/dev/null || echo 60)
  write_config follow-kubelet follow-kubelet
  sed -i 's/^log_level = .*/log_level = "debug"/' $CONF
  printf '[offload]\nenabled = true\n' >>$CONF
  daemon_start
  GLIMITS="--memory-limit $((512 * MI)) --unified memory.swap.max=$((256 * MI))"
  IDLE=$(gctr idle /kubepods/burstable/podidle "100 cold")
  START=$(date +%s)
  WARM=$(gctr warm /kubepods/burstable/podwarm "64 hot")
  # The watching itself must cost the VM's vCPUs little: the hot container has to run to
  # stay hot. The cgroup directories are found once, the daemon asked once a look.
  IDLE_CG=$(cg "$IDLE") WARM_CG=$(cg "$WARM")
  avg10() { awk '$1 == "some" { sub("avg10=", "", $2); print $2 }' "$1/memory.pressure"; }
  stat_of() { awk -v k="$2" '$1 == k { print $2 }' "$1/memory.stat"; }
  # lists DIR: the kernel's LRU lists for the container's anonymous memory, MiB.
  lists() { echo "active_anon $(($(stat_of "$1" active_anon) / MI)) inactive_anon $(($(stat_of "$1" inactive_anon) / MI))"; }
  offload_json() { $C client inspect --verbose "$1" | tr -d ' \n' | grep -o '"offload":{.*'; }
  requested_in() { grep -o '"requested":[0-9]*' | head -n 1 | cut -d: -f2; }
  # hot_look: the hot container now: asked of the kernel, why the offload waits, the bytes
  # its process touched since the offload's last look, its anon, its refaults.
  hot_look() {
    json=$(offload_json "$WARM")
    ref=$(awk '$1 == "Referenced:" { print $2 }' "/proc/$(head -n 1 "$WARM_CG/cgroup.procs")/smaps_rollup")
    echo "$(($(date +%s) - START))s:req=$(echo "$json" | requested_in),$(echo "$json" | grep -o '"why":"[a-zA-Z]*"' | head -n 1 | cut -d'"' -f4),ref=$((ref / 1024))M,anon=$(($(stat_of "$WARM_CG" anon) / MI))M,rf=$(stat_of "$WARM_CG" workingset_refault_anon)"
  }
  I0=0 PSI_MAX=0 TRACE="" LISTS="" HOT_TRACE=""
  while [ $(($(date +%s) - START)) -lt 60 ]; do
    sleep 5
    P=$(avg10 "$IDLE_CG")
    PSI_MAX=$(echo "$P $PSI_MAX" | awk '{ print ($1 > $2) ? $1 : $2 }')
    TRACE="$TRACE $(($(date +%s) - START))s:$(($(cat "$IDLE_CG/memory.swap.current") / MI))MiB"
    [ -n "$LISTS" ] || LISTS="idle: $(lists "$IDLE_CG"), hot: $(lists "$WARM_CG")"
    HOT_TRACE="$HOT_TRACE $(hot_look)"
  done
  I1=$(cat "$IDLE_CG/memory.swap.current")
  REQ=$(wget -q -O - http://127.0.0.1:9117/metrics | grep '^swapcri_offload_reclaim_requested_bytes_total' | awk '{ print $2 }')
  check offload-idle '[ $((I1 - I0)) -ge $((20 * MI)) ] && echo "$PSI_MAX" | awk "{ exit !(\$1 < 1) }" && [ "${REQ:-0}" -gt 0 ]' \
    "idle container: $(((I1 - I0) / MI)) MiB of 100 moved to swap within 60 s of its start (in swap at:$TRACE), its memory PSI some avg10 at most $PSI_MAX%; $REQ bytes asked of memory.reclaim in all; the kernel's lists 5 s in: $LISTS"
  while [ $(($(date +%s) - START)) -lt "$SECONDS_HOT" ]; do
    sleep 5
    # Only the first 2 minutes: the long form's last 3 are left to the two containers alone.
    [ $(($(date +%s) - START)) -lt 120 ] && HOT_TRACE="$HOT_TRACE $(hot_look)"
  done
  W_SWAP=$(cat "$WARM_CG/memory.swap.current") W_ANON=$(stat_of "$WARM_CG" anon) W_PSI=$(avg10 "$WARM_CG")
  W_RF=$(stat_of "$WARM_CG" workingset_refault_anon) W_REQ=$(offload_json "$WARM" | requested_in)
  I2=$(cat "$IDLE_CG/memory.swap.current")
  # At most 1 MiB faulted back, and nothing asked of the kernel for it.
  check offload-hot-kept '[ "$W_ANON" -ge $((64 * MI)) ] && [ "$W_RF" -le $((MI / PAGE)) ] && [ "${W_REQ:-1}" = 0 ]' \
    "hot container after $(($(date +%s) - START)) s beside the offloading one: $((W_ANON / MI)) MiB anonymous memory resident, $W_SWAP bytes in swap, $W_RF pages refaulted, PSI some avg10 $W_PSI%, $(lists "$WARM_CG"); asked of the kernel for it: ${W_REQ:-?} bytes; the idle one then had $((I2 / MI)) MiB in swap; every 5 s for 2 minutes:$HOT_TRACE"
  # The offload's looks at the hot container (debug log): those that probed it, and how many
  # found it running yet touching (almost) nothing, which the offload does not believe.
  hot_looks() { grep "offload look" $LOG | grep "$WARM"; }
  hot_looks | grep 'step=Reclaim' | tail -n 12 | sed 's/^.*idle_anon/idle_anon/' | sed 's/^/E2E-LOG offload hot probed: /'
  echo "E2E-LOG offload hot: $(hot_looks | grep -c 'idle_anon=NotSeen') of $(hot_looks | wc -l) looks with the accessed bits not believed; the last: $(hot_looks | grep 'idle_anon=NotSeen' | tail -n 1 | sed 's/^.*idle_anon/idle_anon/')"
  remove_all
  daemon_stop
  note "phase G done"
else
  result cold-memory-offload FAIL "no /proc/pressure/memory or memory.reclaim on this kernel"
fi
