#!/usr/bin/env bash
# Builds the kind node image (the top-level Dockerfile, unmodified) against stand-in base and
# Rust images made here, boots it the way kind boots a node, and drives swapcri inside it with
# crictl and critest. Everything runs on a private dockerd; all it made is removed at the end.
#   sudo hack/kind-node-test.sh            (KEEP=1: leave the node and dockerd up for a look)
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
source hack/vm/lib.sh
source hack/kind/lib.sh
cat <<'EOF'
==> What this cannot test here (no image registry, no kubelet, a cgroup v1/v2 hybrid host):
    - a real kubelet: kubelet's requests are imitated with crictl (kubelet-shaped cgroup
      parents) and critest; no cluster is created;
    - the real kindest/node base (Debian trixie, containerd with preloaded images): a
      debootstrap'ed bookworm with systemd stands in; the preloaded-image export is skipped
      there (no containerd in the stand-in);
    - a cgroup v2 host: swap limits do not apply on this host's v1 memory controller, so no
      LimitedSwap value is checked in the node (the VM e2e checks them on cgroup v2).
EOF
require_root
install_packages
ensure_cargo
for p in docker.io debootstrap skopeo; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p" >/dev/null
done
t0=$(date +%s)
say() { echo "==> $(date +%T) $*"; }

work=$(mktemp -d /var/tmp/swapcri-kind.XXXXXX)
D=(/usr/bin/docker)
NODE=swapcri-kind-node
TAG=swapcri-standin
dockerd_pid=
cleanup() {
  set +e
  if [ -n "${KEEP:-}" ]; then
    echo "==> KEEP is set: the node stays up; docker -H $DOCKER_HOST exec -it $NODE bash; remove with: kill $dockerd_pid, then rm -rf $work"
    return
  fi
  if [ -n "$dockerd_pid" ]; then
    "${D[@]}" rm -f "$NODE" >/dev/null 2>&1
    "${D[@]}" volume rm -f "$NODE-var" >/dev/null 2>&1
    "${D[@]}" rmi -f "$TAG/kind-node" "$TAG/kind-base" "$TAG/rust" >/dev/null 2>&1
    "${D[@]}" builder prune -af >/dev/null 2>&1
  fi
  stop_dockerd "$work/dockerd"
  rm -rf "$work"
}
trap cleanup EXIT

say "starting a private dockerd (data root $work/dockerd/docker)"
start_dockerd "$work/dockerd"

# Stand-in base: what kind's base image carries that swapcri needs (systemd, CNI plugins in
# /opt/cni/bin, iptables, mount), and kind's /etc/default/kubelet.
say "stand-in kind base image"
base_tar=$(rootfs_tarball systemd,systemd-sysv,dbus,iptables,iproute2,mount,util-linux,kmod,procps,ca-certificates,runc,containernetworking-plugins)
mkdir "$work/base"
tar -C "$work/base" -xf "$base_tar"
mkdir -p "$work/base/opt/cni/bin" "$work/base/etc/cni/net.d"
cp -a "$work/base/usr/lib/cni/." "$work/base/opt/cni/bin/"
echo 'KUBELET_EXTRA_ARGS=--runtime-cgroups=/system.slice/containerd.service' >"$work/base/etc/default/kubelet"
for unit in getty@tty1.service serial-getty@ttyS0.service systemd-firstboot.service apt-daily.timer apt-daily-upgrade.timer; do
  ln -sf /dev/null "$work/base/etc/systemd/system/$unit"
done
tar -C "$work/base" -c . | "${D[@]}" import -c 'ENTRYPOINT ["/sbin/init"]' -c 'ENV container=docker' - "$TAG/kind-base" >/dev/null
rm -rf "$work/base"

# Stand-in Rust image: the same bookworm with this machine's Rust toolchain.
say "stand-in Rust image (this machine's toolchain: $(rustc --version))"
rust_image "$TAG/rust" bookworm

say "docker build (the Dockerfile as it is)"
"${D[@]}" build --network host --build-arg BASE_IMAGE="$TAG/kind-base" --build-arg RUST_IMAGE="$TAG/rust" \
  -t "$TAG/kind-node" . >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
say "built $TAG/kind-node ($("${D[@]}" image inspect -f '{{.Size}}' "$TAG/kind-node" | numfmt --to=iec))"

# As kind runs a node: privileged, a private cgroup namespace, tmpfs /run and /tmp, /var on
# a volume, the host's modules read-only, systemd as PID 1.
say "starting the node container"
"${D[@]}" run -d --name "$NODE" --hostname "$NODE" --privileged --cgroupns=private --network none \
  --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
  --tmpfs /run --tmpfs /tmp -v "$NODE-var:/var" -v /lib/modules:/lib/modules:ro \
  "$TAG/kind-node" >/dev/null
inode() { "${D[@]}" exec "$NODE" "$@"; }
inode_in() { "${D[@]}" exec -i "$NODE" "$@"; } # with standard input
# put FILE PATH MODE: a file into the node (docker cp cannot write under its tmpfs mounts).
put() { inode_in sh -c "cat >'$2' && chmod $3 '$2'" <"$1"; }
state=
for _ in $(seq 1 120); do
  state=$(inode systemctl is-active swapcri.service 2>/dev/null || true)
  [ "$state" = active ] && break
  sleep 1
done
PASS=0 FAIL=0
check() { # check NAME CONDITION DETAILS
  if eval "$2"; then PASS=$((PASS + 1)); echo "KIND-RESULT $1 PASS $3"; else FAIL=$((FAIL + 1)); echo "KIND-RESULT $1 FAIL $3"; fi
}
check swapcri-service-active '[ "$state" = active ]' "swapcri.service $state after boot"
if [ "$state" != active ]; then
  inode journalctl -u swapcri.service --no-pager -n 40 -o cat || true
  exit 1
fi
RUNTIME_CGROUPS=$(inode cat /etc/default/kubelet)
CONTAINERD=$(inode systemctl is-enabled containerd.service 2>&1 || true)
check kubelet-runtime-cgroups 'echo "$RUNTIME_CGROUPS" | grep -q -- "--runtime-cgroups=/system.slice/swapcri.service"' "$RUNTIME_CGROUPS"
check swapcri-cgroup-driver 'inode swapcri --config /etc/swapcri/config.toml client status --verbose | tr -d " \n" | grep -q "\"cgroup_driver\":\"systemd\""' \
  "configured with the systemd driver"

# kind writes its CNI configuration into the node (kindnet): a bridge stands in for it.
inode_in sh -c 'cat >/etc/cni/net.d/10-kindnet.conflist' <<'EOF'
{ "cniVersion": "1.0.0", "name": "kindnet",
  "plugins": [ { "type": "bridge", "bridge": "kind0", "isGateway": true, "ipMasq": false,
                 "ipam": { "type": "host-local", "ranges": [[{ "subnet": "10.244.0.0/24" }]] } },
               { "type": "portmap", "capabilities": { "portMappings": true } } ] }
EOF

# Images go in with `swapcri image import`, as `kind load` would.
say "importing the test image into swapcri inside the node"
hack/build-busybox-image.sh "$work/busybox" localhost/busybox:latest >/dev/null
put "$work/busybox.tar" /tmp/busybox.tar 0644
IMPORTED=$(inode swapcri --config /etc/swapcri/config.toml image import /tmp/busybox.tar 2>&1 | tail -n 1)
check image-import 'echo "$IMPORTED" | grep -q "localhost/busybox:latest sha256:"' "$IMPORTED"

# crictl through a pod shaped as kubelet sends it under kind (cgroupRoot /kubelet).
PASS_BEFORE=$PASS
prepare_critest "$work" >/dev/null
put /var/cache/swapcri-tools/crictl /usr/local/bin/crictl 0755
put /var/cache/swapcri-tools/critest /usr/local/bin/critest 0755
UID_=3f9c1a52-aaaa-4bbb-8ccc-0123456789ab
PARENT="kubelet-kubepods-burstable-pod${UID_//-/_}.slice"
inode_in sh -c 'cat >/tmp/pod.json' <<EOF
{ "metadata": { "name": "kind-test", "namespace": "default", "uid": "$UID_", "attempt": 0 },
  "log_directory": "/var/log/pods/default_kind-test_$UID_", "linux": { "cgroup_parent": "$PARENT" } }
EOF
inode_in sh -c 'cat >/tmp/ctr.json' <<'EOF'
{ "metadata": { "name": "app" }, "image": { "image": "localhost/busybox:latest" },
  "command": ["sh", "-c", "echo hello from kind; exec sleep 100000"], "log_path": "app/0.log",
  "linux": { "resources": { "memory_limit_in_bytes": 134217728, "oom_score_adj": 937 } } }
EOF
POD=$(inode crictl runp /tmp/pod.json)
CTR=$(inode crictl create "$POD" /tmp/ctr.json /tmp/pod.json)
inode crictl start "$CTR" >/dev/null
sleep 1
check crictl-pod-running 'inode crictl ps -q --state running | grep -q "^$CTR"' "pod $POD, container $CTR running"
EXEC=$(inode crictl exec "$CTR" cat /proc/self/cgroup | tail -n 1)
CGROUP=$(inode sh -c "cat /proc/\$(crictl inspect -o go-template --template '{{.info.pid}}' $CTR)/cgroup" | tail -n 1)
check crictl-exec '[ -n "$EXEC" ]' "exec in the container: $EXEC"
check kubelet-prefixed-parent 'echo "$CGROUP" | grep -q "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/$PARENT/swapcri-$CTR.scope"' \
  "the container's cgroup in the node: ${CGROUP#0::}"
QOS=$(inode crictl inspect "$CTR" | tr -d ' \n' | grep -o '"qos_class":"[A-Za-z]*"' | head -n 1)
check qos-from-prefixed-parent '[ "$QOS" = "\"qos_class\":\"Burstable\"" ]' "memory plan: $QOS from $PARENT"
LOGS=$(inode crictl logs "$CTR" 2>&1)
check crictl-logs '[ "$LOGS" = "hello from kind" ]' "logs: $LOGS"
STATS=$(inode crictl stats -o json "$CTR" | tr -d ' \n')
check crictl-stats 'echo "$STATS" | grep -q "\"workingSetBytes\":{\"value\":\"[1-9]"' "$(echo "$STATS" | grep -o '"workingSetBytes":{[^}]*}')"
STOPPED=$(inode crictl stopp "$POD" 2>&1 | tail -n 1) || true
check crictl-stop-pod 'inode crictl pods -q --state notready | grep -q "^$POD"' "$STOPPED"
inode crictl rmp -f "$POD" >/dev/null || true
LEFT=$(inode sh -c "ls -d /sys/fs/cgroup/*/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/$PARENT/swapcri-* 2>/dev/null | wc -l")
check crictl-removal '[ "$LEFT" = 0 ]' "$LEFT container scopes left after removing the pod"

# The CRI validation suite inside the node, its images served by a registry inside the node:
# every spec that can run there, then the pod and basic specs SOAK times over (default 5),
# with the machine loaded by a parallel build unless LOAD=0.
say "critest inside the node"
put /usr/bin/docker-registry /usr/local/bin/docker-registry 0755
tar -C "$REGISTRY_DIR" -c data | inode_in sh -c 'mkdir -p /tmp/registry && tar -C /tmp/registry -x'
inode_in sh -c 'cat >/tmp/registry.yml' <<'EOF'
version: 0.1
storage: { filesystem: { rootdirectory: /tmp/registry/data } }
http: { addr: 127.0.0.1:5000 }
EOF
inode sh -c 'setsid docker-registry serve /tmp/registry.yml >/tmp/registry.log 2>&1 &'
{
  echo
  for r in $MIRRORED_REGISTRIES; do
    printf '[registries."%s"]\nmirrors = ["127.0.0.1:5000"]\n' "$r"
  done
} | inode_in sh -c 'cat >>/etc/swapcri/config.toml'
inode systemctl restart swapcri.service
# An upstream-only digest cannot be served by any local registry.
NODE_SKIP=${NODE_SKIP:-'public image with digest should be pulled and removed'}
node_critest() { # NAME [FOCUS]: one run inside the node; prints its TOTAL line
  local name=$1 status t0=$SECONDS
  local args=(-runtime-endpoint unix:///run/swapcri/swapcri.sock -image-endpoint unix:///run/swapcri/swapcri.sock
    -ginkgo.no-color -ginkgo.skip "$NODE_SKIP" -ginkgo.json-report "/tmp/critest-$name.json")
  [ -n "${2:-}" ] && args+=(-ginkgo.focus "$2")
  inode env TMPDIR=/tmp critest "${args[@]}" >"$work/critest-$name.log" 2>&1
  status=$?
  inode cat "/tmp/critest-$name.json" >"$work/critest-$name.json" 2>/dev/null || true
  python3 hack/critest/summary.py "$work/critest-$name.json" "$status" "$((SECONDS - t0))" >"$work/critest-$name.txt"
  grep -m1 '^TOTAL' "$work/critest-$name.txt"
}
critest_ok() { grep -qE '^TOTAL [1-9][0-9]* .* FAILED 0 ' "$work/critest-$1.txt"; }
critest_failures() { sed -n '/^FAILED:/,/^SKIPPED/p' "$work/critest-$1.txt" | grep -v '^SKIPPED'; }
set +e
FULL=$(node_critest full)
check critest-full 'critest_ok full' "$FULL"
critest_ok full || critest_failures full
load_pid=
if [ "${LOAD:-1}" = 1 ]; then
  # A build on every core, over and over: the load under which pods once lost their namespaces.
  (while :; do
    cargo build --release --locked --quiet --target-dir "$work/load-target" >/dev/null 2>&1
    rm -rf "$work/load-target"
  done) &
  load_pid=$!
fi
SOAK_FAILED=0
for n in $(seq "${SOAK:-5}"); do
  line=$(node_critest "soak-$n" 'basic operations|PodSandbox')
  echo "    soak $n: $line"
  critest_ok "soak-$n" || { SOAK_FAILED=$((SOAK_FAILED + 1)); critest_failures "soak-$n"; }
done
if [ -n "$load_pid" ]; then
  kill "$load_pid"
  pkill -f -- "--target-dir $work/load-target"
  wait "$load_pid" 2>/dev/null
fi
set -e
check critest-soak '[ "$SOAK_FAILED" = 0 ]' \
  "basic and pod specs ${SOAK:-5} times back to back${load_pid:+ under a parallel build}: $SOAK_FAILED runs with failures"

if [ "$FAIL" != 0 ]; then
  echo "==> swapcri's journal in the node"
  inode journalctl -u swapcri.service --no-pager -n 80 -o cat || true
fi
say "kind node test: $PASS passed, $FAIL failed in $(($(date +%s) - t0)) s"
[ "$FAIL" = 0 ]
