#!/usr/bin/env bash
# Runs the CRI validation suite (critest, built by hack/tools.sh) against a CRI endpoint whose
# runtime mirrors registry.k8s.io, gcr.io and docker.io to the local registry holding
# hack/critest/images.sh's images, and summarises it.
#   hack/critest/run.sh ENDPOINT OUTDIR
# OUTDIR gets critest.log, report.json, junit.xml and summary.txt (a TOTAL … PASSED … FAILED …
# line, then each failure and each spec that skipped itself, with the reason).
# Environment: FOCUS and SKIP (ginkgo regexes), RUNTIME_HANDLER (every spec on that handler),
# NRI_SOCKET (run the NRI specs against it), CRITEST_TIMEOUT (default 40m).
# Always skipped: "public image with digest should be pulled and removed" pins a manifest
# digest that exists only in the upstream registry.
set -uo pipefail
endpoint=${1:?usage: $0 ENDPOINT OUTDIR}
out=$(mkdir -p "${2:?usage: $0 ENDPOINT OUTDIR}" && cd "$2" && pwd)
skip='public image with digest should be pulled and removed'
[ -n "${SKIP:-}" ] && skip+="|$SKIP"
args=(-runtime-endpoint "$endpoint" -image-endpoint "$endpoint" -ginkgo.no-color
  -ginkgo.timeout "${CRITEST_TIMEOUT:-40m}" -ginkgo.skip "$skip"
  -ginkgo.junit-report "$out/junit.xml" -ginkgo.json-report "$out/report.json")
[ -n "${FOCUS:-}" ] && args+=(-ginkgo.focus "$FOCUS")
[ -n "${RUNTIME_HANDLER:-}" ] && args+=(-runtime-handler "$RUNTIME_HANDLER")
[ -n "${NRI_SOCKET:-}" ] && args+=(-nri-socket "$NRI_SOCKET")
rm -f "$out/report.json"
# critest puts seccomp profiles and log directories under TMPDIR.
export TMPDIR=${TMPDIR:-/tmp}
t0=$(date +%s)
# A guard above ginkgo's own timeout, for a runtime that stops answering.
timeout --kill-after=60 "${CRITEST_OUTER_TIMEOUT:-2700}" critest "${args[@]}" >"$out/critest.log" 2>&1
status=$?
python3 "$(dirname "$0")/summary.py" "$out/report.json" "$status" "$(($(date +%s) - t0))" >"$out/summary.txt"
grep -m1 '^TOTAL' "$out/summary.txt"
