#!/bin/sh
# kubelet's health while a pod thrashes, on the systemd node whose only swap is a file on its
# throttled root disk (the disk that also carries the node's own writes): a real kubelet
# (LimitedSwap) and API server (the node e2e binary's services mode), pods created through the
# API server. Arms: swapcri with [guard] action observe, throttle, kill; containerd 2.4.2. In
# each: a latency-sensitive neighbour (memtouch's disk probe: touches 16 MiB, rewrites and
# fsyncs a file every 200 ms), a pod kubelet probes over HTTP (liveness and readiness, 1 s
# timeout), then a Burstable thrasher whose working set is past its memory limit and inside
# its LimitedSwap share. Measured for SECONDS before and again once the thrash runs (for
# swapcri, once it reports the thrasher thrashing; for containerd, 30 s after its start): the
# node's Ready condition and its transitions, the node lease's renewal gaps,
# kubelet_pleg_relist_duration_seconds p50/p99 and "PLEG is not healthy" lines, the probed
# pod's probe failures and restarts, `kubectl exec` round trips into the neighbour, the
# neighbour's fsync p50/p99, the node's io and memory PSI, the node's
# swap-ins and the thrasher's anonymous refaults a second. Prints one
# `E2E-RESULT kubelet-thrash-<arm>-<check> PASS|FAIL` per check and an E2E-LOG table row per
# arm.
#   kubelet-thrash.sh          (files in /e2e/kubelet-thrash: arms, seconds)
T0=$(date +%s)
. /e2e/helpers.sh
IN=/e2e/kubelet-thrash
W=/var/lib/kubelet-thrash
NODE=swapcri-node
API=https://127.0.0.1:6443
SECONDS_SPAN=$(cat $IN/seconds 2>/dev/null || echo 60)
ARMS=$(cat $IN/arms 2>/dev/null || echo "observe throttle kill containerd")
CONF=/etc/swapcri/config.toml
C="swapcri --config $CONF"
KUBECTL="kubectl --kubeconfig $W/kubeconfig"
IMAGE=localhost/busybox:latest
TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
SVC="" KUBELET="" REGISTRY=""
mkdir -p $W && chmod 0700 $W

# py EXPRESSION-SCRIPT: python3 reading JSON on stdin.
py() { python3 -c "$1"; }

# The runtime of an arm, its socket in ENDPOINT and its systemd unit in UNIT.
start_runtime() { # ARM
  case $1 in
    containerd)
      ENDPOINT=unix:///run/containerd/containerd.sock UNIT=containerd
      systemctl stop swapcri.service
      install -m 0755 $IN/containerd $IN/containerd-shim-runc-v2 $IN/ctr /usr/local/bin/
      mkdir -p /etc/containerd
      cat >/etc/containerd/config.toml <<EOF
version = 3
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = 'registry.k8s.io/pause:3.10.2'
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = '/etc/containerd/certs.d'
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
    BinaryName = '/usr/local/bin/runc-new'
    SystemdCgroup = true
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ['/usr/lib/cni']
  conf_dir = '/etc/swapcri/cni-kubelet-thrash'
EOF
      mkdir -p /etc/containerd/certs.d/registry.k8s.io
      printf '[host."http://127.0.0.1:5000"]\n  capabilities = ["pull", "resolve"]\n' \
        >/etc/containerd/certs.d/registry.k8s.io/hosts.toml
      cat >/etc/systemd/system/containerd.service <<EOF
[Unit]
Description=containerd container runtime
[Service]
ExecStart=/usr/local/bin/containerd
Type=notify
Delegate=yes
KillMode=process
OOMScoreAdjust=-999
EOF
      systemctl daemon-reload
      systemctl restart containerd.service
      ctr -n k8s.io images import /images/busybox.tar >/dev/null 2>&1 ||
        note "kubelet-thrash: ctr could not import the test image"
      ;;
    *)
      ENDPOINT=unix:///run/swapcri/swapcri.sock UNIT=swapcri
      systemctl stop containerd.service 2>/dev/null
      {
        printf 'log_level = "info"\n[runtime]\ncgroup_driver = "systemd"\n'
        printf '[runtime.handlers.runc]\nbinary = "/usr/local/bin/runc-new"\n'
        printf '[network]\nconfig_dir = "/etc/swapcri/cni-kubelet-thrash"\n'
        printf '[registries."registry.k8s.io"]\nmirrors = ["127.0.0.1:5000"]\n'
        printf '[guard]\naction = "%s"\nkill_after_seconds = 10\nkill_interval_seconds = 60\n' "$1"
        # As an operator sets a swap node up (docs/swap-safety.md): the system daemons, kubelet
        # among them, keep out of swap and ahead on the disks that carry it.
        printf '[system]\ncgroup = "system.slice"\nswap_max = 0\nio_latency_target_us = 10000\nio_weight = 1000\n'
      } >$CONF
      systemctl restart swapcri.service
      $C image import /images/busybox.tar >/dev/null 2>&1 || note "kubelet-thrash: swapcri could not import the test image"
      ;;
  esac
}

start_kubelet() {
  kubelet_config systemd "$ENDPOINT" >$W/kubelet.yaml
  rm -rf $W/root
  $IN/kubelet --config $W/kubelet.yaml --kubeconfig $W/kubeconfig --hostname-override $NODE \
    --root-dir $W/root --runtime-cgroups "$(systemctl show -p ControlGroup --value $UNIT.service)" -v 2 \
    >$W/kubelet.log 2>&1 &
  KUBELET=$!
  i=0
  until [ "$(node_ready)" = True ]; do
    i=$((i + 1))
    [ $i -lt 300 ] || return 1
    sleep 1
  done
}

node_ready() {
  api GET /api/v1/nodes/$NODE 2>/dev/null | py '
import json, sys
try:
    node = json.load(sys.stdin)
except ValueError:
    sys.exit()
for c in node.get("status", {}).get("conditions", []):
    if c["type"] == "Ready":
        print(c["status"])'
}

# pod NAME REQUEST LIMIT COMMAND [PROBED]: a pod through the API server.
pod() {
  probes=""
  if [ -n "${5:-}" ]; then
    probe='{"httpGet":{"path":"/","port":8080},"timeoutSeconds":1,"periodSeconds":2,"failureThreshold":3}'
    probes=",\"livenessProbe\":$probe,\"readinessProbe\":$probe"
  fi
  body=$(printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","namespace":"default"},"spec":{"nodeName":"%s","terminationGracePeriodSeconds":1,"containers":[{"name":"%s","image":"%s","imagePullPolicy":"Never","command":["sh","-c","%s"],"resources":{"requests":{"memory":"%s"},"limits":{"memory":"%s"}}%s}]}}' \
    "$1" "$NODE" "$1" "$IMAGE" "$4" "$2" "$3" "$probes")
  i=0
  until api POST /api/v1/namespaces/default/pods "$body" | grep -q '"uid"'; do
    i=$((i + 1))
    [ $i -lt 60 ] || return 1
    sleep 2
  done
}
pod_running() { # NAME
  api GET /api/v1/namespaces/default/pods/$1 | py '
import json, sys
pod = json.load(sys.stdin)
print(pod.get("status", {}).get("phase", ""))' | grep -qx Running
}
restarts() { # NAME
  api GET /api/v1/namespaces/default/pods/$1 | py '
import json, sys
pod = json.load(sys.stdin)
print(sum(c.get("restartCount", 0) for c in pod.get("status", {}).get("containerStatuses", [])))'
}
# probe_failures NAME: the Unhealthy events of a pod so far.
probe_failures() {
  api GET "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name=$1,reason=Unhealthy" | py '
import json, sys
print(sum(e.get("count", 1) or 1 for e in json.load(sys.stdin).get("items", [])))'
}
# The PLEG relist histogram's cumulative buckets: "le=count ..." and "count".
pleg_buckets() {
  curl -sf http://127.0.0.1:10255/metrics | awk '
    /^kubelet_pleg_relist_duration_seconds_bucket/ { match($0, /le="[^"]*"/); printf "%s=%s ", substr($0, RSTART + 4, RLENGTH - 5), $2 }'
}
# quantiles BEFORE AFTER: p50/p99 (ms) of the observations between two bucket snapshots,
# the upper bound of the bucket each falls in.
quantiles() {
  python3 - "$1" "$2" <<'EOF'
import sys
def parse(s):
    out = {}
    for kv in s.split():
        k, v = kv.split("=")
        out[float("inf") if k == "+Inf" else float(k)] = float(v)
    return out
a, b = parse(sys.argv[1]), parse(sys.argv[2])
les = sorted(b)
n = b[les[-1]] - a.get(les[-1], 0) if les else 0
def q(p):
    if n <= 0:
        return "-"
    for le in les:
        if b[le] - a.get(le, 0) >= p * n:
            return "inf" if le == float("inf") else "%g" % (le * 1000)
    return "-"
print("%s/%s" % (q(0.5), q(0.99)))
EOF
}
# The lease's renewals seen while polling once a second: "max gap" in seconds afterwards.
watch_lease() { # SECONDS OUT
  end=$(($(date +%s) + $1))
  while [ "$(date +%s)" -lt "$end" ]; do
    api GET /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/$NODE | py '
import json, sys
try:
    print(json.load(sys.stdin)["spec"]["renewTime"])
except (ValueError, KeyError):
    pass'
    echo "ready $(node_ready)"
    sleep 1
  done >"$2"
}
lease_gap() { # FILE: the longest time between two renewals, seconds
  python3 - "$1" <<'EOF'
import sys, datetime
times = []
for line in open(sys.argv[1]):
    line = line.strip()
    if line and not line.startswith("ready"):
        t = datetime.datetime.fromisoformat(line.replace("Z", "+00:00"))
        if not times or t != times[-1]:
            times.append(t)
gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:])]
print("%.1f" % max(gaps) if gaps else "-")
EOF
}
not_ready_seen() { grep -c '^ready False\|^ready Unknown' "$1"; }
# exec_times SECONDS OUT: `kubectl exec` round trips into the neighbour, ms, every 2 s.
exec_times() {
  end=$(($(date +%s) + $1))
  while [ "$(date +%s)" -lt "$end" ]; do
    t0=$(date +%s%N)
    if timeout 30 $KUBECTL exec neighbour -- true >/dev/null 2>&1; then echo $((($(date +%s%N) - t0) / 1000000)); else echo 30000; fi
    sleep 2
  done >"$2"
}
p50_p99() { # FILE of numbers: "p50/p99"
  sort -n "$1" | awk '{ v[NR] = $1 } END { if (NR) printf "%d/%d", v[int((NR + 1) / 2)], v[int(NR * 0.99 + 0.99)]; else printf "-/-" }'
}
# fsync_times FROM TO: the neighbour's fsync figures (ms) between two epoch seconds.
fsync_times() {
  $KUBECTL logs neighbour 2>/dev/null | awk -v a=$(($1 * 1000)) -v b=$(($2 * 1000)) '$1 == "probe" && $2 >= a && $2 < b { print int($5 / 1000) }'
}
# The thrasher pod's uid as systemd spells it in the pod's slice name; empty before it exists.
thrasher_uid() {
  api GET /api/v1/namespaces/default/pods/thrasher | py '
import json, sys
try:
    print(json.load(sys.stdin)["metadata"]["uid"].replace("-", "_"))
except (ValueError, KeyError):
    pass'
}
# The thrasher pod's anonymous refaults (pages read back from swap) so far: its pod slice's
# memory.stat, which keeps the counts of containers the guard killed; 0 before it exists.
thrasher_refaults() {
  uid=$(thrasher_uid)
  f=/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$uid.slice/memory.stat
  if [ -n "$uid" ] && [ -f "$f" ]; then awk '$1 == "workingset_refault_anon" { print $2 }' "$f"; else echo 0; fi
}
pleg_unhealthy() { grep -c 'PLEG is not healthy' $W/kubelet.log; }
psi_total() { awk '$1 == "some" { sub("total=", "", $5); print $5 }' "/proc/pressure/$1"; }
vmstat() { awk -v k="$1" '$1 == k { print $2 }' /proc/vmstat; }

# measure LABEL: SECONDS_SPAN of every figure; prints "key=value ..." and keeps it in $W.
measure() {
  label=$1
  m0=$(date +%s) io0=$(psi_total io) mem0=$(psi_total memory) sw0=$(vmstat pswpin) b0=$(pleg_buckets)
  pf0=$(probe_failures probed) r0=$(restarts probed) th0=$(thrasher_refaults) pl0=$(pleg_unhealthy)
  watch_lease "$SECONDS_SPAN" $W/lease-$label &
  lease=$!
  exec_times "$SECONDS_SPAN" $W/exec-$label
  wait $lease
  m1=$(date +%s)
  span=$((m1 - m0))
  fsync_times "$m0" "$m1" >$W/fsync-$label
  echo "lease_gap_s=$(lease_gap $W/lease-$label) not_ready=$(not_ready_seen $W/lease-$label)" \
    "pleg_ms=$(quantiles "$b0" "$(pleg_buckets)")" \
    "pleg_unhealthy=$(($(pleg_unhealthy) - pl0))" \
    "probe_failures=$(($(probe_failures probed) - pf0)) restarts=$(($(restarts probed) - r0))" \
    "exec_ms=$(p50_p99 $W/exec-$label) fsync_ms=$(p50_p99 $W/fsync-$label)" \
    "io_some_pct=$((($(psi_total io) - io0) / (span * 10000)))" \
    "mem_some_pct=$((($(psi_total memory) - mem0) / (span * 10000)))" \
    "swapins_s=$((($(vmstat pswpin) - sw0) / span))" \
    "thrasher_refaults_s=$((($(thrasher_refaults) - th0) / span))"
}
# What an arm's pods, the guard and the node show, for the log.
show_state() { # ARM
  $KUBECTL get pods -o wide 2>&1 | sed 's/^/E2E-LOG pods: /'
  for p in neighbour probed thrasher; do
    echo "E2E-LOG $p: $($KUBECTL get pod $p -o jsonpath='{.status.containerStatuses[0].state} restarts={.status.containerStatuses[0].restartCount}' 2>&1 | cut -c1-300)"
    $KUBECTL logs --tail=2 $p 2>&1 | cut -c1-200 | sed "s/^/E2E-LOG $p log: /"
  done
  [ "$1" = containerd ] || $C top --once --interval 1 2>&1 | sed 's/^/E2E-LOG top: /'
  uid=$(thrasher_uid)
  for d in /sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$uid.slice/*/; do
    [ -n "$uid" ] && [ -f "$d/memory.max" ] || continue
    echo "E2E-LOG thrasher cgroup $(basename "$d"): max=$(cat $d/memory.max) high=$(cat $d/memory.high) swap.max=$(cat $d/memory.swap.max) current=$(cat $d/memory.current) swap.current=$(cat $d/memory.swap.current) events=[$(tr '\n' ' ' <$d/memory.events)]"
  done
  grep -m 2 'PLEG is not healthy' $W/kubelet.log | cut -c1-250 | sed 's/^/E2E-LOG kubelet: /'
  grep . /proc/pressure/io /proc/pressure/memory | sed 's/^/E2E-LOG /'
  echo "E2E-LOG $(grep -E '^pswp(in|out) ' /proc/vmstat | tr '\n' ' ')"
}
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# complete FIGURES: no figure missing ("-" where nothing was measured).
complete() { ! echo "$1" | tr ' ' '\n' | grep -q -e '=$' -e '=-' -e '/-$'; }
# p99 FIGURES KEY: the figure's p99 (or its only value), whole; empty when it was not measured.
p99() { v=$(field "$1" "$2"); v=${v#*/}; case $v in '' | *[!0-9.]* | .*) ;; *) echo "${v%.*}" ;; esac; }

finish_arm() {
  for p in thrasher neighbour probed; do api DELETE "/api/v1/namespaces/default/pods/$p?gracePeriodSeconds=0" >/dev/null 2>&1; done
  sleep 5
  [ -n "$KUBELET" ] && stop "$KUBELET"
  [ -n "$SVC" ] && stop "$SVC"
  KUBELET="" SVC=""
  crictl --runtime-endpoint "$ENDPOINT" rmp -af >/dev/null 2>&1
  systemctl stop "$UNIT.service"
  # kubelet leaves its pod and QoS slices; the next arm's kubelet makes its own.
  for s in $(systemctl list-units --plain --no-legend 'kubepods*' | awk '{ print $1 }'); do systemctl stop "$s" 2>/dev/null; done
}

# Host ports and the pods' bridge (iptables loads its modules on demand: not here).
modprobe -a nf_tables nft_compat nft_chain_nat nf_nat nf_conntrack xt_MASQUERADE xt_mark xt_comment \
  xt_multiport xt_conntrack xt_addrtype br_netfilter 2>&1 | sed 's/^/E2E-LOG modprobe: /'
# The API server advertises, and reaches kubelet at, the default route's interface: a dummy
# one (the node has no network; nothing sent there leaves it).
modprobe dummy
ip link add node0 type dummy && ip addr add 192.0.2.10/24 dev node0 && ip link set node0 up &&
  ip route add default via 192.0.2.1 dev node0 || note "kubelet-thrash: no default route: $(ip route 2>&1)"
docker-registry serve /e2e/registry.yml >/tmp/registry.log 2>&1 &
REGISTRY=$!
MEM=$(meminfo MemTotal) SWAP=$(meminfo SwapTotal)
note "kubelet-thrash: MemTotal $MEM, SwapTotal $SWAP (a file on the throttled root disk); arms: $ARMS; $SECONDS_SPAN s a measure"
# The thrasher: LimitedSwap gives it request / MemTotal x SwapTotal of swap; its working set
# is its limit plus half of that, touched round after round.
REQ=$((256 * MI)) LIM=$((320 * MI))
SHARE=$(($(echo "$REQ $MEM $SWAP" | awk '{ printf "%.0f", $1 / $2 * $3 }') / MI))
HOT=$((LIM / MI + SHARE / 2))
note "kubelet-thrash: thrasher request $REQ, limit $LIM, LimitedSwap share ${SHARE} MiB, working set $HOT MiB"
for arm in $ARMS; do
  note "kubelet-thrash $arm: starting"
  start_runtime "$arm"
  if ! api_server_up; then result "kubelet-thrash-$arm-setup" FAIL "the API server did not become healthy: $(tail -n 3 $W/services.log)"; finish_arm; continue; fi
  if ! start_kubelet; then result "kubelet-thrash-$arm-setup" FAIL "the node did not become Ready: $(tail -n 3 $W/kubelet.log | cut -c1-300)"; finish_arm; continue; fi
  pod neighbour 32Mi 64Mi "exec memtouch 16 disk" && pod probed 16Mi 32Mi "mkdir -p /www && echo ok >/www/index.html && exec httpd -f -p 8080 -h /www" probed
  i=0
  until pod_running neighbour && pod_running probed; do
    i=$((i + 1))
    if [ $i -ge 120 ]; then break; fi
    sleep 2
  done
  show_state "$arm"
  BEFORE=$(measure before-$arm)
  note "kubelet-thrash $arm before: $BEFORE"
  pod thrasher "$((REQ / MI))Mi" "$((LIM / MI))Mi" "exec memtouch $HOT hot"
  if [ "$arm" != containerd ]; then
    # Measured once the guard saw the thrash (and acted, with throttle or kill).
    thrash0=$(date +%s)
    until $C top --once --interval 1 2>/dev/null | grep -q thrashing; do
      [ $(($(date +%s) - thrash0)) -lt 180 ] || break
      sleep 1
    done
    note "kubelet-thrash $arm: thrashing seen $(($(date +%s) - thrash0)) s after the thrasher's pod was created"
  else
    sleep 30
  fi
  DURING=$(measure during-$arm)
  note "kubelet-thrash $arm during: $DURING"
  show_state "$arm"
  echo "E2E-LOG kubelet-thrash-table $arm | before: $BEFORE | during: $DURING"
  # Every arm: the figures were all taken, and the thrasher did thrash (pages read back from
  # swap while measured).
  check "kubelet-thrash-$arm-measured" 'complete "$BEFORE" && complete "$DURING" && [ "$(field "$DURING" thrasher_refaults_s)" -gt 0 ]' \
    "before: $BEFORE; during: $DURING"
  if [ "$arm" = throttle ] || [ "$arm" = kill ]; then
    check "kubelet-thrash-$arm-ready" '[ "$(field "$DURING" not_ready)" = 0 ]' "NotReady polls during the thrash: $(field "$DURING" not_ready)"
    check "kubelet-thrash-$arm-pleg" '[ "$(field "$DURING" pleg_unhealthy)" = 0 ]' "PLEG is not healthy lines: $(field "$DURING" pleg_unhealthy)"
    check "kubelet-thrash-$arm-probes" '[ "$(field "$DURING" probe_failures)" = 0 ] && [ "$(field "$DURING" restarts)" = 0 ]' \
      "probe failures $(field "$DURING" probe_failures), restarts $(field "$DURING" restarts)"
    for k in lease_gap_s exec_ms fsync_ms; do
      bv=$(p99 "$BEFORE" $k) dv=$(p99 "$DURING" $k)
      check "kubelet-thrash-$arm-$k" '[ -n "$bv" ] && [ -n "$dv" ] && [ "$dv" -le $((bv * 3 / 2 + 1)) ]' "$k before $(field "$BEFORE" $k), during $(field "$DURING" $k) (at most 1.5x)"
    done
  fi
  finish_arm
done
stop "$REGISTRY"
