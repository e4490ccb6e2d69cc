#!/bin/bash
# In the kind VM (hack/vm/systemd-node.sh --kind): Docker's engine on cgroup v2 with swap,
# kind and kubectl; creates a kind cluster from the node image that hack/kind-cluster.sh
# loaded, checks it and deletes it. Reads /e2e/kind/{runtime,form,image}; prints one
# `E2E-RESULT kind-<check> PASS|FAIL <details>` line per check, `E2E-FIGURE kind-<name> <text>`
# per measured figure (no verdict), and E2E-LOG progress lines.
#   runtime  swapcri | containerd   (containerd: the stand-in kindest/node as it is)
#   form     short (one control-plane node, a pod Running) | long (every check, two nodes)
# Every wait is bounded and says what it waited for.
set -u
dir=/e2e/kind
RUNTIME=$(cat $dir/runtime) FORM=$(cat $dir/form) IMAGE=$(cat $dir/image)
T0=$(date +%s)
export KUBECONFIG=/root/.kube/config PATH=/usr/local/bin:$PATH
note() { echo "E2E-LOG kind +$(($(date +%s) - T0))s $*"; }
result() { echo "E2E-RESULT kind-$1 $2 $3"; }
figure() { echo "E2E-FIGURE kind-$1 $2"; }
check() { # check NAME CONDITION DETAILS
  if eval "$2"; then result "$1" PASS "$3"; else result "$1" FAIL "$3"; fi
}
# wait_for SECONDS WHAT COMMAND…: runs COMMAND every 2 s until it succeeds; fails naming WHAT.
wait_for() {
  local limit=$1 what=$2 start=$SECONDS
  shift 2
  until "$@" >/dev/null 2>&1; do
    if [ $((SECONDS - start)) -ge "$limit" ]; then note "gave up after ${limit}s waiting for $what"; return 1; fi
    sleep 2
  done
  note "$what after $((SECONDS - start))s"
}
k() { kubectl --request-timeout=60s "$@"; }
CP=kind-control-plane WORKER=kind-worker
[ "$FORM" = short ] && WORKER=$CP
node_sh() { docker exec "$1" sh -c "$2"; }

note "starting Docker's engine"
systemctl start docker.service
wait_for 300 "dockerd answering" docker info || { result docker-engine FAIL "$(systemctl status docker --no-pager | tail -n 5)"; exit 0; }
note "docker $(docker version --format '{{.Server.Version}}'), cgroup $(docker info --format '{{.CgroupVersion}}')"
for archive in "$dir"/images/*.tar; do
  docker load -i "$archive" >/dev/null || { result image-load FAIL "docker load $archive failed"; exit 0; }
done
note "node images loaded: $(docker images --format '{{.Repository}}:{{.Tag}}' | tr '\n' ' ')"

# --- the cluster --------------------------------------------------------------------------
t_create=$SECONDS
kind create cluster --image "$IMAGE" --config "$dir/cluster.yaml" --retain >"$dir/create.log" 2>&1
created=$?
note "kind create cluster exited $created after $((SECONDS - t_create))s"
if [ "$created" != 0 ]; then
  result create-cluster FAIL "kind create cluster exited $created: $(tail -n 3 "$dir/create.log" | tr '\n' ' ')"
  tail -n 40 "$dir/create.log" | sed 's/^/E2E-LOG create: /'
  for n in $(kind get nodes 2>/dev/null); do
    docker exec "$n" journalctl --no-pager -n 40 -o cat -u kubelet 2>/dev/null | sed "s/^/E2E-LOG $n kubelet: /"
    docker exec "$n" journalctl --no-pager -n 30 -o cat -u swapcri 2>/dev/null | sed "s/^/E2E-LOG $n swapcri: /"
  done
  kind delete cluster >/dev/null 2>&1
  exit 0
fi
result create-cluster PASS "kind create cluster: $((SECONDS - t_create))s"
nodes_ready() { [ "$(k get nodes --no-headers | awk '$2 == "Ready"' | wc -l)" = "$(k get nodes --no-headers | wc -l)" ]; }
wait_for 1200 "every node Ready" nodes_ready
READY=$(k get nodes -o wide --no-headers)
check nodes-ready 'nodes_ready' "$(echo "$READY" | awk '{print $1, $2, $NF}' | tr '\n' ';') $((SECONDS - t_create))s from kind create"
figure time-to-ready "$((SECONDS - t_create)) s from kind create to every node Ready"
want_runtime=containerd://
[ "$RUNTIME" = swapcri ] && want_runtime=swapcri://
check node-runtime '[ "$(echo "$READY" | grep -c " $want_runtime")" = "$(echo "$READY" | wc -l)" ]' \
  "$(echo "$READY" | awk '{print $1, $NF}' | tr '\n' ';')"
system_running() { ! k -n kube-system get pods --no-headers | grep -v ' Running ' | grep -q .; }
wait_for 900 "every kube-system pod Running" system_running
check system-pods 'system_running' "$(k -n kube-system get pods --no-headers | awk '{print $1, $3}' | tr '\n' ';')"

# The images kind preloads (kubeadm's list, less its pause) are in every node's runtime.
for n in $(kind get nodes); do
  want=$(node_sh "$n" "kubeadm config images list --kubernetes-version \$(cat /kind/version) 2>/dev/null | grep -v pause" | sort)
  have=$(node_sh "$n" "crictl images -o json" | python3 -c 'import json,sys; print("\n".join(t for i in json.load(sys.stdin)["images"] for t in i.get("repoTags") or []))' | sort)
  missing=$(comm -23 <(echo "$want") <(echo "$have") | tr '\n' ' ')
  check "preloaded-$n" '[ -n "$want" ] && [ -z "$missing" ]' "$(echo "$want" | wc -l) images kubeadm lists${missing:+; missing: $missing}"
done

# The test image: busybox with memtouch, loaded into every node as `kind load` would.
for n in $(kind get nodes); do
  if [ "$RUNTIME" = swapcri ]; then
    /e2e/kind-load.sh "$n" "$dir/busybox.tar" >"$dir/load.log" 2>&1 || note "kind-load into $n failed: $(tail -n 3 "$dir/load.log" | tr '\n' ' ')"
  else
    kind load image-archive "$dir/busybox.tar" --nodes "$n" >"$dir/load.log" 2>&1 || note "kind load into $n failed: $(tail -n 3 "$dir/load.log" | tr '\n' ' ')"
  fi
done
pod() { # pod NAME NODE RESOURCES-JSON [COMMAND]: a pod of the test image, not pulled
  k apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$1", "labels": {"app": "$1"}},
 "spec": {"nodeName": "$2", "terminationGracePeriodSeconds": 1, "containers": [{"name": "c",
   "image": "localhost/busybox:latest", "imagePullPolicy": "Never",
   "command": ${4:-["sh", "-c", "echo started; exec sleep 100000"]}, "resources": $3}]}}
EOF
}
running() { [ "$(k get pod "$1" -o jsonpath='{.status.phase}')" = Running ]; }
pod loaded "$WORKER" '{}'
wait_for 300 "the loaded image's pod Running" running loaded
check loaded-image-runs 'running loaded' "localhost/busybox:latest loaded into the nodes, pod with imagePullPolicy Never: $(k get pod loaded -o jsonpath='{.status.phase}')"
if [ "$FORM" = short ]; then
  kind delete cluster >/dev/null 2>&1
  exit 0
fi

# --- workloads through DNS and kube-proxy -------------------------------------------------
k apply -f - >/dev/null <<'EOF'
{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
 "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
  "template": {"metadata": {"labels": {"app": "web"}},
   "spec": {"tolerations": [{"operator": "Exists"}], "terminationGracePeriodSeconds": 1,
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
      "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}],
    "containers": [{"name": "web", "image": "localhost/busybox:latest", "imagePullPolicy": "Never",
     "command": ["sh", "-c", "mkdir -p /www && hostname >/www/index.html && exec httpd -f -p 8080 -h /www"]}]}}}}
EOF
k expose deployment web --port 80 --target-port 8080 >/dev/null
web_ready() { [ "$(k get deployment web -o jsonpath='{.status.readyReplicas}')" = 4 ]; }
wait_for 600 "4 web replicas ready" web_ready
SPREAD=$(k get pods -l app=web -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort | uniq -c | awk '{print $2 "=" $1}' | tr '\n' ' ')
check deployment-spread 'web_ready && [ "$(echo "$SPREAD" | wc -w)" = 2 ]' "4 replicas: $SPREAD"
pod client "$CP" '{}'
wait_for 300 "the client pod Running" running client
# Every replica answers by name through the Service: DNS (CoreDNS) and kube-proxy's rules.
seen=""
for _ in $(seq 1 24); do
  seen="$seen $(k exec client -- timeout 5 wget -q -O - http://web.default.svc.cluster.local/ 2>/dev/null)"
done
distinct=$(echo "$seen" | tr ' ' '\n' | grep . | sort -u | wc -l)
check service-by-name '[ "$distinct" -ge 2 ]' "24 requests to web.default.svc.cluster.local from another pod answered by $distinct replicas: $(echo "$seen" | tr ' ' '\n' | grep . | sort | uniq -c | tr '\n' ' ')"
if [ "$distinct" -lt 2 ]; then # which step failed: the name, the Service's address or the pod network
  svc_ip=$(k get service web -o jsonpath='{.spec.clusterIP}')
  pod_ip=$(k get pods -l app=web -o jsonpath='{.items[0].status.podIP}')
  for probe in "nslookup web.default.svc.cluster.local" "cat /etc/resolv.conf" "timeout 5 wget -O - http://web.default.svc.cluster.local/" \
    "timeout 5 wget -O - http://$svc_ip/" "timeout 5 wget -O - http://$pod_ip:8080/" "ip route"; do
    note "service diagnosis: $probe: $(k exec client -- sh -c "$probe" 2>&1 | tr '\n' ' ')"
  done
  note "service diagnosis: endpoints $(k get endpointslices -l kubernetes.io/service-name=web -o jsonpath='{.items[*].endpoints[*].addresses}')"
  for n in $(kind get nodes); do
    note "service diagnosis: $n routes $(node_sh "$n" 'ip route' | tr '\n' ';') rules for web: $(node_sh "$n" "iptables-save 2>/dev/null | grep -c default/web; nft list ruleset 2>/dev/null | grep -c web")"
  done
fi

# --- the streaming verbs ---------------------------------------------------------------
LOGS=$(k logs loaded 2>&1)
check kubectl-logs '[ "$LOGS" = started ]' "kubectl logs: $LOGS"
EXEC=$(k exec loaded -- sh -c 'echo out; echo err >&2; exit 3' 2>&1; echo "status $?")
# stdout and stderr are separate streams: their order in one file is not theirs to keep.
check kubectl-exec 'echo "$EXEC" | grep -qx out && echo "$EXEC" | grep -qx err && echo "$EXEC" | grep -q "status 3$"' "$(echo "$EXEC" | tr '\n' ' ')"
# script's input stays open 10 s: at its end script types an end-of-file character (NUL when
# its input is no terminal), which the remote terminal echoes while the command still runs.
TTY=$(script -qc "kubectl exec -it loaded -- sh -c 'tty; exit 0'" /dev/null < <(sleep 10) 2>&1 | tr -d '\r')
check kubectl-exec-tty '[[ $TTY =~ ^/dev/pts/[0-9]+$ ]]' "kubectl exec -it: $(echo "$TTY" | tr '\n' ' ')"
k run attachee --image localhost/busybox:latest --image-pull-policy Never --restart Never -i --command -- sh -c 'read line; echo "got $line"' \
  <<<"hello" >"$dir/attach.out" 2>&1
ATTACH=$(grep -v "^If you don't see" "$dir/attach.out")
check kubectl-attach 'echo "$ATTACH" | grep -q "got hello"' "kubectl run -i (attach with stdin): $(echo "$ATTACH" | tr '\n' ' ')"
k delete pod attachee --wait=false >/dev/null 2>&1 # done, and no longer Running
first_web=$(k get pods -l app=web -o jsonpath='{.items[0].metadata.name}')
k port-forward "pod/$first_web" 18080:8080 >"$dir/pf.log" 2>&1 &
pf=$!
wait_for 60 "port-forward listening" grep -q Forwarding "$dir/pf.log"
PF=$(curl -sS -m 10 http://127.0.0.1:18080/ 2>&1)
kill $pf 2>/dev/null
check kubectl-port-forward '[ "$PF" = "$first_web" ]' "port-forward to $first_web answered: $PF"
echo "copied in $(date +%s)" >"$dir/cp.txt"
k cp "$dir/cp.txt" loaded:/tmp/cp.txt >/dev/null 2>&1
k cp loaded:/tmp/cp.txt "$dir/cp-back.txt" >/dev/null 2>&1
check kubectl-cp 'cmp -s "$dir/cp.txt" "$dir/cp-back.txt"' "kubectl cp there and back: $(cat "$dir/cp-back.txt" 2>&1)"

# --- swap and memory per QoS class -------------------------------------------------------
node_meminfo() { node_sh "$WORKER" "awk -v k=$1: '\$1 == k { printf \"%.0f\\n\", \$2 * 1024 }' /proc/meminfo"; }
MEM=$(node_meminfo MemTotal) SWAP=$(node_meminfo SwapTotal)
pod burstable "$WORKER" '{"requests": {"memory": "256Mi"}, "limits": {"memory": "512Mi"}}'
pod guaranteed "$WORKER" '{"requests": {"memory": "128Mi", "cpu": "100m"}, "limits": {"memory": "128Mi", "cpu": "100m"}}'
pod besteffort "$WORKER" '{}'
for p in burstable guaranteed besteffort; do wait_for 300 "pod $p Running" running $p; done
in_pod() { k exec "$1" -- cat "$2" 2>&1; }
want=$(awk -v r=268435456 -v m="$MEM" -v s="$SWAP" 'BEGIN { printf "%.0f", int(r / m * s) }')
page=$(getconf PAGESIZE)
want_pages=$((want / page * page))
B=$(in_pod burstable /sys/fs/cgroup/memory.swap.max)
check swap-burstable '[ "$B" = "$want_pages" ]' "Burstable 256Mi/512Mi: memory.swap.max $B, LimitedSwap: 268435456 / $MEM x $SWAP = $want (page-rounded $want_pages)"
G=$(in_pod guaranteed /sys/fs/cgroup/memory.swap.max)
check swap-guaranteed '[ "$G" = 0 ]' "Guaranteed: memory.swap.max $G"
E=$(in_pod besteffort /sys/fs/cgroup/memory.swap.max)
check swap-besteffort '[ "$E" = 0 ]' "BestEffort: memory.swap.max $E"
SHM=$(k exec burstable -- grep ' /dev/shm ' /proc/mounts 2>&1)
kernel=$(uname -r)
case $kernel in
  [0-5].* | 6.[0-3].*) check shm-noswap 'true' "kernel $kernel has no noswap: $SHM" ;;
  *) check shm-noswap 'echo "$SHM" | grep -q noswap' "kernel $kernel: $SHM" ;;
esac
# Part of a Burstable pod in swap: its limit plus a third of its swap share.
hog_mib=$((512 + want / 1048576 / 3))
pod hog "$WORKER" '{"requests": {"memory": "256Mi"}, "limits": {"memory": "512Mi"}}' "[\"memtouch\", \"$hog_mib\", \"cold\"]"
wait_for 300 "the hog Running" running hog
in_swap() { [ "$(in_pod hog /sys/fs/cgroup/memory.swap.current)" -gt 0 ] 2>/dev/null; }
wait_for 300 "the hog in swap" in_swap
summary_swap() {
  k get --raw "/api/v1/nodes/$WORKER/proxy/stats/summary" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(next(c.get("swap",{}).get("swapUsageBytes","none") for p in d["pods"] if p["podRef"]["name"]=="hog" for c in p["containers"]))'
}
agree=no
for _ in $(seq 1 30); do
  before=$(in_pod hog /sys/fs/cgroup/memory.swap.current)
  summary=$(summary_swap 2>&1)
  after=$(in_pod hog /sys/fs/cgroup/memory.swap.current)
  if [ "$before" = "$after" ] && [ "$summary" = "$after" ]; then agree=yes; break; fi
  sleep 5
done
check summary-swap '[ "$agree" = yes ]' "Summary API swapUsageBytes $summary, kernel memory.swap.current $before/$after (hog of $hog_mib MiB, limit 512Mi)"

# --- a node restarted -------------------------------------------------------------------
# The node's processes all end with its container: every pod on it is back only once kubelet
# started its containers again (a restart count above the one before), and every sandbox
# swapcri listed before is still listed (its records outlive the restart).
worker_pods() { k get pods -o wide --no-headers --field-selector "spec.nodeName=$WORKER" | awk '{print $1}' | sort | tr '\n' ' '; }
restarts() { k get pods --field-selector "spec.nodeName=$WORKER,status.phase!=Succeeded" \
  -o jsonpath='{range .items[*]}{.metadata.name}={.status.containerStatuses[0].restartCount}/{.status.containerStatuses[0].ready}{"\n"}{end}' | sort; }
before_pods=$(worker_pods) before_restarts=$(restarts)
before_ids=$(node_sh "$WORKER" 'crictl pods -q | sort' | tr '\n' ' ')
t_restart=$SECONDS
docker restart "$WORKER" >/dev/null
back_again() { # every pod there before: restarted since, ready, Running
  local now
  now=$(restarts) || return 1
  nodes_ready || return 1
  local name count now_count
  while IFS== read -r name count; do
    now_count=$(sed -n "s|^$name=\([0-9]*\)/true$|\1|p" <<<"$now")
    [ -n "$now_count" ] && [ "$now_count" -gt "${count%/*}" ] || return 1
  done <<<"$before_restarts"
}
wait_for 900 "the worker's pods restarted and ready after docker restart" back_again ||
  note "after the restart: $(restarts | tr '\n' ' '); before: $(echo "$before_restarts" | tr '\n' ' ')"
wait_for 120 "crictl answering on $WORKER" node_sh "$WORKER" 'crictl pods -q'
after_ids=$(node_sh "$WORKER" 'crictl pods -q | sort' | tr '\n' ' ')
lost=$(comm -23 <(tr ' ' '\n' <<<"$before_ids" | grep .) <(tr ' ' '\n' <<<"$after_ids" | grep .) | wc -l)
check node-restart 'back_again && [ "$(worker_pods)" = "$before_pods" ] && [ "$lost" = 0 ]' \
  "after docker restart $WORKER ($((SECONDS - t_restart))s): restart counts $(restarts | tr '\n' ' ')(before: $(echo "$before_restarts" | tr '\n' ' ')); $(echo "$before_ids" | wc -w) sandboxes before, $lost of them no longer listed, $(echo "$after_ids" | wc -w) now"

# --- what each node's runtime uses --------------------------------------------------------
for n in $(kind get nodes); do
  if [ "$RUNTIME" = swapcri ]; then unit=swapcri.service; else unit=containerd.service; fi
  rss=$(node_sh "$n" "ps -o rss= -p \$(systemctl show -p MainPID --value $unit)" | tr -d ' ')
  figure "rss-$n" "$unit RSS $((rss / 1024)) MiB after the checks"
done

# --- deletion leaves nothing behind -------------------------------------------------------
kind delete cluster >/dev/null 2>&1
LEFT_CONTAINERS=$(docker ps -aq | wc -l) LEFT_VOLUMES=$(docker volume ls -q | wc -l)
LEFT_MOUNTS=$(grep -c -e kind- -e /var/lib/docker/overlay2/ /proc/mounts)
check delete-cluster '[ "$LEFT_CONTAINERS" = 0 ] && [ "$LEFT_VOLUMES" = 0 ] && [ "$LEFT_MOUNTS" = 0 ]' \
  "after kind delete cluster: $LEFT_CONTAINERS containers, $LEFT_VOLUMES volumes, $LEFT_MOUNTS mounts; networks: $(docker network ls --format '{{.Name}}' | tr '\n' ' ')"
