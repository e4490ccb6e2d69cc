#!/usr/bin/env bash
# Benchmarks that print figures (need root).
#  1. The CRI benchmark (critest -benchmark, hack/critest/bench.sh) against a
#     swapcri daemon started here and against each peer of RUNTIMES, one at a time, each a
#     private daemon from an empty root with the same registry mirrors, CNI plugins and runc:
#     containerd (Debian's, when installed), containerd2 (containerd 2.4.2 and its runc
#     shim, built by hack/tools.sh from hack/containerd's pinned module) and crio (CRI-O
#     1.36.3, its pinns and oomclamp, built by hack/tools.sh from hack/crio's); then
#     "pod + container from scratch" SCRATCH_SAMPLES times against each (critest's own spec
#     takes one sample), the daemons' RSS idle, after the run and after IDLE seconds idle, the
#     list calls at 110 running pods (benches/list_stats.rs against each daemon's socket), and
#     a side-by-side table of medians with swapcri's ratio to the best peer.
#  2. The cargo benches: start latency against a bare `runc run`, ListContainerStats, how
#     soon a pod whose PID-namespace holder is killed is reported NotReady, and what NRI
#     costs a pod and container cycle (off, on without plugins, one plugin on every event).
#   sudo hack/bench.sh [OUTDIR]          (default /tmp/swapcri-bench)
# Environment: RUNC (default /usr/sbin/runc), PODS CONTAINERS IMAGES PARALLEL (the kit's
# counts: 100 60 60 1), SCRATCH_SAMPLES (20), IDLE (60), RSS_RUNS (3: benchmark runs
# against one daemon, RSS after each and IDLE seconds of rest), BENCH_SKIP (specs to skip, e.g.
# "operations on Image" at PARALLEL=8), LIST_BENCH=0 (no list calls at 110 pods), RUNTIMES
# ("swapcri containerd containerd2 crio"; the table compares what OUTDIR holds), CRI_BENCH=0
# or CARGO_BENCHES=0 to skip a part, CONFORMANCE=1 (instead of the benchmark, critest's
# conformance suite against each runtime: OUTDIR/<runtime>/conformance/summary.txt),
# LIST_ONLY=1 (of the benchmark, only the list calls at 110 pods).
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
require_root
install_packages
ensure_cargo

OUT=$(mkdir -p "${1:-/tmp/swapcri-bench}" && cd "${1:-/tmp/swapcri-bench}" && pwd)
RUNC=${RUNC:-/usr/sbin/runc}
SCRATCH_SAMPLES=${SCRATCH_SAMPLES:-20}
IDLE=${IDLE:-60}
RSS_RUNS=${RSS_RUNS:-3}
SC_WORK=/run/swapcri-bench
CD_WORK=/run/swapcri-bench-containerd
CD_ROOT=/var/lib/swapcri-bench-containerd
CD2_WORK=/run/swapcri-bench-containerd2
CD2_ROOT=/var/lib/swapcri-bench-containerd2
CRIO_WORK=/run/swapcri-bench-crio
CRIO_ROOT=/var/lib/swapcri-bench-crio
# Each daemon's pod bridge on a subnet free on this machine; the bridges an earlier run left,
# with the addresses they had, go first.
for bridge in swapcri-crit0 ctrd-bench0 ctrd2-bench0 crio-bench0; do ip link del "$bridge" 2>/dev/null || true; done
SC_SUBNET=$(free_subnet)
CD_SUBNET=$(free_subnet "$SC_SUBNET")
CD2_SUBNET=$(free_subnet "$SC_SUBNET" "$CD_SUBNET")
CRIO_SUBNET=$(free_subnet "$SC_SUBNET" "$CD_SUBNET" "$CD2_SUBNET")
# Whether root here cannot lower oom_score_adj (no CAP_SYS_RESOURCE): then every daemon raises
# what a pod asks for to its own value, as swapcri does.
if capsh --has-p=cap_sys_resource 2>/dev/null; then RESTRICT_OOM=false; else RESTRICT_OOM=true; fi

rss_of() { # PID -> "VmRSS kB"
  awk '/^VmRSS:/{print $2}' "/proc/$1/status" 2>/dev/null || echo 0
}

stop_pid() { # PIDFILE
  if [ -s "$1" ]; then
    kill "$(cat "$1")" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$(cat "$1")" 2>/dev/null || break; sleep 0.1; done
    rm -f "$1"
  fi
}

release_mounts() { # DIR: what a killed daemon may leave mounted under DIR
  { grep -o " $1[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
}

cleanup() {
  stop_pid "$SC_WORK/pid"
  stop_pid "$CD_WORK/pid"
  stop_pid "$CD2_WORK/pid"
  stop_pid "$CRIO_WORK/pid"
  # Shims of pods a failed run left behind (containerd leaves them running by design).
  pkill -f "containerd-shim-runc-v2 .*-address $CD_WORK/" 2>/dev/null || true
  pkill -f "containerd-shim-runc-v2 .*-address $CD2_WORK/" 2>/dev/null || true
  pkill -f "conmon .*$CRIO_WORK/" 2>/dev/null || true
  for d in "$SC_WORK" "$CD_WORK" "$CD_ROOT" "$CD2_WORK" "$CD2_ROOT" "$CRIO_WORK" "$CRIO_ROOT"; do release_mounts "$d"; done
}
trap cleanup EXIT

# launch NAME WORKDIR SOCKET COMMAND…: starts a daemon in the background (its log in
# $OUT/NAME.log, its pid in WORKDIR/pid) and waits up to 10 s for its socket.
launch() {
  local name=$1 work=$2 socket=$3
  shift 3
  "$@" >"$OUT/$name.log" 2>&1 &
  echo $! >"$work/pid"
  for _ in $(seq 100); do [ -S "$socket" ] && return 0; sleep 0.1; done
  tail -20 "$OUT/$name.log"
  return 1
}

start_swapcri() {
  rm -rf "$SC_WORK" && mkdir -p "$SC_WORK"
  write_cri_test_config "$SC_WORK" "$RUNC" "$SC_SUBNET"
  # NRI on a socket of its own for the suite's NRI specs, as the peers have it on by default.
  [ "${CONFORMANCE:-0}" != 1 ] || with_private_nri "$SC_WORK"
  launch swapcri "$SC_WORK" "$SC_WORK/swapcri.sock" target/release/swapcri --config "$SC_WORK/config.toml"
}

# A containerd of its own: own root, state and socket; the suite's registries mirrored to
# the local registry; the same CNI plugins with a bridge of its own; the same runc.
start_containerd() {
  rm -rf "$CD_WORK" "$CD_ROOT" && mkdir -p "$CD_WORK/cni" "$CD_ROOT"
  write_bridge_conflist "$CD_WORK/cni/10-bench.conflist" containerd-bench ctrd-bench0 "$CD_SUBNET"
  local cri='plugins."io.containerd.grpc.v1.cri"' mirrors=""
  for r in $MIRRORED_REGISTRIES "$REGISTRY_ADDR"; do
    mirrors+="[$cri.registry.mirrors.\"$r\"]"$'\n'"endpoint = [\"http://$REGISTRY_ADDR\"]"$'\n'
  done
  cat >"$CD_WORK/config.toml" <<CONF
version = 2
root = "$CD_ROOT"
state = "$CD_WORK/state"
[grpc]
address = "$CD_WORK/containerd.sock"
[ttrpc]
address = "$CD_WORK/containerd.sock.ttrpc"
[$cri]
sandbox_image = "$REGISTRY_ADDR/pause:3.10"
restrict_oom_score_adj = $RESTRICT_OOM
[$cri.cni]
bin_dir = "/usr/lib/cni"
conf_dir = "$CD_WORK/cni"
[$cri.containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"
[$cri.containerd.runtimes.runc.options]
BinaryName = "$RUNC"
$mirrors
CONF
  launch containerd "$CD_WORK" "$CD_WORK/containerd.sock" containerd --config "$CD_WORK/config.toml"
}

# containerd 2.x of its own, as start_containerd (configuration version 3: mirrors as
# hosts.toml files, NRI on as by default, on a socket of its own).
start_containerd2() {
  rm -rf "$CD2_WORK" "$CD2_ROOT" && mkdir -p "$CD2_WORK/cni" "$CD2_WORK/bin" "$CD2_ROOT"
  local tool
  for tool in containerd containerd-shim-runc-v2; do
    ln -s "$(hack/tools.sh /var/cache/swapcri-tools $tool | tail -n 1)" "$CD2_WORK/bin/$tool"
  done
  write_bridge_conflist "$CD2_WORK/cni/10-bench.conflist" containerd2-bench ctrd2-bench0 "$CD2_SUBNET"
  for r in $MIRRORED_REGISTRIES "$REGISTRY_ADDR"; do
    mkdir -p "$CD2_WORK/certs.d/$r"
    printf '[host."http://%s"]\n  capabilities = ["pull", "resolve"]\n' "$REGISTRY_ADDR" >"$CD2_WORK/certs.d/$r/hosts.toml"
  done
  local images="plugins.'io.containerd.cri.v1.images'" runtime="plugins.'io.containerd.cri.v1.runtime'"
  cat >"$CD2_WORK/config.toml" <<CONF
version = 3
root = "$CD2_ROOT"
state = "$CD2_WORK/state"
[grpc]
address = "$CD2_WORK/containerd.sock"
[ttrpc]
address = "$CD2_WORK/containerd.sock.ttrpc"
[plugins.'io.containerd.internal.v1.opt']
path = "$CD2_ROOT/opt"
[plugins.'io.containerd.nri.v1.nri']
socket_path = "$CD2_WORK/nri.sock"
plugin_path = "$CD2_WORK/nri-plugins"
plugin_config_path = "$CD2_WORK/nri-conf"
[$images]
snapshotter = "overlayfs"
[$images.pinned_images]
sandbox = "$REGISTRY_ADDR/pause:3.10"
[$images.registry]
config_path = "$CD2_WORK/certs.d"
[$runtime]
restrict_oom_score_adj = $RESTRICT_OOM
[$runtime.cni]
bin_dirs = ["/usr/lib/cni"]
conf_dir = "$CD2_WORK/cni"
[$runtime.containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"
[$runtime.containerd.runtimes.runc.options]
BinaryName = "$RUNC"
CONF
  PATH=$CD2_WORK/bin:$PATH launch containerd2 "$CD2_WORK" "$CD2_WORK/containerd.sock" "$CD2_WORK/bin/containerd" \
    --config "$CD2_WORK/config.toml"
}

# CRI-O of its own, as start_containerd: its own storage, state, socket, NRI socket and CNI
# bridge; the suite's registries mirrored to the local registry (a registries.conf of its
# own); conmon from Debian; cgroupfs. Where root cannot lower oom_score_adj, runc is reached
# through oomclamp, which raises a bundle's oomScoreAdj to the daemon's own as
# restrict_oom_score_adj does for containerd (CRI-O has no such setting and asks -998 for
# every pod's infra container).
start_crio() {
  rm -rf "$CRIO_WORK" "$CRIO_ROOT" && mkdir -p "$CRIO_WORK/cni" "$CRIO_WORK/bin" "$CRIO_ROOT"
  local tool runtime=$RUNC
  for tool in crio pinns oomclamp; do
    ln -s "$(hack/tools.sh /var/cache/swapcri-tools $tool | tail -n 1)" "$CRIO_WORK/bin/$tool"
  done
  if [ "$RESTRICT_OOM" = true ]; then
    cp "$CRIO_WORK/bin/oomclamp" "$CRIO_WORK/bin/runc"
    ln -s "$RUNC" "$CRIO_WORK/bin/runc.real"
    runtime=$CRIO_WORK/bin/runc
  fi
  write_bridge_conflist "$CRIO_WORK/cni/10-bench.conflist" crio-bench crio-bench0 "$CRIO_SUBNET"
  {
    echo 'unqualified-search-registries = []'
    for r in $MIRRORED_REGISTRIES; do
      printf '[[registry]]\nprefix = "%s"\nlocation = "%s"\ninsecure = true\n' "$r" "$REGISTRY_ADDR"
    done
    printf '[[registry]]\nlocation = "%s"\ninsecure = true\n' "$REGISTRY_ADDR"
  } >"$CRIO_WORK/registries.conf"
  echo '{"default": [{"type": "insecureAcceptAnything"}]}' >"$CRIO_WORK/policy.json"
  cat >"$CRIO_WORK/crio.conf" <<CONF
[crio]
root = "$CRIO_ROOT/storage"
runroot = "$CRIO_WORK/storage"
storage_driver = "overlay"
log_dir = "$CRIO_ROOT/pods"
version_file = "$CRIO_WORK/version"
version_file_persist = "$CRIO_ROOT/version"
clean_shutdown_file = "$CRIO_ROOT/clean.shutdown"
[crio.api]
listen = "$CRIO_WORK/crio.sock"
[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
apparmor_profile = "unconfined"
irqbalance_config_file = ""
irqbalance_config_restore_file = ""
container_exits_dir = "$CRIO_WORK/exits"
container_attach_socket_dir = "$CRIO_WORK/attach"
namespaces_dir = "$CRIO_WORK/ns"
pinns_path = "$CRIO_WORK/bin/pinns"
[crio.runtime.runtimes.runc]
runtime_path = "$runtime"
runtime_type = "oci"
runtime_root = "$CRIO_WORK/runc"
monitor_path = "/usr/bin/conmon"
monitor_cgroup = "pod"
[crio.image]
pause_image = "$REGISTRY_ADDR/pause:3.10"
signature_policy = "$CRIO_WORK/policy.json"
[crio.network]
network_dir = "$CRIO_WORK/cni"
plugin_dirs = ["/usr/lib/cni"]
[crio.nri]
enable_nri = true
nri_listen = "$CRIO_WORK/nri.sock"
nri_plugin_dir = "$CRIO_WORK/nri-plugins"
nri_plugin_config_dir = "$CRIO_WORK/nri-conf"
CONF
  mkdir -p "$CRIO_WORK/conf.d" "$CRIO_WORK/registries.conf.d"
  launch crio "$CRIO_WORK" "$CRIO_WORK/crio.sock" "$CRIO_WORK/bin/crio" --config "$CRIO_WORK/crio.conf" \
    --config-dir "$CRIO_WORK/conf.d" --registries-conf "$CRIO_WORK/registries.conf" \
    --registries-conf-dir "$CRIO_WORK/registries.conf.d"
}

# The pull images: 50 MB of random data (incompressible) in 5 layers of 10 MB and in one
# layer, in the local registry (LAYERED, SINGLE); each built once.
build_pull_image() { # IMAGE LAYERS MB_PER_LAYER
  if curl -sf -o /dev/null -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "http://$REGISTRY_ADDR/v2/swapcri-bench/layers/manifests/${1##*:}"; then
    return 0
  fi
  local work
  work=$(mktemp -d)
  umoci init --layout "$work/oci" && umoci new --image "$work/oci:img"
  for n in $(seq "$2"); do
    umoci unpack --image "$work/oci:img" "$work/bundle" >/dev/null
    head -c "${3}M" /dev/urandom >"$work/bundle/rootfs/layer-$n"
    umoci repack --image "$work/oci:img" "$work/bundle" >/dev/null
    rm -rf "$work/bundle"
  done
  skopeo copy -q --dest-tls-verify=false "oci:$work/oci:img" "docker://$1"
  rm -rf "$work"
}

# Wall time of `crictl pull` of IMAGE, PULL_SAMPLES times, removed in between.
pull_timed() { # ENDPOINT IMAGE OUTFILE
  : >"$3"
  for _ in $(seq "${PULL_SAMPLES:-5}"); do
    crictl -r "$1" -i "$1" rmi "$2" >/dev/null 2>&1 || true
    local t0 t1
    t0=$(date +%s%N)
    crictl -r "$1" -i "$1" pull "$2" >/dev/null 2>&1 || { echo "    pull of $2 failed" >&2; return 0; }
    t1=$(date +%s%N)
    echo "$(((t1 - t0) / 1000))" | awk '{printf "%.3f\n", $1 / 1000}' >>"$3"
  done
  crictl -r "$1" -i "$1" rmi "$2" >/dev/null 2>&1 || true
}

# The CRI validation suite against one runtime (CONFORMANCE=1): the counts, and each failure
# with its reason, in OUTDIR/NAME/conformance/summary.txt.
conformance_one() { # NAME ENDPOINT NRI_SOCKET
  local nri=""
  [ -S "$3" ] && nri=$3
  echo "==> $1: critest conformance (hack/critest/run.sh${nri:+, NRI on $nri})"
  mkdir -p "$OUT/$1"
  NRI_SOCKET=$nri hack/critest/run.sh "$2" "$OUT/$1/conformance" >"$OUT/$1/conformance.log" 2>&1 || true
  grep -m1 '^TOTAL' "$OUT/$1/conformance/summary.txt" 2>/dev/null | sed 's/^/    /' ||
    echo "    no summary: $OUT/$1/conformance.log"
}

# The kit's benchmark, then the from-scratch spec SCRATCH_SAMPLES times (critest -benchmark
# sets its own focus: the other benchmark specs are skipped), the layered pull, RSS after IDLE
# seconds without requests and after each further run, and last the list calls.
bench_one() { # NAME ENDPOINT PID
  local name=$1 endpoint=$2 pid=$3 dir="$OUT/$1"
  rm -rf "$dir" && mkdir -p "$dir/scratch"
  echo "==> $name: critest -benchmark (pods=${PODS:-100} containers=${CONTAINERS:-60} images=${IMAGES:-60} parallel=${PARALLEL:-1})"
  RSS_PID=$pid hack/critest/bench.sh "$endpoint" "$dir" >"$dir/bench.out" 2>&1
  grep -m1 '^critest' "$dir/bench-summary.txt" | sed 's/^/    /'
  echo "==> $name: pod + container from scratch, $SCRATCH_SAMPLES samples"
  : >"$dir/scratch.txt"
  for n in $(seq "$SCRATCH_SAMPLES"); do
    critest -benchmark -runtime-endpoint "$endpoint" -image-endpoint "$endpoint" \
      -test-images-file "$dir/test-images.yaml" -benchmarking-params-file "$dir/params.yaml" \
      -ginkgo.skip "lifecycle of PodSandbox|operations on Container|operations on Image" -ginkgo.no-color \
      -ginkgo.json-report "$dir/scratch/report-$n.json" >"$dir/scratch/log-$n.txt" 2>&1 || true
    python3 - "$dir/scratch/report-$n.json" >>"$dir/scratch.txt" <<'PY'
import json, re, sys
for r in json.load(open(sys.argv[1])):
    for s in r.get("SpecReports") or []:
        for e in s.get("ReportEntries") or []:
            rep = (e.get("Value") or {}).get("Representation") or ""
            m = re.search(r"\[duration\]\s*\|\s*1\s*\|\s*([0-9.]+)(ms|s|µs)", rep)
            if m:
                v = float(m.group(1)) * {"ms": 1, "s": 1000, "µs": 0.001}[m.group(2)]
                print(f"{v:.3f}")
PY
  done
  echo "    $(wc -l <"$dir/scratch.txt") samples"
  echo "==> $name: pulls of a 5-layer and a 1-layer 50 MB image, ${PULL_SAMPLES:-5} samples each"
  pull_timed "$endpoint" "$LAYERED" "$dir/pull-layered.txt"
  pull_timed "$endpoint" "$SINGLE" "$dir/pull-single.txt"
  echo "==> $name: $IDLE s idle"
  sleep "$IDLE"
  echo "$(rss_of "$pid")" >"$dir/rss-idle-after.txt"
  # The same benchmark again against the same daemon: memory must not grow run after run.
  for n in $(seq 2 "$RSS_RUNS"); do
    echo "==> $name: run $n of $RSS_RUNS, for memory"
    IDLE_SETTLE=1 RSS_PID=$pid hack/critest/bench.sh "$endpoint" "$dir/run-$n" >"$dir/run-$n.out" 2>&1
    sleep "$IDLE"
    echo "$(rss_of "$pid")" >"$dir/run-$n/rss-idle-after.txt"
  done
  # Last, so the memory figures above are of the benchmark alone.
  [ "${LIST_BENCH:-1}" != 1 ] || list_one "$name" "$endpoint"
}

# The list calls at 110 running pods against one runtime (benches/list_stats.rs through its
# socket), into OUTDIR/NAME/list-stats.txt.
list_one() { # NAME ENDPOINT
  local dir="$OUT/$1"
  mkdir -p "$dir"
  echo "==> $1: the list calls at 110 running pods (benches/list_stats.rs)"
  if LIST_ENDPOINT=$2 LIST_IMAGE=$REGISTRY_ADDR/e2e-test-images/busybox:1.29-2 \
    cargo bench --locked --bench list_stats >"$dir/list-stats.txt" 2>&1; then
    grep -E '^ +List' "$dir/list-stats.txt" | sed 's/^ */    /'
  else
    echo "    failed: $dir/list-stats.txt"
    tail -5 "$dir/list-stats.txt"
  fi
}

if [ "${CRI_BENCH:-1}" = 1 ]; then
  prepare_critest "$OUT"
  LAYERED=$REGISTRY_ADDR/swapcri-bench/layers:5x10m SINGLE=$REGISTRY_ADDR/swapcri-bench/layers:1x50m
  build_pull_image "$LAYERED" 5 10
  build_pull_image "$SINGLE" 1 50
  echo "==> swapcri (release build)"
  cargo build --release --locked --quiet
  echo "==> runc: $("$RUNC" --version | sed -n 1p)"

  for runtime in ${RUNTIMES:-swapcri containerd containerd2 crio}; do
    case $runtime in
      swapcri) work=$SC_WORK socket=$SC_WORK/swapcri.sock ;;
      containerd)
        if ! command -v containerd >/dev/null; then
          echo "==> containerd left out: not installed (apt-get install containerd)"
          continue
        fi
        work=$CD_WORK socket=$CD_WORK/containerd.sock
        ;;
      containerd2) work=$CD2_WORK socket=$CD2_WORK/containerd.sock ;;
      crio) work=$CRIO_WORK socket=$CRIO_WORK/crio.sock ;;
      *) echo "unknown runtime '$runtime' (swapcri, containerd, containerd2 or crio)" >&2; exit 1 ;;
    esac
    if ! "start_$runtime"; then
      echo "==> $runtime left out: it did not build or start (above; its log: $OUT/$runtime.log)"
      stop_pid "$work/pid"
      continue
    fi
    sleep 5
    if [ "${CONFORMANCE:-0}" = 1 ]; then
      conformance_one "$runtime" "unix://$socket" "$work/nri.sock"
    elif [ "${LIST_ONLY:-0}" = 1 ]; then
      list_one "$runtime" "unix://$socket"
    else
      bench_one "$runtime" "unix://$socket" "$(cat "$work/pid")"
    fi
    stop_pid "$work/pid"
    [ "$runtime" != swapcri ] || release_mounts "$SC_WORK"
  done
  [ "${CONFORMANCE:-0}" = 1 ] && exit 0
  [ "${LIST_ONLY:-0}" = 1 ] && exit 0
  runtimes=(swapcri)
  for peer in containerd containerd2 crio; do [ -d "$OUT/$peer" ] && runtimes+=("$peer"); done
  python3 hack/bench_table.py "$OUT" "${runtimes[@]}" | tee "$OUT/table.txt"
fi

if [ "${CARGO_BENCHES:-1}" = 1 ]; then
  SWAPCRI_BENCH_RUNC=$RUNC cargo bench --locked --bench start_latency
  cargo bench --locked --bench list_stats
  cargo bench --locked --bench holder_loss
  SWAPCRI_BENCH_RUNC=$RUNC cargo bench --locked --bench nri_overhead
  cargo bench --locked --bench cgroup_stats
fi
