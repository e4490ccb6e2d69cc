#!/usr/bin/env bash
# Live upgrade and downgrade under running pods (tests/upgrade_as_root.rs). Builds two
# swapcri binaries beside this checkout's:
#   FROM  an earlier revision (default HEAD~1): the pods start under it;
#   NEXT  this checkout's HEAD with one field more in the CRI's PodSandboxConfig and
#         ContainerConfig, as the next Kubernetes release's CRI will have.
# The test moves the daemon FROM -> this build (SIGTERM) -> NEXT (SIGKILL) -> this build
# (SIGTERM) and checks that every container keeps its process, exec, logs and exit code.
#   sudo hack/upgrade-test.sh            (FROM=<rev> to start from another revision)
# Builds are debug builds cached under /var/tmp/swapcri-upgrade (a few minutes each).
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
require_root
install_packages
ensure_cargo

FROM=$(git rev-parse "${FROM:-HEAD~1}")
HEAD_REV=$(git rev-parse HEAD)
WORK=/var/tmp/swapcri-upgrade
mkdir -p "$WORK" && chmod 0700 "$WORK"

# build NAME REV [PATCH-FUNCTION]: prints the binary's path.
build() {
  local name=$1 rev=$2 patch=${3:-} src="$WORK/src-$1" bin="$WORK/$1-swapcri"
  if [ -x "$bin" ] && [ "$(cat "$WORK/$name.rev" 2>/dev/null)" = "$rev" ]; then
    echo "$bin"; return
  fi
  echo "upgrade-test: building $name ($rev)" >&2
  rm -rf "$src" && mkdir -p "$src"
  git archive "$rev" | tar -x -C "$src"
  [ -z "$patch" ] || "$patch" "$src"
  (cd "$src" && cargo build --locked --bin swapcri --target-dir "$WORK/target-$name" >&2)
  cp "$WORK/target-$name/debug/swapcri" "$bin"
  echo "$rev" > "$WORK/$name.rev"
  echo "$bin"
}

# The next CRI: a field more in the two configs a record keeps.
next_cri() {
  local proto=$1/proto/runtime/v1/api.proto
  sed -i -e '/^message PodSandboxConfig {/a\    string next_release_field = 4000;' \
         -e '/^message ContainerConfig {/a\    string next_release_field = 4000;' "$proto"
  [ "$(grep -c 'next_release_field' "$proto")" = 2 ] || { echo "upgrade-test: cannot patch $proto" >&2; exit 1; }
}

from_bin=$(build from "$FROM")
next_bin=$(build next "$HEAD_REV" next_cri)
echo "upgrade-test: from $FROM, next = $HEAD_REV with a CRI field more"
SWAPCRI_UPGRADE_FROM=$from_bin SWAPCRI_UPGRADE_NEXT=$next_bin \
  cargo test --locked --test upgrade_as_root -- --ignored --nocapture
