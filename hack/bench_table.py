#!/usr/bin/env python3
"""Side-by-side table of hack/bench.sh's CRI benchmark: medians in ms per runtime, the
ratio of the first runtime to the second, and the target that ratio (or value) must meet.
    bench_table.py OUTDIR swapcri [containerd]
OUTDIR/<runtime>/ holds the kit's raw files (pod_benchmark_data.json, ...), rss.txt,
rss-idle-after.txt and scratch.txt (one from-scratch duration in ms per line)."""
import json
import os
import re
import statistics
import sys

outdir, runtimes = sys.argv[1], sys.argv[2:]

# (row label, file, operations summed per sample (None: the whole sample), target)
# A target "x0.4" is a ratio to containerd, "1ms" an absolute bound on swapcri's median.
ROWS = [
    ("RunPodSandbox", "pod", ["CreatePod"], None),
    ("PodSandboxStatus", "pod", ["StatusPod"], "1ms"),
    ("StopPodSandbox", "pod", ["StopPod"], "x1"),
    ("RemovePodSandbox", "pod", ["RemovePod"], None),
    ("whole pod cycle", "pod", None, "x0.4"),
    ("CreateContainer", "container", ["CreateContainer"], None),
    ("StartContainer", "container", ["StartContainer"], None),
    ("Create + Start", "container", ["CreateContainer", "StartContainer"], "x0.6"),
    ("ContainerStatus", "container", ["StatusContainer"], "1ms"),
    ("StopContainer", "container", ["StopContainer"], None),
    ("RemoveContainer", "container", ["RemoveContainer"], "x1"),
    ("whole container cycle", "container", None, "x0.6"),
    ("PullImage", "image_lifecycle", ["PullImage"], None),
    ("ImageStatus", "image_lifecycle", ["StatusImage"], None),
    ("RemoveImage", "image_lifecycle", ["RemoveImage"], None),
    ("ListImages", "image_listing", ["ListImages"], None),
]


def samples(runtime, kind, ops):
    path = os.path.join(outdir, runtime, f"{kind}_benchmark_data.json")
    if not os.path.exists(path):
        return []
    data = json.load(open(path))
    names = data["operationsNames"]
    out = []
    for point in data["datapoints"]:
        if ops is None:
            out.append((point["endTime"] - point["startTime"]) / 1e6)
        else:
            out.append(sum(point["operationsDurationsNs"][names.index(op)] for op in ops) / 1e6)
    return out


def throughput(runtime, kind):
    """CRI operations per second over the whole benchmark of `kind` (first start to last end)."""
    path = os.path.join(outdir, runtime, f"{kind}_benchmark_data.json")
    if not os.path.exists(path):
        return None
    data = json.load(open(path))
    points = data["datapoints"]
    if not points:
        return None
    wall = (max(p["endTime"] for p in points) - min(p["startTime"] for p in points)) / 1e9
    return len(points) * len(data["operationsNames"]) / wall if wall > 0 else None


def lines_of(runtime, name):
    path = os.path.join(outdir, runtime, name)
    if not os.path.exists(path):
        return []
    return [float(line) for line in open(path) if line.strip()]


def rss(runtime):
    """(idle, after the run, after the idle wait) in MiB, from the files bench.sh wrote."""
    def kb(label):
        path = os.path.join(outdir, runtime, "rss.txt")
        for line in open(path) if os.path.exists(path) else []:
            if line.startswith(label):
                m = re.search(r"VmRSS=(\d+)", line)
                return int(m.group(1)) / 1024 if m else None
        return None
    after_idle = None
    path = os.path.join(outdir, runtime, "rss-idle-after.txt")
    if os.path.exists(path):
        after_idle = int(open(path).read().split()[0]) / 1024
    return kb("before"), kb("after-bench"), after_idle


def verdict(target, mine, theirs):
    if target is None or mine is None:
        return ""
    if target.endswith("ms"):
        ok = mine <= float(target[:-2])
        return f"<= {target}: {'ok' if ok else 'MISSED'}"
    if theirs is None:
        return f"{target} (no containerd)"
    ok = mine <= float(target[1:]) * theirs
    return f"<= {target}: {'ok' if ok else 'MISSED'}"


def fmt(v):
    return "-" if v is None else f"{v:.2f}"


def main():
    first = runtimes[0]
    second = runtimes[1] if len(runtimes) > 1 else None
    head = f"{'operation (median ms)':<26}{first:>11}"
    if second:
        head += f"{second:>12}{'ratio':>8}"
    print(head + "   target")
    rows = [(label, samples(first, kind, ops), samples(second, kind, ops) if second else [], target)
            for label, kind, ops, target in ROWS]
    rows.append(("pull, 5 layers 50 MB", lines_of(first, "pull-layered.txt"),
                 lines_of(second, "pull-layered.txt") if second else [], "x1"))
    rows.append(("pod + container, scratch", lines_of(first, "scratch.txt"),
                 lines_of(second, "scratch.txt") if second else [], "x0.5"))
    for label, mine, theirs, target in rows:
        m = statistics.median(mine) if mine else None
        t = statistics.median(theirs) if theirs else None
        line = f"{label:<26}{fmt(m):>11}"
        if second:
            ratio = f"{m / t:.2f}" if m is not None and t else "-"
            line += f"{fmt(t):>12}{ratio:>8}"
        print(line + "   " + verdict(target, m, t))
    for kind in ("pod", "container"):
        m, t = throughput(first, kind), throughput(second, kind) if second else None
        line = f"{kind + ' ops/s (more is better)':<26}{fmt(m):>11}"
        if second:
            ratio = f"{m / t:.2f}" if m and t else "-"
            ok = m is not None and t is not None and m >= t
            line += f"{fmt(t):>12}{ratio:>8}   >= x1: {'ok' if ok else 'MISSED'}"
        print(line)
    print(f"{'(samples: scratch)':<26}{len(rows[-1][1]):>11}" + (f"{len(rows[-1][2]):>12}" if second else ""))
    for runtime in runtimes:
        idle, after, later = rss(runtime)
        print(f"RSS {runtime}: idle {fmt(idle)} MiB, after the run {fmt(after)} MiB, "
              f"after the idle wait {fmt(later)} MiB")
        reruns = []
        n = 2
        while os.path.exists(os.path.join(outdir, runtime, f"run-{n}", "rss-idle-after.txt")):
            value = open(os.path.join(outdir, runtime, f"run-{n}", "rss-idle-after.txt")).read().split()[0]
            reruns.append(f"run {n}: {int(value) / 1024:.2f}")
            n += 1
        if reruns:
            print(f"  after each further run and the idle wait (MiB): {', '.join(reruns)}")
    idle, _, later = rss(first)
    if idle is not None:
        print(f"  {first} idle <= 12 MiB: {'ok' if idle <= 12 else 'MISSED'}; "
              f"after the run and the idle wait <= 20 MiB: {'ok' if later is not None and later <= 20 else 'MISSED'}")


main()
