# Shared by the VM scenarios (sourced): results, cgroup reads, memory hogs. Needs C (the
# swapcri command line) and T0 (the start time).
PAGE=$(getconf PAGESIZE 2>/dev/null || echo 4096)
MI=1048576
FAILED=""
result() {
  echo "E2E-RESULT $1 $2 $3"
  [ "$2" = FAIL ] && FAILED="$FAILED $1"
}
check() { # check NAME CONDITION DETAILS
  if eval "$2"; then result "$1" PASS "$3"; else result "$1" FAIL "$3"; fi
}
note() { echo "E2E-LOG +$(($(date +%s) - T0))s $*"; }
# meminfo KEY: bytes (mawk prints numbers past 2^31 as 1.2e+09 unless told otherwise).
meminfo() { awk -v k="$1:" '$1 == k { printf "%.0f\n", $2 * 1024 }' /proc/meminfo; }
# cg ID: the container's cgroup directory: ID (cgroupfs) or RUNTIME-ID.scope (systemd:
# swapcri-ID.scope, cri-containerd-ID.scope).
cg() { find /sys/fs/cgroup -maxdepth 6 -type d \( -name "$1" -o -name "*-$1.scope" \) | head -n 1; }
value() { cat "$(cg "$1")/$2"; }
parent_value() { cat "$(dirname "$(cg "$1")")/$2"; }
pages() { echo $(($1 / PAGE * PAGE)); } # as the kernel stores a byte value
# json_number KEY: the first number after "KEY" in JSON on stdin (nested {"value": N} too).
json_number() { tr -d ' \n' | sed -n "s/.*\"$1\":{*\"*[a-z]*\"*:*\([0-9][0-9]*\).*/\1/p" | head -n 1; }

# A process that allocates ALLOC bytes of anonymous memory and keeps them: dd's buffer stays
# allocated while it blocks writing into a pipe nobody reads.
hold() { echo "dd if=/dev/zero bs=$1 count=1 2>/dev/null | sleep 100000"; }

# settle ID…: waits until every container's memory + swap use stops changing (its
# allocation done or throttled), at most 90 s.
settle() {
  prev="" n=0
  while [ $n -lt 90 ]; do
    cur=""
    for id in "$@"; do cur="$cur $(($(value "$id" memory.current) + $(value "$id" memory.swap.current)))"; done
    [ "$cur" = "$prev" ] && break
    prev=$cur n=$((n + 1))
    sleep 1
  done
  note "settled after $n s:$cur"
}

# held ID: true when the daemon found every planned value in the kernel (no mismatches).
held() { $C client inspect --verbose "$1" | tr -d ' \n' | grep -q '"memoryMismatches":\[\]'; }


# mirror_up: waits (at most 120 s) until the daemon pulls through the node's local registry.
# critest's first pull must find it up: a pull through an unreachable mirror falls back to
# the real registry, which the node cannot reach.
mirror_up() {
  tries=0
  until swapcri --config "$CONF" client pull 127.0.0.1:5000/e2e-test-images/busybox:1.29-2 >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -ge 120 ]; then
      echo "E2E-RESULT critest-registry FAIL the registry in the node or swapcri did not answer in 120 s"
      tail -n 5 /tmp/registry.log | sed 's/^/E2E-LOG registry: /'
      return 1
    fi
    sleep 1
  done
}

# The swap-safety scenarios' containers and what they ask of the daemon (C, GLIMITS).
# gctr NAME PARENT "MEMTOUCH ARGS" [runp flags…]: a kubelet-style container with GLIMITS,
# running memtouch.
gctr() {
  n=$1 parent=$2 args=$3
  shift 3
  p=$($C client runp "$n" --cgroup-parent "$parent" "$@")
  c=$($C client create "$p" app localhost/busybox:latest $GLIMITS -- memtouch $args)
  $C client start "$c" >/dev/null && echo "$c"
}
remove_all() { for p in $($C client pods | grep '"id"' | cut -d'"' -f4); do $C client rmp "$p" >/dev/null; done; }
gstate() { $C client inspect --verbose "$1" | tr -d ' \n' | grep -o '"state":"[a-z]*"' | head -n 1 | cut -d'"' -f4; }
gaction() { $C client inspect --verbose "$1" | tr -d ' \n' | grep -o '"guard":{"action":"[a-z]*"' | cut -d'"' -f6; }
# wait_for SECONDS COMMAND…: seconds until COMMAND succeeds (empty: it never did).
wait_for() {
  lim=$1 t=$(date +%s)
  shift
  while [ $(($(date +%s) - t)) -lt "$lim" ]; do
    "$@" && { echo $(($(date +%s) - t)); return; }
    sleep 1
  done
}

# The node e2e binary's API server (its services mode), for the scenarios that run kubelet
# themselves: they set IN (the folder of e2e_node.test), W (their private folder), NODE, API
# and TOKEN. api METHOD PATH [BODY]: one request with the bearer token.
api() {
  curl -sk -X "$1" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    ${3:+--data "$3"} "$API$2"
}
# stop PID: SIGTERM, then SIGKILL if it still runs after 30 s.
stop() {
  kill "$1" 2>/dev/null || return 0
  i=0
  while kill -0 "$1" 2>/dev/null && [ $i -lt 30 ]; do sleep 1; i=$((i + 1)); done
  kill -9 "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}
# api_server_up: starts it (its pid in SVC), waits up to 300 s for it to be healthy and
# writes $W/kubeconfig (0600) for kubelet and kubectl; 1 if it never became healthy.
api_server_up() {
  $IN/e2e_node.test --run-services-mode --bearer-token="$TOKEN" --host=$API --node-name=$NODE \
    >$W/services.log 2>&1 &
  SVC=$!
  i=0
  until api GET /healthz 2>/dev/null | grep -qx ok; do
    i=$((i + 1))
    [ $i -lt 300 ] || return 1
    sleep 1
  done
  (umask 077 && cat >$W/kubeconfig) <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: $API
    insecure-skip-tls-verify: true
users:
- name: node-e2e
  user:
    token: $TOKEN
contexts:
- name: local
  context: {cluster: local, user: node-e2e}
current-context: local
EOF
}
# kubelet_config DRIVER ENDPOINT [STATS_FROM_CRI]: the configuration those scenarios start
# kubelet with: LimitedSwap, the runtime at ENDPOINT, the read-only port for /metrics and
# /stats, anyone allowed (the node has no network); STATS_FROM_CRI sets the
# PodAndContainerStatsFromCRI gate.
kubelet_config() {
  cat <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: $1
failSwapOn: false
memorySwap:
  swapBehavior: LimitedSwap
EOF
  [ -z "${3:-}" ] || printf 'featureGates:\n  PodAndContainerStatsFromCRI: %s\n' "$3"
  cat <<EOF
containerRuntimeEndpoint: $2
imageServiceEndpoint: $2
readOnlyPort: 10255
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
EOF
}
