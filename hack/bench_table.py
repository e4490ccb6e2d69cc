#!/usr/bin/env python3
"""Side-by-side table of hack/bench.sh's CRI benchmark: medians in ms per runtime, the
ratio of the first runtime to the best of the others (the peers), and the target that ratio
(or value) must meet.
    bench_table.py OUTDIR swapcri [PEER ...]
OUTDIR/<runtime>/ holds the kit's raw files (pod_benchmark_data.json, ...), rss.txt,
rss-idle-after.txt, pull-layered.txt and pull-single.txt (one pull's wall time in ms per line),
scratch.txt (one from-scratch duration in ms per line) and list-stats.txt
(benches/list_stats.rs against that runtime: the list calls' medians at 110 pods)."""
import json
import os
import re
import statistics
import sys

outdir, runtimes = sys.argv[1], sys.argv[2:]

# (row label, file, operations summed per sample (None: the whole sample), target)
# A target "x0.4" is a ratio to the best peer's median, "1ms" an absolute bound on swapcri's.
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
    ("whole container cycle", "container", None, "x0.45"),
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


# The list calls at 110 pods (list-stats.txt) and swapcri's bound on each.
LIST_CALLS = [("ListContainers", "x1"), ("ListContainerStats", "20ms"), ("ListPodSandboxStats", "10ms")]


def list_median(runtime, call):
    path = os.path.join(outdir, runtime, "list-stats.txt")
    for line in open(path) if os.path.exists(path) else []:
        m = re.match(rf"\s+{call}\s+([0-9.]+) ms", line)
        if m:
            return [float(m.group(1))]
    return []


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


def verdict(target, mine, best):
    if target is None or mine is None:
        return ""
    if target.endswith("ms"):
        ok = mine <= float(target[:-2])
        return f"<= {target}: {'ok' if ok else 'MISSED'}"
    if best is None:
        return f"{target} (no peer)"
    ok = mine <= float(target[1:]) * best
    return f"<= {target}: {'ok' if ok else 'MISSED'}"


def fmt(v):
    return "-" if v is None else f"{v:.2f}"


def parallel(runtime):
    path = os.path.join(outdir, runtime, "params.yaml")
    for line in open(path) if os.path.exists(path) else []:
        if line.startswith("podsNumberParallel:"):
            return int(line.split(":")[1])
    return None


def main():
    first, peers = runtimes[0], runtimes[1:]
    head = f"{'operation (median ms)':<26}" + "".join(f"{r:>12}" for r in runtimes)
    print(head + (f"{'ratio':>8}" if peers else "") + "   target (against the best peer)")
    rows = [(label, [samples(r, kind, ops) for r in runtimes], target) for label, kind, ops, target in ROWS]
    rows.append(("pull, 5 layers 50 MB", [lines_of(r, "pull-layered.txt") for r in runtimes], "x0.8"))
    rows.append(("pull, 1 layer 50 MB", [lines_of(r, "pull-single.txt") for r in runtimes], "x0.8"))
    rows.append(("pod + container, scratch", [lines_of(r, "scratch.txt") for r in runtimes], "x0.5"))
    for call, bound in LIST_CALLS:
        rows.append((f"{call}, 110 pods", [list_median(r, call) for r in runtimes], bound))
    for label, per_runtime, target in rows:
        medians = [statistics.median(v) if v else None for v in per_runtime]
        mine = medians[0]
        best = min((m for m in medians[1:] if m is not None), default=None)
        line = f"{label:<26}" + "".join(f"{fmt(m):>12}" for m in medians)
        if peers:
            line += f"{(f'{mine / best:.2f}' if mine is not None and best else '-'):>8}"
        print(line + "   " + verdict(target, mine, best))
    wide = parallel(first) or 1
    for kind in ("pod", "container"):
        values = [throughput(r, kind) for r in runtimes]
        mine, best = values[0], max((v for v in values[1:] if v is not None), default=None)
        line = f"{kind + ' ops/s (more is better)':<26}" + "".join(f"{fmt(v):>12}" for v in values)
        if peers:
            ratio = f"{mine / best:.2f}" if mine and best else "-"
            want = 2 if wide >= 8 else 1
            ok = mine is not None and best is not None and mine >= want * best
            line += f"{ratio:>8}   >= x{want} at PARALLEL={wide}: {'ok' if ok else 'MISSED'}"
        print(line)
    print(f"{'(samples: scratch)':<26}" + "".join(f"{len(v):>12}" for v in rows[-1 - len(LIST_CALLS)][1]))
    idles, laters = {}, {}
    for runtime in runtimes:
        idle, after, later = rss(runtime)
        idles[runtime], laters[runtime] = idle, later
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
    best = min((v for r, v in idles.items() if r != first and v is not None), default=None)
    if idle is not None and best is not None:
        print(f"  {first} idle <= 1/3 of the best peer's ({best / 3:.2f} MiB): {'ok' if idle <= best / 3 else 'MISSED'}")
    best = min((v for r, v in laters.items() if r != first and v is not None), default=None)
    if later is not None and best is not None:
        print(f"  {first} after the run and the idle wait <= 1/3 of the best peer's ({best / 3:.2f} MiB): "
              f"{'ok' if later <= best / 3 else 'MISSED'}")
    if idle is not None:
        print(f"  {first} after the run and the idle wait <= 20 MiB: "
              f"{'ok' if later is not None and later <= 20 else 'MISSED'}")


main()
