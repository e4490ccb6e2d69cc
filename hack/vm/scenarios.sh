#!/bin/sh
# The e2e scenarios, run inside the VM. Each prints `E2E-RESULT <name> PASS|FAIL <details>`.
C="swapcri --config /etc/swapcri/config.toml"

result() { echo "E2E-RESULT $1 $2 $3"; }
check() { # check NAME CONDITION DETAILS
  if eval "$2"; then result "$1" PASS "$3"; else result "$1" FAIL "$3"; fi
}
meminfo() { awk -v k="$1:" '$1 == k { print $2 * 1024 }' /proc/meminfo; }
cg() { find /sys/fs/cgroup -maxdepth 4 -type d -name "$1" | head -n 1; }

$C serve >/tmp/swapcri.log 2>&1 &
i=0
while [ ! -S /run/swapcri/swapcri.sock ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
$C image import /images/busybox.tar >/dev/null || { result startup FAIL "image import"; cat /tmp/swapcri.log; exit 0; }

MEM=$(meminfo MemTotal)
SWAP=$(meminfo SwapTotal)
PAGE=4096
MI=1048576

# Status: node facts seen by the daemon, noswap fallback on kernels without it.
STATUS=$($C client status --verbose)
check status-memtotal 'echo "$STATUS" | grep -q "mem_total[^0-9]*$MEM"' "MemTotal $MEM"
case "$(uname -r)" in
  6.1.*) check noswap-fallback 'echo "$STATUS" | grep -q "tmpfs refused noswap"' "6.1: probe mount refused" ;;
  *) check noswap-version 'echo "$STATUS" | grep -q "kernel-version"' "decided by version" ;;
esac

# run NAME QOS REQUEST LIMIT -> prints the container's cgroup dir; container allocates ALLOC bytes.
start_ctr() {
  name=$1; qos=$2; request=$3; limit=$4; alloc=$5
  pod=$($C client runp "$name" --annotation swapcri.io/qos-class=$qos)
  set -- --annotation swapcri.io/memory-request=$request
  [ "$request" = 0 ] && set --
  ctr=$($C client create "$pod" app localhost/busybox:latest "$@" --memory-limit "$limit" \
    -- sh -c "head -c $alloc /dev/zero | tail > /dev/null; sleep 600")
  $C client start "$ctr" >/dev/null
  echo "$ctr"
}

value() { cat "$(cg "$1")/$2"; }
# Waits until the container's memory use settles (the allocation is done).
settle() {
  prev=-1; n=0
  while [ $n -lt 120 ]; do
    cur=$(( $(value "$1" memory.current) + $(value "$1" memory.swap.current) ))
    [ "$cur" = "$prev" ] && [ "$cur" -gt $((50 * MI)) ] && return 0
    prev=$cur; n=$((n + 1)); sleep 1
  done
}

# 1. LimitedSwap Burstable: kubelet's value, page-rounded; it swaps past memory.high, within the limit.
REQ=$((128 * MI)); LIM=$((256 * MI)); LOAD=$((190 * MI))
B=$(start_ctr burstable Burstable $REQ $LIM $LOAD)
EXPECT=$(( REQ * SWAP / MEM / PAGE * PAGE ))
GOT=$(value "$B" memory.swap.max)
D=$(( GOT - EXPECT )); [ $D -lt 0 ] && D=$(( -D ))
check burstable-swap-max '[ $D -le $PAGE ]' "memory.swap.max=$GOT expected=$EXPECT (request $REQ, MemTotal $MEM, SwapTotal $SWAP)"
HIGH=$(value "$B" memory.high)
check burstable-memory-high '[ "$HIGH" -gt $REQ ] && [ "$HIGH" -lt $LIM ]' "memory.high=$HIGH"
settle "$B"
SC=$(value "$B" memory.swap.current)
check burstable-swaps '[ "$SC" -gt 0 ] && [ "$SC" -le "$GOT" ]' "memory.swap.current=$SC limit=$GOT"

# 2. Guaranteed, BestEffort and request == limit: 0, and no swapping under the same load.
G=$(start_ctr guaranteed Guaranteed 0 $LIM $LOAD)
E=$(start_ctr besteffort BestEffort 0 0 $LOAD)
Q=$(start_ctr equal Burstable $LIM $LIM $LOAD)
for pair in "guaranteed:$G" "besteffort:$E" "request-equals-limit:$Q"; do
  name=${pair%%:*}; id=${pair#*:}
  settle "$id"
  SM=$(value "$id" memory.swap.max); SC=$(value "$id" memory.swap.current)
  check "$name-no-swap" '[ "$SM" = 0 ] && [ "$SC" = 0 ]' "memory.swap.max=$SM memory.swap.current=$SC"
done

# 3. Read-back: the daemon found every plan value in the kernel.
MISMATCH=$($C client inspect --verbose "$B" | grep -c 'expected' || true)
check read-back '[ "$MISMATCH" = 0 ]' "mismatches=$MISMATCH"

# 4. Stats: CRI swap usage matches the cgroup.
STATS=$($C client stats "$B")
check stats-swap 'echo "$STATS" | grep -q swap_usage_bytes' "ContainerStats has SwapUsage"

