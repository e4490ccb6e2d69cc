#!/usr/bin/env python3
"""Per-operation latencies (ms) from critest's benchmark files, and the benchmark specs'
own report entries.
    bench_summary.py OUTDIR EXIT_STATUS WALL_SECONDS"""
import json
import os
import re
import statistics
import sys

SETS = [("PodSandbox lifecycle", "pod_benchmark_data.json"),
        ("Container lifecycle", "container_benchmark_data.json"),
        ("Image lifecycle", "image_lifecycle_benchmark_data.json"),
        ("Image listing", "image_listing_benchmark_data.json")]


def percentile(values, p):
    """Linear interpolation between the two nearest ranks."""
    values = sorted(values)
    rank = (len(values) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (rank - low)


def row(name, ms):
    figures = [min(ms), statistics.median(ms)] + [percentile(ms, p) for p in (90, 95, 99)] + [max(ms), statistics.mean(ms)]
    return f"  {name:<18}{len(ms):>4}" + "".join(f"{v:>9.2f}" for v in figures)


def main():
    out, status, wall = sys.argv[1:4]
    print(f"critest -benchmark exit={status} wall={wall}s")
    header = f"  {'operation':<18}{'n':>4}" + "".join(f"{h:>9}" for h in ("min", "median", "p90", "p95", "p99", "max", "mean")) + "   (ms)"
    for title, name in SETS:
        path = os.path.join(out, name)
        if not os.path.exists(path):
            print(f"\n{title}: no data ({name} missing)")
            continue
        data = json.load(open(path))
        points = data["datapoints"]
        print(f"\n{title}: {len(points)} samples, parallel={data.get('numParallel')}")
        print(header)
        for i, op in enumerate(data["operationsNames"]):
            ms = [p["operationsDurationsNs"][i] / 1e6 for p in points]
            print(row(op, ms) if ms else f"  {op:<18}   0")
        if points:
            print(row("(whole cycle)", [(p["endTime"] - p["startTime"]) / 1e6 for p in points]))
    report = os.path.join(out, "report.json")
    if not os.path.exists(report):
        return
    print("\nSpecs:")
    for suite in json.load(open(report)):
        for spec in suite.get("SpecReports") or []:
            if spec.get("LeafNodeType") != "It" or "benchmark" not in spec.get("LeafNodeText", ""):
                continue
            name = " ".join((spec.get("ContainerHierarchyTexts") or []) + [spec.get("LeafNodeText", "")])
            message = ((spec.get("Failure") or {}).get("Message") or "").strip().splitlines()
            print(f"  [{spec.get('State')}] {name} ({spec.get('RunTime', 0) / 1e9:.1f}s)"
                  + (f"  -- {message[0]}" if message else ""))
            for entry in spec.get("ReportEntries") or []:
                text = re.sub(r"\{\{/?[a-z]*\}\}", "", (entry.get("Value") or {}).get("Representation") or "")
                if text:
                    print("    " + text.rstrip().replace("\n", "\n    "))


if __name__ == "__main__":
    main()
