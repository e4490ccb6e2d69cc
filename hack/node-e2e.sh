#!/usr/bin/env bash
# Kubernetes' node e2e suite (test/e2e_node of 1.37.2) with a real kubelet of 1.37.2 driving
# swapcri, on the systemd VM node (hack/vm/systemd-node.sh: kernel 6.12, cgroup v2, swap on).
# kubelet, e2e_node.test and agnhost are built from hack/k8s's pinned module (hack/tools.sh,
# cached); the images the specs pull are stand-ins built here (hack/critest/images.sh with
# AGNHOST), served by the node's own registry under their real names.
#   sudo hack/node-e2e.sh                  DRIVER=systemd|cgroupfs (default systemd)
#   RUNTIME=swapcri|containerd             the runtime kubelet drives (default swapcri;
#                                          containerd 2.4.2 from hack/containerd, for comparison)
#   FORM=short|standard|long               what runs (default short; see docs/testing.md)
#   SHARD=K/N                              only the K-th of N round-robin parts of the form's
#                                          specs (hack/node-e2e-shard.py), for the long form
#   PROCS=N                                ginkgo processes (default 1; 4 in the long form):
#                                          specs run N at a time, [Serial] ones alone at the end
#   FOCUS=REGEX SKIP=REGEX TIMEOUT=SECONDS  instead of the form's
#   CRI_STATS=true|false                   kubelet's PodAndContainerStatsFromCRI (default true)
# Prints `node-e2e: <runtime> <driver>: N passed, N failed, N skipped`; the JUnit and JSON
# reports, the suite's log and swapcri's journal stay in
# /var/tmp/swapcri-node-e2e/<runtime>-<driver>-<form>/report (form `custom` with FOCUS,
# `<form>-shardKofN` with SHARD).
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
require_root
install_packages
ensure_cargo

RUNTIME=${RUNTIME:-swapcri}
DRIVER=${DRIVER:-systemd}
FORM=${FORM:-short}
case $RUNTIME in swapcri | containerd) ;; *) echo "RUNTIME=swapcri or containerd" >&2; exit 2 ;; esac
case $DRIVER in systemd | cgroupfs) ;; *) echo "DRIVER=systemd or cgroupfs" >&2; exit 2 ;; esac

# What never runs on this node, with the reason in docs/testing.md: specs that need hardware
# (GPUs, devices, SR-IOV, huge pages), dynamic resource allocation drivers, images no stand-in
# replaces (perl for the filesystem quota monitoring spec, the node-perf workloads), and the
# Flaky ones.
SKIP_ALWAYS='\[Flaky\]|private registry|\[Benchmark\]|GPU|Device Plugin|DevicePlugin|SRIOV|\[DRA\]|HugePages|NodeProblemDetector|LSCIQuotaMonitoring'
case $FORM in
  # What CI runs (with the Summary API's swap check after it): the LimitedSwap specs that
  # check memory.swap.max of a BestEffort and the two kinds of Burstable container, the
  # critical pod's, and a conformance subset (a container's exit status, a Burstable pod's QoS
  # cgroup).
  short) focus='Swap.*(Basic functionality.*QOS (Best-effort|Burstable)|critical pod)|Container Runtime blackbox test when starting a container that exits|Kubelet Cgroup Manager.*Burstable'
    skip="$SKIP_ALWAYS|\\[Disruptive\\]" timeout=2400 procs=1 ;;
  # Every swap spec with either swap behaviour, the container runtime blackbox specs, the
  # QoS cgroup specs and the Summary API specs: the set the runtimes are compared on.
  standard) focus='Swap|Container Runtime blackbox|Kubelet Cgroup Manager|Summary API'
    skip="$SKIP_ALWAYS|\\[Slow\\]|\\[Disruptive\\]" timeout=3600 procs=1 ;;
  # The conformance specs, the swap specs, and the memory QoS, pids limit, log rotation,
  # critical pod, image GC, eviction and restart specs that run on one node.
  long) focus='\[NodeConformance\]|Swap|MemoryQoS|PodPidsLimit|ContainerLogRotation|CriticalPod|ImageGarbageCollect|ImageGC|Eviction|Restart Kubelet|Container Restart'
    skip=$SKIP_ALWAYS timeout=28800 procs=4 ;;
  *) echo "FORM=short, standard or long" >&2; exit 2 ;;
esac
[ -z "${FOCUS:-}" ] || FORM=custom
case ${CRI_STATS:=true} in true) ;; false) FORM=$FORM-cri-stats-off ;; *) echo "CRI_STATS=true or false" >&2; exit 2 ;; esac
FOCUS=${FOCUS:-$focus}
SKIP=${SKIP:-$skip}
TIMEOUT=${TIMEOUT:-$timeout}
PROCS=${PROCS:-$procs}
case $PROCS in [1-9] | [1-9][0-9]) ;; *) echo "PROCS=1..99" >&2; exit 2 ;; esac
if [ -n "${SHARD:-}" ]; then
  [[ $SHARD =~ ^([1-9][0-9]*)/([1-9][0-9]*)$ ]] || { echo "SHARD=K/N" >&2; exit 2; }
  shard_k=${BASH_REMATCH[1]} shard_n=${BASH_REMATCH[2]}
  [ "$shard_k" -le "$shard_n" ] || { echo "SHARD=K/N with K <= N" >&2; exit 2; }
  FORM=${FORM%-cri-stats-off}-shard${shard_k}of${shard_n}
  [ "$CRI_STATS" = true ] || FORM=$FORM-cri-stats-off
fi

log() { echo "node-e2e: $(date +%T) $*" >&2; }
log "kubelet, e2e_node.test and agnhost of Kubernetes 1.37.2 (hack/tools.sh, cached)"
tools=$(hack/tools.sh /var/cache/swapcri-tools kubelet e2e_node.test agnhost)
kubelet=$(sed -n 1p <<<"$tools") e2e_node=$(sed -n 2p <<<"$tools") agnhost=$(sed -n 3p <<<"$tools")
if [ -n "${SHARD:-}" ]; then
  dry=$(mktemp -d)
  "$e2e_node" --ginkgo.dry-run --ginkgo.focus="$FOCUS" --ginkgo.skip="$SKIP" --ginkgo.no-color \
    --ginkgo.json-report="$dry/dry.json" >"$dry/dry.log" 2>&1 ||
    { tail -n 20 "$dry/dry.log" >&2; echo "node-e2e: the dry run of e2e_node.test failed" >&2; exit 1; }
  FOCUS=$(python3 hack/node-e2e-shard.py "$dry/dry.json" "$shard_k" "$shard_n")
  rm -rf "$dry"
fi
log "the suite's images in the local registry"
registry_up
if ! curl -sf "http://$REGISTRY_ADDR/v2/e2e-test-images/agnhost/tags/list" | grep -q '"2.66.1"'; then
  images_log=$(mktemp)
  AGNHOST=$agnhost hack/critest/images.sh >"$images_log" 2>&1 || { tail -n 20 "$images_log" >&2; exit 1; }
  rm -f "$images_log"
fi

dir=/var/tmp/swapcri-node-e2e/$RUNTIME-$DRIVER-$FORM
rm -rf "$dir"
mkdir -p "$dir"
chmod 0700 "$dir"
install -m 0755 "$kubelet" "$dir/kubelet"
install -m 0755 "$e2e_node" "$dir/e2e_node.test"
if [ "$RUNTIME" = containerd ]; then
  log "containerd 2.4.2 and its runc shim (hack/tools.sh, cached)"
  for tool in $(hack/tools.sh /var/cache/swapcri-tools containerd containerd-shim-runc-v2); do
    install -m 0755 "$tool" "$dir/"
  done
fi
echo "$RUNTIME" >"$dir/runtime"
echo "$DRIVER" >"$dir/driver"
echo "$CRI_STATS" >"$dir/cri_stats"
echo "$FOCUS" >"$dir/focus"
echo "$SKIP" >"$dir/skip"
echo "$TIMEOUT" >"$dir/timeout"
echo "$PROCS" >"$dir/procs"
if [ "$PROCS" -gt 1 ]; then
  install -m 0755 "$(hack/tools.sh /var/cache/swapcri-tools ginkgo)" "$dir/ginkgo"
fi
log "$RUNTIME, $DRIVER driver, form $FORM, $PROCS process(es): focus '${FOCUS:0:400}'"
status=0
NODE_E2E_DIR=$dir NODE_E2E_TIMEOUT=$TIMEOUT hack/vm/systemd-node.sh --node-e2e || status=$?
summary=$dir/report/summary.txt
if [ -f "$summary" ]; then
  read -r _ total _ passed _ failed _ skipped <<<"$(grep -m1 '^TOTAL' "$summary")"
  self=$(grep -m1 '^SELF-SKIPPED' "$summary" | cut -d' ' -f2)
  echo "node-e2e: $RUNTIME $DRIVER: $passed passed, $failed failed, $self skipped ($total specs, $((skipped - self)) not focused)"
  sed -n '/^FAILED:/,/^SKIPPED/p' "$summary" | sed '$d'
  # The Summary API's swap figures against the kernel's (hack/vm/summary-swap.sh).
  grep -h '^E2E-RESULT summary-swap' "$dir/report/summary-swap.txt" 2>/dev/null | sed 's/^E2E-RESULT /node-e2e: /' ||
    echo "node-e2e: $RUNTIME $DRIVER: the Summary API swap check left no result"
  log "reports in $dir/report (junit.xml, report.json, e2e_node.log, $RUNTIME.log, summary-swap*)"
else
  echo "node-e2e: $RUNTIME $DRIVER: no report came back (the node's console: /var/cache/swapcri-vm/systemd-node-console.log)"
  status=1
fi
exit $status
