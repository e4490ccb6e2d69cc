#!/usr/bin/env bash
# Runs every test: unit, integration (real daemon, registry and runc on this host).
#   sudo hack/test.sh [cargo test filters…]
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
require_root
install_packages
ensure_cargo
export RUST_BACKTRACE=${RUST_BACKTRACE:-0}
echo "==> cargo test (unit and integration)"
cargo test --locked --no-fail-fast "$@"
