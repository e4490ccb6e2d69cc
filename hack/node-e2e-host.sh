#!/usr/bin/env bash
# Kubernetes' node e2e suite on this host, natively (hack/node-e2e.sh PLACE=host): kubelet
# 1.37.2 with the cgroupfs driver, started by the suite as its own child process (as on a node
# without systemd: the suite's PATH here has no systemd-run), driving swapcri (or containerd
# 2.4.2) started here with private directories, beside whatever else runs on the host.
# Reads NODE_E2E_DIR as hack/vm/systemd-node.sh --node-e2e does (runtime, focus, skip,
# timeout, procs, the binaries) and leaves the reports in NODE_E2E_DIR/report.
#
# Both runtimes get the runtime handler the suite's RuntimeClass specs name, `test-handler`
# (runc, as the suite's own node setup configures it).
#
# What the suite needs of the host, checked first: no other kubelet, etcd or API server (its
# ports are fixed: 2379, 6443, 10248, 10250, 10255), /var/lib/kubelet unused. What kubelet
# changes on the host is put back afterwards: its kernel settings (kernel.panic and the
# others it sets), its cgroups (kubepods, kubelet), its root and log directories.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
require_root

IN=${NODE_E2E_DIR:?NODE_E2E_DIR: the run directory hack/node-e2e.sh prepares}
RUNTIME=$(cat "$IN/runtime")
REPORT=$IN/report
WORK=$IN/host
# Unix socket paths must stay short: the runtime's sockets live under /run.
RUN=/run/swapcri-node-e2e
KUBELET_ROOT=/var/lib/kubelet
log() { echo "node-e2e-host: $(date +%T) $*" >&2; }
fail() { echo "node-e2e-host: $*" >&2; exit 1; }

# What another cluster on this host would hold.
for p in kubelet kube-apiserver etcd; do
  ! pgrep -x "$p" >/dev/null || fail "a $p runs on this host already (pid $(pgrep -x "$p" | head -1)): the suite needs the node to itself"
done
for port in 2379 6443 10248 10250 10255; do
  listener=$(ss -Hltnp "sport = :$port")
  [ -z "$listener" ] || fail "port $port is in use (the suite's etcd, API server and kubelet need it): $listener"
done
if [ -e "$KUBELET_ROOT" ] && [ ! -e "$KUBELET_ROOT/.swapcri-node-e2e" ]; then
  fail "$KUBELET_ROOT exists and is not this script's: another kubelet's root directory"
fi
pre_existing_logs=()
for d in /var/log/pods /var/log/containers; do [ -e "$d" ] && pre_existing_logs+=("$d"); done

rm -rf "$WORK" "$REPORT" "$RUN"
mkdir -p "$WORK/bin" "$REPORT" "$RUN" "$KUBELET_ROOT"
chmod 0700 "$WORK" "$RUN"
touch "$KUBELET_ROOT/.swapcri-node-e2e"

# kubelet's kernel settings (it sets these when it starts): put back as they were.
SYSCTLS="kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom kernel.keys.root_maxkeys kernel.keys.root_maxbytes"
sysctl -e $SYSCTLS >"$WORK/sysctl.before" 2>/dev/null || true

# The suite starts kubelet through systemd-run when it finds one; this host's init is not
# systemd, so its PATH leaves that one tool out.
IFS=: read -ra dirs <<<"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
for d in "${dirs[@]}"; do
  for f in "$d"/*; do
    b=${f##*/}
    [ "$b" != systemd-run ] && [ -x "$f" ] && [ ! -e "$WORK/bin/$b" ] && ln -s "$f" "$WORK/bin/$b"
  done
done

bridge=swapcri-e2e0
subnet=$(free_subnet)
mkdir -p "$WORK/cni"
ip link del "$bridge" 2>/dev/null || true
write_bridge_conflist "$WORK/cni/10-node-e2e.conflist" node-e2e "$bridge" "$subnet"
runc=$(newer_runc)

suite_pid=
runtime_pid=
progress=
cleanup() {
  set +e
  trap - ERR # what is already gone is no failure here
  [ -n "$progress" ] && kill "$progress" 2>/dev/null
  log "cleaning up: the suite, kubelet, pods, $RUNTIME, mounts, cgroups, kernel settings"
  [ -n "$suite_pid" ] && kill -TERM -- "-$suite_pid" 2>/dev/null
  pkill -TERM -f "^$IN/kubelet " 2>/dev/null
  sleep 2
  pkill -KILL -f "^$IN/kubelet " 2>/dev/null
  [ -n "$suite_pid" ] && kill -KILL -- "-$suite_pid" 2>/dev/null
  if [ -n "$runtime_pid" ]; then
    crictl --runtime-endpoint "unix://$ENDPOINT" --timeout 60s rmp --all --force >/dev/null 2>&1
    kill -TERM "$runtime_pid" 2>/dev/null
    wait "$runtime_pid" 2>/dev/null
  fi
  # The containerd shims outlive their daemon.
  pkill -TERM -f "containerd-shim-runc-v2 -namespace k8s.io -address $RUN/" 2>/dev/null
  grep -o " $KUBELET_ROOT[^ ]*" /proc/self/mounts | sort -r | while read -r m; do umount -l "$m"; done
  grep -o " $WORK[^ ]*\| $RUN[^ ]*" /proc/self/mounts | sort -r | while read -r m; do umount -l "$m"; done
  rm -rf "$KUBELET_ROOT" "$RUN"
  for d in /var/log/pods /var/log/containers; do
    [[ " ${pre_existing_logs[*]} " == *" $d "* ]] || rm -rf "$d"
  done
  for h in /sys/fs/cgroup /sys/fs/cgroup/*; do
    for c in kubepods kubelet; do
      [ -d "$h/$c" ] && find "$h/$c" -depth -type d -exec rmdir {} + 2>/dev/null
    done
  done
  while read -r key _ value; do sysctl -q -w "$key=$value" >/dev/null; done <"$WORK/sysctl.before"
  ip link del "$bridge" 2>/dev/null
  return 0
}
trap cleanup EXIT
trap "exit 143" TERM INT HUP

registry_mirrors() {
  for r in $MIRRORED_REGISTRIES; do
    printf '[registries."%s"]\nmirrors = ["%s"]\n' "$r" "$REGISTRY_ADDR"
  done
}
if [ "$RUNTIME" = containerd ]; then
  ENDPOINT=$RUN/containerd.sock
  mkdir -p "$WORK/containerd/certs.d"
  for r in $MIRRORED_REGISTRIES; do
    mkdir -p "$WORK/containerd/certs.d/$r"
    printf '[host."http://%s"]\n  capabilities = ["pull", "resolve"]\n' "$REGISTRY_ADDR" >"$WORK/containerd/certs.d/$r/hosts.toml"
  done
  # CAP_SYS_RESOURCE is bit 24 of the effective set.
  restrict=true
  (( 0x$(awk '/^CapEff:/ {print $2}' /proc/self/status) & (1 << 24) )) && restrict=false
  # As containerd's documentation sets it up for kubelet, in directories of its own.
  cat >"$WORK/containerd/config.toml" <<EOF
version = 3
root = '$WORK/containerd/root'
state = '$RUN/containerd'
[grpc]
  address = '$ENDPOINT'
[ttrpc]
  address = '$RUN/containerd-ttrpc.sock'
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = 'registry.k8s.io/pause:3.10.2'
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = '$WORK/containerd/certs.d'
[plugins.'io.containerd.cri.v1.runtime']
  # As containerd's documentation says for a node where it lacks CAP_SYS_RESOURCE (this
  # host): oom_score_adj below its own is raised to it, as swapcri does, instead of runc
  # failing every Guaranteed and critical container.
  restrict_oom_score_adj = $restrict
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
    BinaryName = '$runc'
    SystemdCgroup = false
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.test-handler]
  runtime_type = 'io.containerd.runc.v2'
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.test-handler.options]
    BinaryName = '$runc'
    SystemdCgroup = false
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ['/usr/lib/cni']
  conf_dir = '$WORK/cni'
EOF
  PATH=$IN:$PATH setsid "$IN/containerd" --config "$WORK/containerd/config.toml" >"$REPORT/containerd.log" 2>&1 </dev/null &
  runtime_pid=$!
else
  ENDPOINT=$RUN/swapcri.sock
  {
    printf 'socket = "%s"\nstate_root = "%s"\nrun_root = "%s"\nlog_level = "info"\n' "$ENDPOINT" "$WORK/swapcri/state" "$RUN/swapcri"
    printf '[runtime]\ncgroup_driver = "cgroupfs"\n'
    for handler in runc test-handler; do printf '[runtime.handlers.%s]\nbinary = "%s"\n' "$handler" "$runc"; done
    printf '[network]\nconfig_dir = "%s"\n' "$WORK/cni"
    registry_mirrors
  } >"$WORK/swapcri.toml"
  setsid target/release/swapcri --config "$WORK/swapcri.toml" >"$REPORT/swapcri.log" 2>&1 </dev/null &
  runtime_pid=$!
fi
export PATH=/var/cache/swapcri-tools:$PATH
for _ in $(seq 120); do
  crictl --runtime-endpoint "unix://$ENDPOINT" --image-endpoint "unix://$ENDPOINT" version >/dev/null 2>&1 && break
  kill -0 "$runtime_pid" 2>/dev/null || { tail -n 20 "$REPORT/$RUNTIME.log" >&2; fail "$RUNTIME exited at start"; }
  sleep 0.5
done
crictl --runtime-endpoint "unix://$ENDPOINT" --image-endpoint "unix://$ENDPOINT" \
  pull registry.k8s.io/e2e-test-images/busybox:1.37.0-2 >/dev/null ||
  fail "$RUNTIME did not pull through the local registry ($REGISTRY_ADDR): crictl pull failed"

# kubelet's base configuration, the VM's (hack/vm/node-e2e-node.sh) with what this host calls
# for: the cgroupfs driver, cgroup v1 allowed (kubelet 1.35+ refuses it unless told), and hard
# eviction at absolute free space (the default 10 % and 15 % of a large, mostly used shared
# disk would put the node under disk pressure from the start).
cat >"$WORK/kubelet-base.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
memorySwap:
  swapBehavior: NoSwap
evictionHard:
  memory.available: 100Mi
  nodefs.available: 2Gi
  imagefs.available: 2Gi
  nodefs.inodesFree: 5%
  imagefs.inodesFree: 5%
featureGates:
  PodAndContainerStatsFromCRI: $(cat "$IN/cri_stats")
EOF
# The feature gate goes to the suite too: it gives kubelet its gates, and specs skip or adapt
# by the suite's own view of them (/metrics/cadvisor's figures come from the runtime with it).
set -- --container-runtime-endpoint "unix://$ENDPOINT" --image-service-endpoint "unix://$ENDPOINT" \
  --kubelet-config-file "$WORK/kubelet-base.yaml" --prepull-images=false \
  --feature-gates "PodAndContainerStatsFromCRI=$(cat "$IN/cri_stats")" \
  "--kubelet-flags=--runtime-cgroups=/ --system-cgroups=" \
  --node-name swapcri-host --report-dir "$REPORT"
timeout=$(cat "$IN/timeout") procs=$(cat "$IN/procs")
log "$RUNTIME on the host, $procs process(es); focus: $(cut -c1-300 "$IN/focus")"
t0=$(date +%s)
(while sleep 600; do
  log "$(($(date +%s) - t0)) s, $(grep -o '•' "$REPORT/e2e_node.log" 2>/dev/null | wc -l) specs done"
done) &
progress=$!
cd "$WORK"
status=0
if [ "$procs" -gt 1 ]; then
  PATH=$WORK/bin setsid timeout --kill-after=60 "$timeout" "$IN/ginkgo" --procs "$procs" \
    --focus "$(cat "$IN/focus")" --skip "$(cat "$IN/skip")" --no-color \
    --timeout "$((timeout - 120))s" --output-dir "$REPORT" --junit-report junit.xml --json-report report.json \
    "$IN/e2e_node.test" -- "$@" >"$REPORT/e2e_node.log" 2>&1 </dev/null &
else
  PATH=$WORK/bin setsid timeout --kill-after=60 "$timeout" "$IN/e2e_node.test" "$@" \
    --ginkgo.focus "$(cat "$IN/focus")" --ginkgo.skip "$(cat "$IN/skip")" --ginkgo.no-color \
    --ginkgo.timeout "$((timeout - 120))s" \
    --ginkgo.junit-report "$REPORT/junit.xml" --ginkgo.json-report "$REPORT/report.json" \
    >"$REPORT/e2e_node.log" 2>&1 </dev/null &
fi
suite_pid=$!
wait "$suite_pid" || status=$?
suite_pid=
kill "$progress" 2>/dev/null
took=$(($(date +%s) - t0))
cd - >/dev/null
python3 hack/critest/summary.py "$REPORT/report.json" "$status" "$took" >"$REPORT/summary.txt"
log "the suite exited $status after $took s"
