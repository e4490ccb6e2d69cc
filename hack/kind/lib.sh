# Shared by the kind scripts (sourced after hack/lib.sh): a private Docker daemon.

# start_dockerd WORK [DATA_ROOT]: a dockerd of its own under WORK (exec root, socket; its data
# root too unless DATA_ROOT names one kept between runs, for BuildKit's cache), with no
# bridge and no iptables rules, so it touches none of the machine's networks: a container gets
# no network but its own unless it asks for the host's (builds reach the package registries
# that way). Its OCI runtime is runc behind a filter: a privileged container asks for every
# capability the kernel knows, and runc fails to grant one that root itself lacks (as where
# root lacks CAP_SYS_RESOURCE). Builds use BuildKit, as Docker 23 and later do by default (the
# Dockerfile's cache mounts need it). Sets DOCKER_HOST and dockerd_pid; stop_dockerd undoes it.
start_dockerd() {
  local work=$1 data=${2:-$1/docker} held
  mkdir -p "$work" "$data"
  chmod 0700 "$work" "$data"
  held=$(capsh --decode="$(awk '/^CapBnd/ { print $2 }' /proc/self/status)" | cut -d= -f2 | tr a-z A-Z | jq -Rc 'split(",")')
  cat >"$work/runc-held-caps" <<WRAP
#!/bin/sh
prev=
for arg in "\$@"; do
  case \$prev in
    --bundle | -b) file=\$arg/config.json path=.process.capabilities ;; # create
    --process | -p) file=\$arg path=.capabilities ;;                   # exec
    *) file= ;;
  esac
  if [ -n "\$file" ]; then
    jq --argjson held '$held' "\$path |= (if . then with_entries(.value |= map(select(. as \\\$c | \\\$held | index(\\\$c)))) else . end)" \\
      "\$file" >"\$file.held" && mv "\$file.held" "\$file"
  fi
  prev=\$arg
done
exec /usr/sbin/runc "\$@"
WRAP
  chmod +x "$work/runc-held-caps"
  export DOCKER_HOST=unix://$work/docker.sock DOCKER_BUILDKIT=1
  /usr/sbin/dockerd --data-root "$data" --exec-root "$work/exec" --pidfile "$work/docker.pid" \
    --host "$DOCKER_HOST" --bridge=none --iptables=false --ip-masq=false \
    --add-runtime "held-caps=$work/runc-held-caps" --default-runtime held-caps \
    >"$work/dockerd.log" 2>&1 &
  dockerd_pid=$! dockerd_data=$data
  local _
  for _ in $(seq 1 100); do /usr/bin/docker version >/dev/null 2>&1 && break; sleep 0.2; done
  /usr/bin/docker version --format 'dockerd {{.Server.Version}}' >&2 ||
    { tail -20 "$work/dockerd.log" >&2; echo "dockerd did not start (log: $work/dockerd.log)" >&2; return 1; }
}

# stop_dockerd WORK: stops the daemon start_dockerd started and unmounts what it left under WORK.
stop_dockerd() {
  local work=$1
  if [ -n "${dockerd_pid:-}" ]; then
    kill "$dockerd_pid" 2>/dev/null
    wait "$dockerd_pid" 2>/dev/null
    dockerd_pid=
  fi
  # dockerd leaves its netns and overlay mounts under the work directory and its data root.
  { grep -o -e " $work/[^ ]*" -e " ${dockerd_data:-$work}/[^ ]*" /proc/mounts || true; } | sort -ru | xargs -r -n1 umount -l
}

# rust_image TAG SUITE: a stand-in for the official Rust image (rust:1-SUITE) in the daemon
# DOCKER_HOST names: Debian SUITE with a C toolchain, and this machine's Rust toolchain where
# the official image keeps it. Needs hack/vm/lib.sh (rootfs_tarball).
rust_image() {
  local tag=$1 suite=$2 dir sysroot tool
  dir=$(mktemp -d /var/tmp/swapcri-rust-image.XXXXXX)
  tar -C "$dir" -xf "$(rootfs_tarball gcc,libc6-dev,make,ca-certificates,pkg-config "$suite")"
  sysroot=$(rustc --print sysroot)
  mkdir -p "$dir/usr/local/rustup/toolchains" "$dir/usr/local/cargo/bin"
  cp -a "$sysroot" "$dir/usr/local/rustup/toolchains/host"
  for tool in cargo rustc rustdoc; do ln -s "/usr/local/rustup/toolchains/host/bin/$tool" "$dir/usr/local/cargo/bin/$tool"; done
  # The machine may reach crates.io through a proxy whose CA only the host trusts.
  cp /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/ca-certificates.crt"
  tar -C "$dir" -c . | /usr/bin/docker import \
    -c 'ENV PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'ENV CARGO_HOME=/usr/local/cargo' - "$tag" >/dev/null
  rm -rf "$dir"
}
