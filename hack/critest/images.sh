#!/usr/bin/env bash
# Builds every image the CRI validation suite (critest) pulls, here and from Debian's packages
# only, and pushes them under their real repository paths to the local registry (see
# registry_up in hack/lib.sh), which swapcri mirrors registry.k8s.io, gcr.io and docker.io to.
#   hack/critest/images.sh [WORKDIR]     (default /var/tmp/swapcri-critest-images)
# BUSYBOX=/path/to/static/busybox skips the busybox build. AGNHOST=/path/to/agnhost (built by
# hack/tools.sh from Kubernetes' module) and AGNHOST_SRC=its source directory in that module
# (test/images/agnhost: the image's own files) add the images Kubernetes' node e2e suite pulls:
# agnhost (the program on the busybox root, as its own image puts it on Alpine), busybox,
# glibc-dns-testing, nginx, nonewprivs, nonroot and pause at the tags Kubernetes 1.37 names.
#
# busybox is built once from Debian's busybox source package (upstream defconfig, static):
# Debian's busybox-static runs applets inside its shell without exec (which defeats the suite's
# masked-paths check) and has no ipcs or pgrep, which two specs run. Its shell passes on
# environment variables whose names are not shell names (`data-1`, from a ConfigMap's
# envFrom), as upstream's does: Debian's patch drops them unless FEATURE_DI_ENV_HACK. When
# that build fails, busybox-static stands in and the script says so. The pause, web-server (nginx and httpd)
# and no-new-privileges programs are ours, in hack/critest/src/. Layers and configs carry
# fixed timestamps, so a rebuild gives the same digests. WORKDIR/images.txt lists what was
# pushed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"

work=$(mkdir -p "${1:-/var/tmp/swapcri-critest-images}" && cd "${1:-/var/tmp/swapcri-critest-images}" && pwd)
epoch=${SOURCE_DATE_EPOCH:-1700000000}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
oci=$work/oci
bin=$work/bin
e2e=e2e-test-images
crit=k8s-staging-cri-tools
path_env="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
mkdir -p "$bin"
# What these images are built from, read before anything is built.
stamp=$(test_images_stamp)
curl -fsS "http://$REGISTRY_ADDR/v2/" >/dev/null || { echo "no registry on $REGISTRY_ADDR" >&2; exit 1; }

# A private apt configuration whose deb-src entries mirror the node's own deb entries: the
# node's apt setup is left alone and no archive is named here.
source_apt_config() { # DIR
  local dir=$1 f
  mkdir -p "$dir/lists/partial" "$dir/parts"
  : >"$dir/sources.list"
  if [ -f /etc/apt/sources.list ]; then
    sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' /etc/apt/sources.list >>"$dir/sources.list"
  fi
  for f in /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] && sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "$f" >"$dir/parts/$(basename "$f")"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && sed 's/^Types:.*/Types: deb-src/' "$f" >"$dir/parts/$(basename "$f")"
  done
  APT_OPTS=(-o "Dir::Etc::sourcelist=$dir/sources.list" -o "Dir::Etc::sourceparts=$dir/parts"
    -o "Dir::State::Lists=$dir/lists" -o "APT::Get::List-Cleanup=0" -o "APT::Sandbox::User=root")
}

# Names what build_busybox makes; a cached binary of another build is made again.
busybox_build="defconfig static no-tc di-env-hack"
build_busybox() {
  local src=$work/busybox-src
  mkdir -p "$src"
  source_apt_config "$work/apt"
  if ! compgen -G "$src/busybox_*.dsc" >/dev/null; then
    echo "==> Debian's busybox source package" >&2
    apt-get "${APT_OPTS[@]}" -qq update
    (cd "$src" && apt-get "${APT_OPTS[@]}" -qq source --download-only busybox)
  fi
  rm -rf "$src/tree"
  (cd "$src" && dpkg-source -x --no-check "$(ls busybox_*.dsc | tail -1)" tree >/dev/null)
  echo "==> busybox (static, defconfig)" >&2
  (
    cd "$src/tree"
    export SOURCE_DATE_EPOCH=$epoch
    make -s defconfig >/dev/null
    # Static; tc does not build against current kernel headers.
    sed -i -e 's/^# CONFIG_STATIC is not set/CONFIG_STATIC=y/' -e 's/^CONFIG_TC=y/# CONFIG_TC is not set/' \
      -e 's/^# CONFIG_FEATURE_DI_ENV_HACK is not set/CONFIG_FEATURE_DI_ENV_HACK=y/' .config
    yes '' | make -s oldconfig >/dev/null 2>&1 || true
    make -s -j"$(nproc)" >"$src/build.log" 2>&1
  )
  cp "$src/tree/busybox" "$bin/busybox"
  echo "$busybox_build" >"$bin/busybox.build"
}

if [ -n "${BUSYBOX:-}" ]; then
  bb=$BUSYBOX
elif { [ -x "$bin/busybox" ] && [ "$(cat "$bin/busybox.build" 2>/dev/null)" = "$busybox_build" ]; } || build_busybox; then
  bb=$bin/busybox
else
  bb=/bin/busybox
  echo "WARNING: the busybox build failed ($work/busybox-src/build.log): Debian's busybox-static" \
    "stands in; the specs that run ipcs or pgrep, or check masked paths from the shell, will fail" >&2
fi
ldd "$bb" >/dev/null 2>&1 && { echo "$bb is not a static binary" >&2; exit 1; }
for p in pause webserver nnp; do
  gcc -static -O2 -Wall -o "$bin/$p" "$here/src/$p.c"
  strip "$bin/$p"
done

# A busybox root filesystem: every applet a hard link, the users and groups the specs name.
busybox_rootfs() { # DIR
  local r=$1 applet
  rm -rf "$r"
  mkdir -p "$r"/{bin,dev,etc,home,proc,root,sys,tmp,usr/bin,usr/sbin,usr/local/bin,var/run,var/www,var/spool/mail}
  chmod 1777 "$r/tmp"
  chmod 0700 "$r/root"
  install -m 0755 "$bb" "$r/bin/busybox"
  for applet in $("$r/bin/busybox" --list); do
    [ "$applet" = busybox ] || ln "$r/bin/busybox" "$r/bin/$applet"
  done
  local users="root:0:0:/root:/bin/sh daemon:1:1:/usr/sbin:/bin/false bin:2:2:/bin:/bin/false
    sys:3:3:/dev:/bin/false sync:4:100:/bin:/bin/sync mail:8:8:/var/spool/mail:/bin/false
    www-data:33:33:/var/www:/bin/false operator:37:37:/var:/bin/false
    nobody:65534:65534:/home:/bin/false" u
  : >"$r/etc/passwd"
  : >"$r/etc/shadow"
  for u in $users; do
    IFS=: read -r name uid gid home shell <<<"$u"
    echo "$name:x:$uid:$gid:$name:$home:$shell" >>"$r/etc/passwd"
    echo "$name:*:10933:0:99999:7:::" >>"$r/etc/shadow"
  done
  chmod 0640 "$r/etc/shadow"
  local g
  : >"$r/etc/group"
  for g in root:0 daemon:1 bin:2 sys:3 adm:4 tty:5 disk:6 lp:7 mail:8 kmem:9 wheel:10:root \
    cdrom:11 dialout:18 floppy:19 video:28 audio:29 tape:32 www-data:33 operator:37 utmp:43 \
    plugdev:46 staff:50 lock:54 netdev:82 users:100 nogroup:65534; do
    IFS=: read -r name gid members <<<"$g"
    echo "$name:x:$gid:${members:-}" >>"$r/etc/group"
  done
}

settle_times() { find "$1" -exec touch -h -d "@$epoch" {} +; }

configure() { # TAG [umoci config options…]
  local tag=$1
  shift
  umoci config --image "$oci:$tag" --created "$created" --author swapcri-tests --no-history "$@"
}

# An image of one layer holding DIR.
image_from_dir() { # TAG DIR
  local bundle=$work/bundle-$1
  umoci new --image "$oci:$1"
  rm -rf "$bundle"
  umoci unpack --image "$oci:$1" "$bundle" >/dev/null
  cp -a "$2/." "$bundle/rootfs/"
  settle_times "$bundle/rootfs"
  umoci repack --image "$oci:$1" --history.created "$created" --history.created_by "rootfs" "$bundle"
  rm -rf "$bundle"
  configure "$1" --architecture amd64 --os linux
}

# FROM plus one layer with what FUNCTION changes in the unpacked root it is given, as TAG.
image_from() { # FROM TAG FUNCTION
  local bundle=$work/bundle-$2
  rm -rf "$bundle"
  umoci unpack --image "$oci:$1" "$bundle" >/dev/null
  "$3" "$bundle/rootfs"
  settle_times "$bundle/rootfs"
  umoci repack --image "$oci:$2" --history.created "$created" --history.created_by "$3" "$bundle"
  rm -rf "$bundle"
}

# A config-only variant of FROM: a different image id over the same layers.
relabel() { # FROM TAG LABEL
  configure "$1" --tag "$2" --config.label "$3"
}

echo "==> the suite's images" >&2
rm -rf "$oci"
umoci init --layout "$oci"
busybox_rootfs "$work/rootfs-busybox"
image_from_dir busybox "$work/rootfs-busybox"
configure busybox --config.env "$path_env" --config.cmd sh

rm -rf "$work/rootfs-pause" && mkdir -p "$work/rootfs-pause"
install -m 0755 "$bin/pause" "$work/rootfs-pause/pause"
image_from_dir pause-3.10 "$work/rootfs-pause"
configure pause-3.10 --config.entrypoint /pause --config.user 65535:65535
relabel pause-3.10 pause-3.9 "io.swapcri.test.pause=3.9"

marker() { : >"$1/$MARKER"; }
for n in test-image-1 test-image-2 test-image-3 test-image-latest test-image-digest test-image-tag; do
  MARKER=$n image_from busybox "$n" marker
done
MARKER=same-image image_from busybox test-image-tags marker

configure busybox --tag user-uid --config.user 1002
configure busybox --tag user-username --config.user www-data
configure busybox --tag user-uid-group --config.user 1003:1004
configure busybox --tag user-username-group --config.user www-data:1004

group_in_image() {
  echo "default-user:x:1000:1000:Linux User,,,:/home/default-user:/bin/sh" >>"$1/etc/passwd"
  echo "default-user:!:19000:0:99999:7:::" >>"$1/etc/shadow"
  echo "default-user:x:1000:" >>"$1/etc/group"
  echo "group-defined-in-image:x:50000:default-user" >>"$1/etc/group"
  mkdir -p "$1/home/default-user"
  chown 1000:1000 "$1/home/default-user"
}
image_from busybox predefined-group group_in_image
configure predefined-group --config.user 1000

nginx_files() {
  install -m 0755 "$bin/webserver" "$1/usr/sbin/nginx"
  mkdir -p "$1/usr/share/nginx/html" "$1/var/log/nginx"
  echo "<html><body>nginx</body></html>" >"$1/usr/share/nginx/html/index.html"
}
image_from busybox nginx nginx_files
configure nginx --config.cmd nginx --config.cmd=-g --config.cmd "daemon off;" \
  --config.exposedports 80/tcp --config.stopsignal SIGTERM
configure nginx --tag hostnet-nginx --config.env LISTEN_PORT=12003 --config.env LISTEN_ADDR=127.0.0.1 \
  --clear config.exposedports --config.exposedports 12003/tcp

httpd_files() {
  mkdir -p "$1/usr/local/apache2/bin" "$1/usr/local/apache2/htdocs"
  install -m 0755 "$bin/webserver" "$1/usr/local/apache2/bin/httpd"
  ln -s httpd "$1/usr/local/apache2/bin/httpd-foreground"
  echo "<html><body><h1>It works!</h1></body></html>" >"$1/usr/local/apache2/htdocs/index.html"
}
image_from busybox httpd httpd_files
configure httpd --config.env "PATH=/usr/local/apache2/bin:${path_env#PATH=}" \
  --config.workingdir /usr/local/apache2 --config.cmd httpd-foreground --config.exposedports 80/tcp \
  --config.stopsignal SIGTERM

nnp_files() { install -o 0 -g 0 -m 4755 "$bin/nnp" "$1/usr/local/bin/nnp"; }
image_from busybox nonewprivs nnp_files
configure nonewprivs --config.cmd /usr/local/bin/nnp

# Kubernetes' node e2e images (test/utils/image/manifest.go of 1.37), with AGNHOST.
if [ -n "${AGNHOST:-}" ]; then
  agnhost_files() {
    install -m 0755 "$AGNHOST" "$1/agnhost"
    # The certificate and key its image adds, for the specs' HTTPS servers.
    install -m 0644 "${AGNHOST_SRC:?AGNHOST_SRC: the source directory of agnhost}/porter/localhost.crt" \
      "$AGNHOST_SRC/porter/localhost.key" "$1/"
    ln -s agnhost "$1/agnhost-2"
    mkdir -p "$1/uploads"
    # What its Alpine base has and specs run: bash (busybox's shell stands in), and curl
    # (the node's, with the libraries it links).
    printf '#!/bin/sh\nexec /bin/sh "$@"\n' >"$1/bin/bash"
    chmod 0755 "$1/bin/bash"
    install -D -m 0755 "$(command -v curl)" "$1/usr/bin/curl"
    local lib
    for lib in $(ldd "$(command -v curl)" | grep -o '/[^ ]*'); do
      mkdir -p "$1$(dirname "$lib")"
      cp -L "$lib" "$1$lib"
    done
    echo "user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh" >>"$1/etc/passwd"
    echo "user-defined-in-image:!:19000:0:99999:7:::" >>"$1/etc/shadow"
    echo "user-defined-in-image:x:1000:" >>"$1/etc/group"
    echo "group-defined-in-image:x:50000:user-defined-in-image" >>"$1/etc/group"
  }
  image_from busybox agnhost agnhost_files
  configure agnhost --config.entrypoint /agnhost --config.cmd pause \
    --config.exposedports 80/tcp --config.exposedports 8080/tcp --config.exposedports 8081/tcp \
    --config.exposedports 9376/tcp --config.exposedports 5000/tcp
  configure busybox --tag nonroot --config.user 1234
  # glibc-dns-testing: Debian bookworm's minimal root with dnsutils, as its own image is
  # (bookworm-slim and dnsutils), from hack/vm's cached debootstrap (glibc's hostname -f).
  glibc_tar=$(bash -c 'source "$1/../vm/lib.sh" && rootfs_tarball dnsutils bookworm' _ "$here")
  rm -rf "$work/rootfs-glibc" && mkdir -p "$work/rootfs-glibc"
  tar -C "$work/rootfs-glibc" -xf "$glibc_tar"
  image_from_dir glibc-dns-testing "$work/rootfs-glibc"
  rm -rf "$work/rootfs-glibc"
  configure glibc-dns-testing --config.env "$path_env" --config.cmd bash
fi

# The benchmark's image-listing set: distinct image ids.
bench_tags="1.35.0-glibc 1-uclibc 1 1-glibc 1-musl"
for t in $bench_tags; do relabel busybox "busybox-$t" "io.swapcri.test.variant=$t"; done
umoci gc --layout "$oci"

# Local tag -> repository path and tag in the registry, as the suite names them.
pushes=(
  "busybox $e2e/busybox:1.29-2" "pause-3.10 pause:3.10" "pause-3.9 pause:3.9"
  "test-image-1 $crit/test-image-1:latest" "test-image-2 $crit/test-image-2:latest"
  "test-image-3 $crit/test-image-3:latest" "test-image-latest $crit/test-image-latest:latest"
  "test-image-digest $crit/test-image-digest:latest"
  "test-image-tag $crit/test-image-tag:test" "test-image-tag $crit/test-image-tag:all"
  "test-image-tags $crit/test-image-tags:1" "test-image-tags $crit/test-image-tags:2"
  "test-image-tags $crit/test-image-tags:3"
  "user-uid $crit/test-image-user-uid:latest" "user-username $crit/test-image-user-username:latest"
  "user-uid-group $crit/test-image-user-uid-group:latest"
  "user-username-group $crit/test-image-user-username-group:latest"
  "predefined-group $crit/test-image-predefined-group:latest"
  "hostnet-nginx $crit/hostnet-nginx-amd64:latest" "nginx $e2e/nginx:1.14-2"
  "httpd $e2e/httpd:2.4.39-4" "nonewprivs $e2e/nonewprivs:1.3"
)
for t in $bench_tags; do pushes+=("busybox-$t docker/library/busybox:$t"); done
if [ -n "${AGNHOST:-}" ]; then
  pushes+=("glibc-dns-testing $e2e/glibc-dns-testing:2.1.1")
  # busybox 1.36.1-1: the memory QoS specs name it themselves.
  pushes+=("agnhost $e2e/agnhost:2.66.1" "agnhost $e2e/agnhost:2.55" "busybox $e2e/busybox:1.37.0-2"
    "busybox $e2e/busybox:1.36.1-1"
    "nginx $e2e/nginx:1.27.0-2" "nginx $e2e/nginx:1.28.0-2" "nonewprivs $e2e/nonewprivs:1.4"
    "nonroot $e2e/nonroot:1.5" "pause-3.10 pause:3.10.2")
fi

list=$work/images.txt
echo "# busybox: $bb" >"$list"
for p in "${pushes[@]}"; do
  read -r tag ref <<<"$p"
  skopeo copy -q --dest-tls-verify=false "oci:$oci:$tag" "docker://$REGISTRY_ADDR/$ref"
  echo "$REGISTRY_ADDR/$ref" >>"$list"
done
echo "$stamp${AGNHOST:+ agnhost}" >"$work/images.stamp"
echo "==> pushed ${#pushes[@]} images to $REGISTRY_ADDR (list: $list)" >&2
