#!/usr/bin/env bash
# critest's benchmark mode against a CRI endpoint, with counts small enough for a run of a
# few minutes, summarised per CRI operation.
#   hack/critest/bench.sh ENDPOINT OUTDIR
# What it measures: the pod lifecycle (RunPodSandbox, PodSandboxStatus, StopPodSandbox,
# RemovePodSandbox), the container lifecycle (Create, Start, Status, Stop, Remove, each in a
# pod of its own), the image lifecycle (PullImage, ImageStatus, RemoveImage from the local
# registry), ListImages, and one pod + container from scratch.
# Environment: PODS CONTAINERS IMAGES PARALLEL (100 60 60 1); RSS_PID, the daemon whose
# VmRSS and VmHWM are recorded before and after; IDLE_SETTLE (5 s before and after);
# BENCH_SKIP (a ginkgo skip pattern; none by default).
# OUTDIR gets params.yaml, test-images.yaml, critest-bench.log, report.json, critest's
# per-sample files (*_benchmark_data.json), rss.txt and bench-summary.txt (n, min, median,
# p90, p95, p99, max and mean in ms per operation).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
endpoint=${1:?usage: $0 ENDPOINT OUTDIR}
out=$(mkdir -p "${2:?usage: $0 ENDPOINT OUTDIR}" && cd "$2" && pwd)
reg=$REGISTRY_ADDR

rss() { # LABEL
  if [ -n "${RSS_PID:-}" ] && [ -r "/proc/$RSS_PID/status" ]; then
    awk -v l="$1" -v p="$RSS_PID" '/^VmRSS:/{r=$2} /^VmHWM:/{h=$2}
      END{printf "%-16s pid=%s VmRSS=%d kB (%.1f MiB) VmHWM=%d kB (%.1f MiB)\n", l, p, r, r/1024, h, h/1024}' \
      "/proc/$RSS_PID/status"
  else
    echo "$1 (no RSS_PID)"
  fi
}

cat >"$out/test-images.yaml" <<YAML
defaultTestContainerImage: $reg/e2e-test-images/busybox:1.29-2
webServerTestImage: $reg/e2e-test-images/nginx:1.14-2
YAML
cat >"$out/params.yaml" <<YAML
containersNumber: ${CONTAINERS:-60}
containersNumberParallel: ${PARALLEL:-1}
containerBenchmarkTimeoutSeconds: 120
podsNumber: ${PODS:-100}
podsNumberParallel: ${PARALLEL:-1}
podBenchmarkTimeoutSeconds: 60
imagesNumber: ${IMAGES:-60}
imagesNumberParallel: ${PARALLEL:-1}
imageBenchmarkTimeoutSeconds: 60
imagePullingBenchmarkImage: $reg/docker/library/busybox:1
imageListingBenchmarkImages:
$(for t in 1.35.0-glibc 1-uclibc 1 1-glibc 1-musl; do echo "  - $reg/docker/library/busybox:$t"; done)
podContainerStartBenchmarkTimeoutSeconds: 10
YAML

sleep "${IDLE_SETTLE:-5}"
rss "before(idle)" >"$out/rss.txt"
t0=$(date +%s)
export TMPDIR=${TMPDIR:-/tmp}
# BENCH_SKIP: a ginkgo skip pattern, e.g. "operations on Image" for a PARALLEL=8 run against a
# runtime that fails when one client removes an image another is pulling.
skip=()
[ -z "${BENCH_SKIP:-}" ] || skip=(-ginkgo.skip "$BENCH_SKIP")
timeout --kill-after=30 "${BENCH_OUTER_TIMEOUT:-900}" critest -benchmark "${skip[@]}" \
  -runtime-endpoint "$endpoint" -image-endpoint "$endpoint" \
  -test-images-file "$out/test-images.yaml" -benchmarking-params-file "$out/params.yaml" \
  -benchmarking-output-dir "$out" -ginkgo.no-color -ginkgo.timeout "${BENCH_TIMEOUT:-14m}" \
  -ginkgo.json-report "$out/report.json" -ginkgo.junit-report "$out/junit.xml" \
  >"$out/critest-bench.log" 2>&1
status=$?
wall=$(($(date +%s) - t0))
rss "after-bench" >>"$out/rss.txt"
sleep "${IDLE_SETTLE:-5}"
rss "after+${IDLE_SETTLE:-5}s" >>"$out/rss.txt"
python3 "$here/bench_summary.py" "$out" "$status" "$wall" >"$out/bench-summary.txt"
cat "$out/rss.txt" >>"$out/bench-summary.txt"
cat "$out/bench-summary.txt"
