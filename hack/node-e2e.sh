#!/usr/bin/env bash
# Kubernetes' node e2e suite (test/e2e_node of 1.37.2) with a real kubelet of 1.37.2 driving
# swapcri, on the systemd VM node (hack/vm/systemd-node.sh: kernel 6.12, cgroup v2, swap on).
# kubelet, e2e_node.test and agnhost are built from hack/k8s's pinned module (hack/tools.sh,
# cached); the images the specs pull are stand-ins built here (hack/critest/images.sh with
# AGNHOST), served by the node's own registry under their real names.
#   sudo hack/node-e2e.sh                  DRIVER=systemd|cgroupfs (default systemd; the long
#                                          form's VM part: cgroupfs)
#   RUNTIME=swapcri|containerd             the runtime kubelet drives (default swapcri;
#                                          containerd 2.4.2 from hack/containerd, for comparison)
#   FORM=short|standard|long               what runs (default short; see docs/testing.md)
#   PLACE=vm|host                          where: the systemd VM node (default), or this host
#                                          natively (hack/node-e2e-host.sh; cgroupfs driver)
#   SHARD=K/N                              only the K-th of N round-robin parts of the form's
#                                          specs (hack/node-e2e-shard.py); in the long form,
#                                          of the PLACE's part (host: every spec but [Serial]
#                                          and VM_ONLY ones; vm: those)
#   FORM=long without SHARD                every shard of both places (of PLACE's alone when
#                                          set) that has no report yet for this e2e_node.test:
#                                          HOST_SHARDS (default 1) and VM_SHARDS (default 8);
#                                          prints which are done and the totals so far
#   PROCS=N                                ginkgo processes (default 1; long form 4 in the VM,
#                                          16 on the host): specs run N at a time, [Serial]
#                                          ones alone at the end
#   FOCUS=REGEX SKIP=REGEX TIMEOUT=SECONDS  instead of the form's
#   CRI_STATS=true|false                   kubelet's PodAndContainerStatsFromCRI (default true)
# Prints `node-e2e: <runtime> <driver>: N passed, N failed, N skipped`; the JUnit and JSON
# reports, the suite's log and swapcri's journal stay in
# /var/tmp/swapcri-node-e2e/<runtime>-<driver>-<form>/report (form `custom` with FOCUS,
# `<form>-shardKofN` with SHARD, `long-<place>-shardKofN` in the long form).
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
require_root
install_packages
ensure_cargo

RUNTIME=${RUNTIME:-swapcri}
FORM=${FORM:-short}
PLACE_SET=${PLACE:-}
PLACE=${PLACE:-vm}
case $PLACE in
  # The long form's VM part runs the cgroupfs driver: the suite's MemoryQoS specs find a
  # container's own cgroup under the systemd driver by containerd's and CRI-O's scope names
  # only (docs/testing.md), so with systemd they could not compare other runtimes.
  vm) DRIVER=${DRIVER:-$([ "$FORM" = long ] && echo cgroupfs || echo systemd)} ;;
  # This host's init is not systemd: kubelet and the runtime use cgroupfs.
  host) [ "${DRIVER:-cgroupfs}" = cgroupfs ] || { echo "PLACE=host runs the cgroupfs driver only" >&2; exit 2; }
    DRIVER=cgroupfs ;;
  *) echo "PLACE=vm or host" >&2; exit 2 ;;
esac
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
    skip=$SKIP_ALWAYS timeout=28800 procs=4
    # On the host the specs mostly wait (for kubelet's sync, probes, back-off, grace
    # periods): 16 at a time keep its 2 cores below half busy.
    [ "$PLACE" = vm ] || { timeout=7200 procs=16; } ;;
  *) echo "FORM=short, standard or long" >&2; exit 2 ;;
esac
[ -z "${FOCUS:-}" ] || FORM=custom
case ${CRI_STATS:=true} in true) ;; false) FORM=$FORM-cri-stats-off ;; *) echo "CRI_STATS=true or false" >&2; exit 2 ;; esac
FOCUS=${FOCUS:-$focus}
SKIP=${SKIP:-$skip}
TIMEOUT=${TIMEOUT:-$timeout}
PROCS_SET=${PROCS:-}
PROCS=${PROCS:-$procs}
case $PROCS in [1-9] | [1-9][0-9]) ;; *) echo "PROCS=1..99" >&2; exit 2 ;; esac
# The long form's specs the host cannot run although they are not [Serial], with the reason;
# they run in the VM's part. A Guaranteed container's oom_score_adj is -997, which a runtime
# without CAP_SYS_RESOURCE (root on this host) cannot give: the pod-level resize specs of
# Guaranteed pods check it after the containers they restart. The Summary API's resource
# usage spec wants PSI figures for every container and kubelet's own, which cgroup v1 has not.
VM_ONLY=${VM_ONLY-'PLR Pod InPlace Resize.*(PLR guaranteed qos|pod-level guaranteed pods)|Summary API when querying /stats/summary should report resource usage through the stats api'}
log() { echo "node-e2e: $(date +%T) $*" >&2; }
log "kubelet, e2e_node.test and agnhost of Kubernetes 1.37.2 (hack/tools.sh, cached)"
tools=$(hack/tools.sh /var/cache/swapcri-tools kubelet e2e_node.test agnhost)
kubelet=$(sed -n 1p <<<"$tools") e2e_node=$(sed -n 2p <<<"$tools") agnhost=$(sed -n 3p <<<"$tools")
# What a long form's shard report holds: the suite's binary and images, how the node is set
# up, the form's selection and how it is cut into shards (read for the long form only: the
# suite's binary is large).
selection=
[ "${FORM%-cri-stats-off}" != long ] ||
  selection=$(cat "$e2e_node" hack/node-e2e-host.sh hack/vm/node-e2e-node.sh hack/node-e2e-shard.py |
    printf '%s\n' "$(sha256sum)" "$(test_images_stamp)" "$FOCUS" "$SKIP" "$VM_ONLY" | sha256sum | cut -c1-16)
long_place=
if [ -n "${SHARD:-}" ]; then
  [[ $SHARD =~ ^([1-9][0-9]*)/([1-9][0-9]*)$ ]] || { echo "SHARD=K/N" >&2; exit 2; }
  shard_k=${BASH_REMATCH[1]} shard_n=${BASH_REMATCH[2]}
  [ "$shard_k" -le "$shard_n" ] || { echo "SHARD=K/N with K <= N" >&2; exit 2; }
  base=${FORM%-cri-stats-off}
  [ "$base" != long ] || { long_place=$PLACE; base=long-$PLACE; }
  FORM=$base-shard${shard_k}of${shard_n}
  [ "$CRI_STATS" = true ] || FORM=$FORM-cri-stats-off
elif [ "${FORM%-cri-stats-off}" = long ]; then
  # The whole long form, resumable: each shard of each place in turn, but those whose report
  # is there for this e2e_node.test and selection; stops at a shard that leaves none.
  status=0
  for place in ${PLACE_SET:-host vm}; do
    # One host shard: its wall time is its slowest spec's (the back-off cap spec waits 35
    # minutes) more than the sum of the rest over 16 processes.
    if [ "$place" = host ]; then n=${HOST_SHARDS:-1} driver=cgroupfs; else n=${VM_SHARDS:-8} driver=$DRIVER; fi
    for k in $(seq "$n"); do
      dir=/var/tmp/swapcri-node-e2e/$RUNTIME-$driver-long-$place-shard${k}of$n
      [ "$CRI_STATS" = true ] || dir=$dir-cri-stats-off
      if [ -f "$dir/report/summary.txt" ] && [ "$(cat "$dir/selection" 2>/dev/null)" = "$selection" ]; then
        log "$place shard $k/$n done: $(grep -m1 '^TOTAL' "$dir/report/summary.txt") ($(grep -m1 -o 'wall=[0-9]*s' "$dir/report/summary.txt"))"
        continue
      fi
      log "$place shard $k/$n: running"
      env RUNTIME="$RUNTIME" DRIVER="$driver" PLACE="$place" SHARD="$k/$n" FORM=long CRI_STATS="$CRI_STATS" \
        FOCUS= SKIP="$SKIP" VM_ONLY="$VM_ONLY" PROCS="${PROCS_SET:-}" "$0" || status=1
      [ -f "$dir/report/summary.txt" ] || { log "$place shard $k/$n left no report: stopping here"; exit 1; }
    done
  done
  python3 hack/node-e2e-table.py --totals /var/tmp/swapcri-node-e2e "$RUNTIME" >&2
  exit $status
fi
if [ -n "${SHARD:-}" ]; then
  dry=$(mktemp -d)
  "$e2e_node" --ginkgo.dry-run --ginkgo.focus="$FOCUS" --ginkgo.skip="$SKIP" --ginkgo.no-color \
    --ginkgo.json-report="$dry/dry.json" >"$dry/dry.log" 2>&1 ||
    { tail -n 20 "$dry/dry.log" >&2; echo "node-e2e: the dry run of e2e_node.test failed" >&2; exit 1; }
  # The module cache hack/tools.sh built the suite from holds its source.
  FOCUS=$(python3 hack/node-e2e-shard.py "$dry/dry.json" "$shard_k" "$shard_n" \
    --source-root /var/cache/swapcri-tools/gopath/pkg/mod ${long_place:+--place "$long_place" --vm-only "$VM_ONLY"})
  rm -rf "$dry"
fi
log "the suite's images in the local registry"
registry_up
if ! test_images_current agnhost; then
  images_log=$(mktemp)
  k8s=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' hack/k8s/go.mod)
  AGNHOST=$agnhost AGNHOST_SRC=/var/cache/swapcri-tools/gopath/pkg/mod/k8s.io/kubernetes@$k8s/test/images/agnhost \
    hack/critest/images.sh >"$images_log" 2>&1 || { tail -n 20 "$images_log" >&2; exit 1; }
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
# Which swapcri a report is of (the long form's shards run over days of commits).
git rev-parse --short HEAD >"$dir/swapcri-commit" 2>/dev/null || true
echo "$DRIVER" >"$dir/driver"
echo "$CRI_STATS" >"$dir/cri_stats"
echo "$FOCUS" >"$dir/focus"
echo "$SKIP" >"$dir/skip"
echo "$TIMEOUT" >"$dir/timeout"
echo "$PROCS" >"$dir/procs"
[ -z "$selection" ] || echo "$selection" >"$dir/selection"
# The Summary API's swap check once per short, standard or custom run, not per long-form shard.
summary_swap=true
[ -z "$long_place" ] || summary_swap=false
echo "$summary_swap" >"$dir/summary_swap"
if [ "$PROCS" -gt 1 ]; then
  install -m 0755 "$(hack/tools.sh /var/cache/swapcri-tools ginkgo)" "$dir/ginkgo"
fi
log "$RUNTIME, $DRIVER driver, on the $PLACE, form $FORM, $PROCS process(es): focus '${FOCUS:0:400}'"
status=0
if [ "$PLACE" = host ]; then
  [ "$RUNTIME" = containerd ] || { log "swapcri (cargo build --release)"; cargo build --release --quiet; }
  NODE_E2E_DIR=$dir hack/node-e2e-host.sh || status=$?
else
  NODE_E2E_DIR=$dir NODE_E2E_TIMEOUT=$TIMEOUT hack/vm/systemd-node.sh --node-e2e || status=$?
fi
summary=$dir/report/summary.txt
# The binaries were the run's own copies; the report is what stays (they are large).
rm -f "$dir/kubelet" "$dir/e2e_node.test" "$dir/ginkgo" "$dir/containerd" "$dir/containerd-shim-runc-v2"
if [ -f "$summary" ]; then
  read -r _ total _ passed _ failed _ skipped <<<"$(grep -m1 '^TOTAL' "$summary")"
  self=$(grep -m1 '^SELF-SKIPPED' "$summary" | cut -d' ' -f2)
  echo "node-e2e: $RUNTIME $DRIVER: $passed passed, $failed failed, $self skipped ($total specs, $((skipped - self)) not focused)"
  sed -n '/^FAILED:/,/^SKIPPED/p' "$summary" | sed '$d'
  # The Summary API's swap figures against the kernel's (hack/vm/summary-swap.sh, in the VM).
  [ "$PLACE" = host ] || [ "$summary_swap" = false ] ||
    grep -h '^E2E-RESULT summary-swap' "$dir/report/summary-swap.txt" 2>/dev/null | sed 's/^E2E-RESULT /node-e2e: /' ||
    echo "node-e2e: $RUNTIME $DRIVER: the Summary API swap check left no result"
  log "reports in $dir/report (junit.xml, report.json, e2e_node.log, $RUNTIME.log, summary-swap*)"
else
  where=$([ "$PLACE" = host ] && echo "hack/node-e2e-host.sh's messages above" || echo "the node's console: /var/cache/swapcri-vm/systemd-node-console.log")
  echo "node-e2e: $RUNTIME $DRIVER: no report came back ($where)"
  status=1
fi
exit $status
