#!/bin/sh
# kubelet's Summary API (/stats/summary: what `kubectl top --show-swap` and metrics-server read)
# against the kernel, on the node e2e node after the suite: a Burstable pod whose container
# allocates past its memory limit runs under LimitedSwap; the swap usage /stats/summary reports
# for the container must equal the memory.swap.current of its cgroup, first with
# PodAndContainerStatsFromCRI on (the runtime's figures), then off (cAdvisor's, kubelet
# restarted with the pod still running). The API server and etcd come from the suite's binary
# (--run-services-mode); kubelet is the suite's kubelet, started here.
#   summary-swap.sh RUNTIME DRIVER ENDPOINT     prints E2E-RESULT lines
T0=$(date +%s)
. /e2e/helpers.sh
RUNTIME=$1 DRIVER=$2 ENDPOINT=$3
IN=/e2e/node-e2e
W=/var/lib/summary-swap
NODE=swapcri-node
API=https://127.0.0.1:6443
POD=swap-summary
rm -rf $W && mkdir -p $W && chmod 0700 $W && cd $W || exit 1
TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
SVC=""
KUBELET=""

# crictl against the runtime under test (the node's crictl.yaml names swapcri for both).
cri() { crictl --runtime-endpoint "$ENDPOINT" --image-endpoint "$ENDPOINT" "$@"; }
stop_kubelet() {
  [ -n "$KUBELET" ] && stop "$KUBELET"
  KUBELET=""
}
finish() {
  api DELETE "/api/v1/namespaces/default/pods/$POD?gracePeriodSeconds=0" >/dev/null 2>&1
  i=0
  while [ $i -lt 60 ] && cri pods -q --name "$POD" 2>/dev/null | grep -q .; do
    sleep 2
    i=$((i + 1))
  done
  stop_kubelet
  [ -n "$SVC" ] && stop "$SVC"
}
fail() { # NAME WHY
  result "$1" FAIL "$2"
  tail -n 15 $W/kubelet.log 2>/dev/null | cut -c1-300 | sed 's/^/E2E-LOG kubelet: /'
  finish
  exit 0
}

start_kubelet() { # GATE
  kubelet_config "$DRIVER" "$ENDPOINT" "$1" >$W/kubelet.yaml
  $IN/kubelet --config $W/kubelet.yaml --kubeconfig $W/kubeconfig --hostname-override $NODE \
    --root-dir $W/root --runtime-cgroups "$(runtime_cgroup)" -v 2 >>$W/kubelet.log 2>&1 &
  KUBELET=$!
  i=0
  until curl -sf http://127.0.0.1:10255/healthz >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -lt 120 ] || fail "summary-swap-$RUNTIME-$DRIVER" "kubelet (stats from CRI: $1) did not become healthy in 120 s"
    sleep 1
  done
}
runtime_cgroup() { systemctl show -p ControlGroup --value "$RUNTIME.service"; }

# The hog container's cgroup (helpers.sh's cg).
container_cgroup() {
  id=$(cri ps -q --name hog --label "io.kubernetes.pod.name=$POD" | head -n 1)
  [ -n "$id" ] && cg "$id"
}
# The hog container's swap usage in /stats/summary, or nothing.
summary_swap() {
  curl -sf http://127.0.0.1:10255/stats/summary | python3 -c '
import json, sys
for pod in json.load(sys.stdin).get("pods", []):
    if pod["podRef"]["name"] == sys.argv[1]:
        for c in pod.get("containers", []):
            if c["name"] == "hog" and "swapUsageBytes" in (c.get("swap") or {}):
                print(c["swap"]["swapUsageBytes"])' "$POD"
}

# compare GATE: kernel, summary, kernel again until both kernel reads agree and the summary
# equals them (the kernel's figure moves while the kernel swaps), at most 180 s.
compare() {
  name="summary-swap-$RUNTIME-$DRIVER-cri-stats-$1"
  i=0 last=""
  while [ $i -lt 90 ]; do
    cgdir=$(container_cgroup)
    if [ -n "$cgdir" ]; then
      k1=$(cat "$cgdir/memory.swap.current") s=$(summary_swap) k2=$(cat "$cgdir/memory.swap.current")
      last="kernel $k1 then $k2, summary ${s:-absent}"
      if [ "$k1" = "$k2" ] && [ "${k1:-0}" -gt 0 ] && [ "$s" = "$k1" ]; then
        result "$name" PASS "container swap in /stats/summary = memory.swap.current = $k1 bytes ($cgdir)"
        return 0
      fi
    fi
    i=$((i + 1))
    sleep 2
  done
  # Recorded, and the other gate setting still measured.
  result "$name" FAIL "no agreement in 180 s: ${last:-no cgroup found for the hog: $(cri ps --name hog 2>&1 | tail -n 2)}"
  tail -n 15 $W/kubelet.log 2>/dev/null | cut -c1-300 | sed 's/^/E2E-LOG kubelet: /'
  return 1
}

note "summary API swap check: $RUNTIME, $DRIVER driver"
api_server_up ||
  fail "summary-swap-$RUNTIME-$DRIVER" "the suite's API server did not become healthy in 300 s: $(tail -n 3 $W/services.log)"

# LimitedSwap gives a Burstable container whose memory request is below its limit (one whose
# request equals its limit gets none) request / node memory of the swap; the hog goes past
# its limit by half of that, so it swaps without reaching its limit plus its swap.
request=$((384 * MI)) limit=$((512 * MI))
swap_limit=$(($(meminfo SwapTotal) / MI * request / ($(meminfo MemTotal) / MI)))
total=$((limit + swap_limit / 2))
note "pod: memory request $request, limit $limit, LimitedSwap limit about $swap_limit, the hog allocates $total"
start_kubelet true
pod=$(printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","namespace":"default"},"spec":{"nodeName":"%s","restartPolicy":"Never","terminationGracePeriodSeconds":1,"containers":[{"name":"hog","image":"registry.k8s.io/e2e-test-images/agnhost:2.66.1","args":["stress","--mem-alloc-size","16Mi","--mem-alloc-sleep","200ms","--mem-total","%s"],"resources":{"requests":{"memory":"%s"},"limits":{"memory":"%s"}}}]}}' \
  "$POD" "$NODE" "$total" "$request" "$limit")
i=0
until api POST /api/v1/namespaces/default/pods "$pod" | grep -q '"uid"'; do
  # The default namespace appears once the API server's bootstrap controller made it.
  i=$((i + 1))
  [ $i -lt 60 ] || fail "summary-swap-$RUNTIME-$DRIVER" "the API server did not take the pod"
  sleep 2
done
compare true || true
stop_kubelet
start_kubelet false
compare false || true
finish
