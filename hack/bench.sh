#!/usr/bin/env bash
# Benchmarks that print figures (need root): pod + container start latency, and
# ListContainerStats with 10 and 100 running containers.
#   sudo hack/bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
require_root
install_packages
ensure_cargo
cargo bench --locked --bench start_latency
cargo bench --locked --bench list_stats
