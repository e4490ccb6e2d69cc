#!/usr/bin/env bash
# Crash churn: pods (CNI bridge networking, a shared PID namespace) with containers, exec and
# logs, a job container removed on its own, image pulls and removals, while the daemon is killed with SIGKILL: each round at one
# of the crash points of src/crash.rs in turn (a build with the `crash-points` feature), and
# every fourth round at a random moment instead. After each restart what the daemon lists
# must agree with the node: every pod and container it handed out and was not asked to
# remove is listed (a started one still running), and no run directory, runtime state,
# mount, monitor, namespace holder or address reservation exists for an id it does not list.
# At the end everything is removed through the CRI and the leftovers are counted: all zero.
#   sudo hack/churn.sh [ROUNDS] [PODS]   short form (hack/test.sh): 12 rounds of 2 pods
#   sudo hack/churn.sh 100 50            long form (100 rounds of 50 pods)
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
require_root
install_packages
ensure_cargo
rounds=${1:-12}
per_round=${2:-2}
points=(sandbox-after-namespaces sandbox-after-network container-after-runtime-create
  container-remove-after-runtime-delete sandbox-stop-after-containers pull-after-layers
  image-remove-after-index)

echo "==> swapcri with crash points (cargo build --features crash-points)"
cargo build --locked --features crash-points --target-dir target/churn 2>&1 | tail -n 1
bin=$PWD/target/churn/debug/swapcri
dir=$(mktemp -d /tmp/swapcri-churn.XXXXXX)
bridge=swapcri-chrn0
cgroup_parent=swapcri-churn-${dir##*.}
port=5055
daemon=
cleanup() {
  [ -n "$daemon" ] && kill -9 "$daemon" 2>/dev/null || true
  [ -n "$daemon" ] && wait "$daemon" 2>/dev/null || true
  # After a failure, nothing of the run may outlive it.
  for state in "$dir"/run/runc/*; do
    [ -e "$state" ] && runc --root "$dir/run/runc" delete --force "$(basename "$state")" 2>/dev/null
  done
  pkill -9 -f "^swapcri (monitor|sandbox-ns) $dir/" 2>/dev/null || true
  grep -o " $dir[^ ]*" /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  find /sys/fs/cgroup -depth -type d -path "*/$cgroup_parent*" -exec rmdir {} \; 2>/dev/null || true
  ip link del "$bridge" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

echo "==> images: one for the pods, one to pull and remove (registry on 127.0.0.1:$port)"
hack/local-registry.sh "$port" >/dev/null
MARKER=churn hack/build-busybox-image.sh "$dir/pulled" churn-pulled:1 >/dev/null
skopeo copy --quiet --dest-tls-verify=false "oci:$dir/pulled:churn-pulled:1" "docker://127.0.0.1:$port/churn-pulled:1"
hack/build-busybox-image.sh "$dir/pod-image" churn/busybox:1 >/dev/null
pulled=127.0.0.1:$port/churn-pulled:1

mkdir -p "$dir/cni" "$dir/logs"
subnet=$(free_subnet)
cat >"$dir/cni/10-churn.conflist" <<CNI
{ "cniVersion": "1.0.0", "name": "churn",
  "plugins": [ { "type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false,
    "ipam": { "type": "host-local", "dataDir": "$dir/ipam", "ranges": [[{ "subnet": "$subnet" }]] } } ] }
CNI
cat >"$dir/config.toml" <<CONF
socket = "$dir/swapcri.sock"
state_root = "$dir/state"
run_root = "$dir/run"
[runtime]
default_cgroup_parent = "/$cgroup_parent"
[network]
config_dir = "$dir/cni"
CONF

cli() { "$bin" --config "$dir/config.toml" client "$@" 2>>"$dir/client.log"; }

start_daemon() { # [CRASH_POINT]
  SWAPCRI_CRASH_AT=${1:-} "$bin" --config "$dir/config.toml" serve >>"$dir/daemon.log" 2>&1 &
  daemon=$!
  for _ in $(seq 300); do
    cli version >/dev/null 2>&1 && return 0
    kill -0 "$daemon" 2>/dev/null || break
    sleep 0.1
  done
  echo "the daemon did not start"; tail -n 30 "$dir/daemon.log"; exit 1
}

# What the workload was told, one id per line: pods and containers it holds, the containers
# it started, and the ids it asked to remove (those may or may not survive a crash).
touch "$dir/pods" "$dir/containers" "$dir/running" "$dir/removing"
add() { echo "$2" >>"$dir/$1"; }
drop() { grep -vxF "$2" "$dir/$1" >"$dir/$1.new" || true; mv "$dir/$1.new" "$dir/$1"; }

# One round's requests; stops at the first failure (the daemon is gone).
workload() { # ROUND
  local r=$1 pod c1 c2 c3 old seen log
  # The oldest pods (as many as a round makes): stopped, then removed with their containers.
  for old in $(head -n "$per_round" "$dir/pods"); do
    for c in $(cat "$dir/containers"); do grep -q "$old" "$dir/owner.$c" 2>/dev/null && drop running "$c"; done
    cli stopp "$old" >/dev/null || return 0
    add removing "$old"
    for c in $(cat "$dir/containers"); do grep -q "$old" "$dir/owner.$c" 2>/dev/null && add removing "$c"; done
    cli rmp "$old" >/dev/null || return 0
    drop pods "$old"
    for c in $(cat "$dir/containers"); do grep -q "$old" "$dir/owner.$c" 2>/dev/null && drop containers "$c"; done
  done
  for p in $(seq "$per_round"); do
    pod=$(cli runp "churn-$r-$p" --share-pid --log-dir "$dir/logs/churn-$r-$p") || return 0
    add pods "$pod"
    c1=$(cli create "$pod" app churn/busybox:1 -- sh -c 'echo started; exec sleep 100000') || return 0
    add containers "$c1"; echo "$pod" >"$dir/owner.$c1"
    cli start "$c1" >/dev/null || return 0
    add running "$c1"
    c2=$(cli create "$pod" sidecar churn/busybox:1 -- sh -c 'while true; do echo tick; sleep 1; done') || return 0
    add containers "$c2"; echo "$pod" >"$dir/owner.$c2"
    cli start "$c2" >/dev/null || return 0
    add running "$c2"
    # The sidecar sees the app: one PID namespace.
    seen=$(cli exec "$c2" -- sh -c 'ps | grep -c "[s]leep 100000"') || return 0
    [ "$seen" -ge 1 ] || { echo "  FAIL: the sidecar of $pod does not see the app ($seen)"; return 1; }
    for _ in $(seq 50); do
      log=$(cli logs "$c1") || return 0
      grep -q started <<<"$log" && break
      sleep 0.1
    done
    grep -q started <<<"$log" || { echo "  FAIL: no log for $c1"; return 1; }
    # A job container: run, then removed on its own (RemoveContainer in every round).
    c3=$(cli create "$pod" job churn/busybox:1 -- true) || return 0
    add containers "$c3"; echo "$pod" >"$dir/owner.$c3"
    cli start "$c3" >/dev/null || return 0
    add removing "$c3"
    cli rm "$c3" >/dev/null || return 0
    drop containers "$c3"
  done
  cli pull "$pulled" >/dev/null || return 0
  cli rmi "$pulled" >/dev/null || return 0
}

listed() { # pods|ps -> ids, one per line
  cli "$1" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("\n".join(i["id"] for i in d.get("items", d.get("containers", []))))'
}

failures=0
fail() { echo "  FAIL: $*"; failures=$((failures + 1)); }

# The daemon's view against the node's.
check_agreement() {
  local pods containers id state
  pods=$(listed pods); containers=$(listed ps)
  for id in $(cat "$dir/pods"); do
    grep -qxF "$id" <<<"$pods" || grep -qxF "$id" "$dir/removing" || fail "pod $id was handed out and is not listed"
  done
  for id in $(cat "$dir/containers"); do
    grep -qxF "$id" <<<"$containers" || grep -qxF "$id" "$dir/removing" || fail "container $id was handed out and is not listed"
  done
  for id in $(cat "$dir/running"); do
    state=$(cli inspect "$id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["state"])' 2>/dev/null || echo gone)
    [ "$state" = CONTAINER_RUNNING ] || [ "$state" = 1 ] || fail "container $id was started and is $state"
  done
  local known="$pods"$'\n'"$containers"
  for d in "$dir"/run/sandboxes/* "$dir"/run/containers/* "$dir"/run/runc/*; do
    [ -e "$d" ] || continue
    grep -qxF "$(basename "$d")" <<<"$known" || fail "$d belongs to no listed pod or container"
  done
  for f in "$dir"/ipam/churn/*; do
    case $(basename "$f") in last_reserved_ip.0 | lock) continue ;; esac
    [ -e "$f" ] || continue
    grep -qxF "$(head -n 1 "$f" | tr -d '\r')" <<<"$pods" || fail "address $(basename "$f") is reserved for no listed pod"
  done
  for d in "/sys/fs/cgroup/memory/$cgroup_parent"/* "/sys/fs/cgroup/$cgroup_parent"/*; do
    [ -d "$d" ] || continue
    grep -qxF "$(basename "$d")" <<<"$pods" || fail "cgroup $d belongs to no listed pod"
  done
  for pid in $(pgrep -f "^swapcri (monitor|sandbox-ns) $dir/" || true); do
    grep -qF "$(tr '\0' ' ' <"/proc/$pid/cmdline" | grep -oE '[0-9a-f]{64}' | head -n 1)" <<<"$known" ||
      fail "process $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline")) serves no listed pod or container"
  done
}

echo "==> $rounds rounds of $per_round pods, the daemon killed in each"
start_daemon
cli images >/dev/null
"$bin" --config "$dir/config.toml" image import "$dir/pod-image.tar" >/dev/null
kills=0
started=$(date +%s)
for round in $(seq "$rounds"); do
  kill -9 "$daemon"; wait "$daemon" 2>/dev/null || true
  if [ $((round % 4)) -eq 0 ]; then
    point="a random moment"
    start_daemon
    ( sleep "0.$((RANDOM % 9 + 1))"; kill -9 "$daemon" 2>/dev/null ) &
    workload "$round" || failures=$((failures + 1))
    wait
  else
    point=${points[$(((round - 1) % ${#points[@]}))]}
    start_daemon "$point"
    workload "$round" || failures=$((failures + 1))
  fi
  if kill -0 "$daemon" 2>/dev/null; then
    reached="not reached: killed after the round"
    kill -9 "$daemon"
  else
    reached="killed there"
  fi
  kills=$((kills + 1))
  wait "$daemon" 2>/dev/null || true
  start_daemon
  before=$failures
  check_agreement
  echo "round $round/$rounds: crash at $point ($reached); $(wc -l <"$dir/pods") pods, $(wc -l <"$dir/containers") containers held; $([ "$failures" = "$before" ] && echo agree || echo DISAGREE)"
done

echo "==> removing everything through the CRI"
for id in $(listed pods); do cli rmp "$id" >/dev/null || fail "RemovePodSandbox $id"; done
for id in $(listed ps); do cli rm "$id" >/dev/null || fail "RemoveContainer $id"; done
cli rmi churn/busybox:1 >/dev/null || fail "RemoveImage churn/busybox:1"
cli rmi "$pulled" >/dev/null 2>&1 || true
kill "$daemon"; wait "$daemon" 2>/dev/null || true
daemon=

count() { printf '%-28s %s\n' "$1" "$2"; [ "$2" -eq 0 ] || fail "$1 left: $2"; }
echo "==> left over after $rounds rounds, $kills kills in $(( $(date +%s) - started )) s"
count "mounts" "$(grep -c " $dir/" /proc/self/mountinfo || true)"
find /sys/fs/cgroup -mindepth 2 -path "*/$cgroup_parent/*" -type d 2>/dev/null | head -n 5
count "cgroups" "$(find /sys/fs/cgroup -mindepth 2 -path "*/$cgroup_parent/*" -type d 2>/dev/null | wc -l)"
count "pinned namespaces" "$(find "$dir/run/sandboxes" -path '*/ns/*' 2>/dev/null | wc -l)"
count "veth interfaces" "$(ip -o link show master "$bridge" 2>/dev/null | wc -l)"
count "address reservations" "$(find "$dir/ipam" -type f ! -name 'last_reserved_ip.*' ! -name lock 2>/dev/null | wc -l)"
count "monitors and holders" "$(pgrep -fc "^swapcri (monitor|sandbox-ns) $dir/" || true)"
count "runc state directories" "$(find "$dir/run/runc" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)"
count "layers" "$(find "$dir/state/images/layers" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)"
count "scratch directories" "$(find "$dir/state/images/tmp" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)"
count "pod and container records" "$(find "$dir/state/sandboxes" "$dir/state/containers" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)"
if [ "$failures" -ne 0 ]; then
  echo "churn: $failures failures (daemon log: $dir/daemon.log)"
  tail -n 40 "$dir/daemon.log"
  exit 1
fi
echo "churn: $rounds rounds, $kills kills survived, the daemon and the node agreed after every restart, nothing left"
