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
  xz-utils            # unpacks the kernel modules of bookworm-backports
  kmod                # depmod, for the kernel modules of the VM
  openssl             # certificates for the streaming TLS test
  python3-kubernetes  # the Kubernetes Python client, an independent streaming client in the tests
  umoci jq curl gcc dpkg-dev  # hack/critest.sh: the CRI validation suite's images
)

require_root() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "run this as root: sudo $0 $*" >&2
    exit 1
  fi
}

# Installs the packages that are not installed yet.
install_packages() {
  local missing=()
  for p in "${SWAPCRI_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "==> installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
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
