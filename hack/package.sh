#!/usr/bin/env bash
# Builds the Debian package, target/debian/swapcri_<version>_amd64.deb (debian/: the binary in
# /usr/bin, swapcri.service and swapcri.socket, /etc/swapcri/config.toml as a conffile with the
# systemd cgroup driver, docs, man pages and shell completions generated from the CLI), then
# checks it with lintian; prints the package's path last.
#   sudo hack/package.sh [--version VERSION] [--no-lintian]
# --version builds the same tree under another version (the VM e2e upgrades to one).
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
version= lint=1
while [ $# -gt 0 ]; do
  case $1 in
    --version) version=$2; shift 2 ;;
    --no-lintian) lint=0; shift ;;
    *) echo "usage: $0 [--version VERSION] [--no-lintian]" >&2; exit 2 ;;
  esac
done
require_root
install_packages
ensure_cargo

crate_version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
changelog_version=$(dpkg-parsechangelog -S Version)
if [ "$changelog_version" != "$crate_version" ]; then
  echo "debian/changelog is at $changelog_version, Cargo.toml at $crate_version: add a changelog entry" >&2
  exit 1
fi
out=$PWD/target/debian
mkdir -p "$out"
staging=$(mktemp -d)
# debhelper's files are removed afterwards, and a changelog entry --version added is taken out.
cleanup() {
  if [ -f "$staging/changelog.orig" ]; then cp "$staging/changelog.orig" debian/changelog; fi
  rm -rf "$staging" debian/.debhelper debian/swapcri debian/generated debian/files \
    debian/*.substvars debian/*.debhelper* debian/debhelper-build-stamp debian/swapcri.service debian/swapcri.socket
}
trap cleanup EXIT
if [ -n "$version" ]; then
  maintainer=$(dpkg-parsechangelog -S Maintainer)
  cp debian/changelog "$staging/changelog.orig"
  {
    printf 'swapcri (%s) unstable; urgency=medium\n\n  * Rebuilt as %s.\n\n -- %s  %s\n\n' \
      "$version" "$version" "$maintainer" "$(date -R)"
    cat "$staging/changelog.orig"
  } >debian/changelog
fi
version=$(dpkg-parsechangelog -S Version)
echo "==> building swapcri $version (release, then debian/rules binary)"
# The binary is built here, in the environment every other script builds it in (debian/rules
# builds it again without dpkg's compiler flags, so cargo finds it up to date).
cargo build --release --locked
export DEB_DESTDIR=$out SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(dpkg-parsechangelog -S Timestamp)}
debian/rules clean >/dev/null
debian/rules build >"$staging/build.log" 2>&1 || { tail -n 30 "$staging/build.log"; exit 1; }
fakeroot debian/rules binary >"$staging/binary.log" 2>&1 || { tail -n 30 "$staging/binary.log"; exit 1; }
deb=$out/swapcri_${version}_amd64.deb
[ -f "$deb" ] || { echo "no $deb" >&2; exit 1; }
if [ "$lint" = 1 ]; then
  echo "==> lintian"
  # Errors and warnings fail the build; info tags are shown.
  lintian --info --display-info --fail-on error,warning "$deb"
fi
echo "$deb"
