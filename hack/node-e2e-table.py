#!/usr/bin/env python3
"""Tabulates node e2e runs (hack/node-e2e.sh's reports) for docs/testing.md: one row per spec
group (the suite's top-level describe, without its labels), one column per run, each cell
`passed/failed/skipped` of the specs that ran there, and a last row for the Summary API swap
check. The shards of one form (`<form>-shardKofN`) make one column, which says how many of
them ran. Also names every spec one run passed that another one, run on the same set, failed.
    node-e2e-table.py [DIR]    DIR default /var/tmp/swapcri-node-e2e (one <runtime>-<driver>-<form>/report each)
    node-e2e-table.py --totals DIR RUNTIME
                               the long form's shards of RUNTIME: which are done, and the totals so far"""
import collections
import json
import os
import re
import sys

FAILED = {"failed", "panicked", "timedout", "interrupted", "aborted"}


def group_of(spec):
    texts = spec.get("ContainerHierarchyTexts") or [""]
    name = re.sub(r"\s*\[[^\]]*\]", "", texts[0]).strip()
    return name or "(suite)"


def load(report):
    """{spec name: (group, state)} of the specs that ran (not left out by the focus)."""
    specs = {}
    for suite in json.load(open(report)):
        for spec in suite.get("SpecReports") or []:
            if spec.get("LeafNodeType") != "It":
                continue
            state = spec.get("State")
            failure = spec.get("Failure") or {}
            if state == "skipped" and not failure.get("Message"):
                continue  # left out by the focus
            name = " ".join((spec.get("ContainerHierarchyTexts") or []) + [spec.get("LeafNodeText", "")])
            specs[name] = (group_of(spec), state)
    return specs


def swap_check(report_dir):
    path = os.path.join(report_dir, "summary-swap.txt")
    if not os.path.exists(path):
        return "not run"
    results = [line.split()[2] for line in open(path) if line.startswith("E2E-RESULT ")]
    return f"{results.count('PASS')}/{results.count('FAIL')}" if results else "no result"


def long_totals(root, runtime):
    """One line per place of the long form: shards done of N, specs passed/failed/skipped, time."""
    places = {}
    for name in sorted(os.listdir(root)):
        m = re.fullmatch(re.escape(runtime) + r"-(\w+)-long-(host|vm)-shard(\d+)of(\d+)(-cri-stats-off)?", name)
        summary = os.path.join(root, name, "report", "summary.txt")
        if not m or not os.path.exists(summary):
            continue
        text = open(summary).read()
        total = re.search(r"^TOTAL (\d+)\s+PASSED (\d+)\s+FAILED (\d+)\s+SKIPPED (\d+)", text, re.M)
        self_skipped = re.search(r"^SELF-SKIPPED (\d+)", text, re.M)
        wall = re.search(r"wall=(\d+)s", text)
        key = (m.group(2), m.group(1), m.group(4), m.group(5) or "")
        done, counts = places.setdefault(key, (set(), collections.Counter()))
        done.add(int(m.group(3)))
        if total:
            counts.update(passed=int(total.group(2)), failed=int(total.group(3)))
        counts.update(skipped=int(self_skipped.group(1)) if self_skipped else 0, seconds=int(wall.group(1)) if wall else 0)
    if not places:
        print(f"long form, {runtime}: no shard done yet")
    overall = collections.Counter()
    for (place, driver, n, suffix), (done, counts) in sorted(places.items()):
        missing = sorted(set(range(1, int(n) + 1)) - done)
        print(f"long form, {runtime} on the {place} ({driver}{suffix}): {len(done)} of {n} shards done"
              f"{' (not yet: ' + ', '.join(map(str, missing)) + ')' if missing else ''}; "
              f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped; {counts['seconds']} s")
        overall.update(counts)
    if len(places) > 1:
        print(f"long form, {runtime} so far: {overall['passed']} passed, {overall['failed']} failed, "
              f"{overall['skipped']} skipped; {overall['seconds']} s")


def main():
    if sys.argv[1:2] == ["--totals"]:
        if len(sys.argv) != 4:
            sys.exit(__doc__)
        return long_totals(sys.argv[2], sys.argv[3])
    root = sys.argv[1] if len(sys.argv) > 1 else "/var/tmp/swapcri-node-e2e"
    runs, shards = {}, {}
    for name in sorted(os.listdir(root)):
        report = os.path.join(root, name, "report", "report.json")
        if not os.path.exists(report):
            continue
        specs, check = load(report), swap_check(os.path.join(root, name, "report"))
        m = re.fullmatch(r"(.*)-shard(\d+)of(\d+)(-cri-stats-off)?", name)
        if not m:
            runs[name] = (specs, check)
            continue
        column = m.group(1) + (m.group(4) or "")
        seen, merged, checks, total = shards.setdefault(column, (set(), {}, [], m.group(3)))
        seen.add(m.group(2))
        merged.update(specs)
        checks.append(check)
    for column, (seen, merged, checks, total) in shards.items():
        runs[f"{column} ({len(seen)} of {total} shards)"] = (merged, " ".join(checks))
    if not runs:
        sys.exit(f"no reports under {root}")
    groups = sorted({group for specs, _ in runs.values() for group, _ in specs.values()})
    print("| spec group | " + " | ".join(runs) + " |")
    print("| --- |" + " --- |" * len(runs))
    for group in groups:
        cells = []
        for specs, _ in runs.values():
            counts = collections.Counter(state for g, state in specs.values() if g == group)
            failed = sum(v for k, v in counts.items() if k in FAILED)
            cells.append(f"{counts['passed']}/{failed}/{counts['skipped']}" if counts else "-")
        print(f"| {group} | " + " | ".join(cells) + " |")
    print("| Summary API swap = memory.swap.current (hack/vm/summary-swap.sh) | "
          + " | ".join(check for _, check in runs.values()) + " |")
    print()
    for a, (specs_a, _) in runs.items():
        for b, (specs_b, _) in runs.items():
            for name, (_, state) in specs_a.items():
                if state == "passed" and specs_b.get(name, (None, None))[1] in FAILED:
                    print(f"passed in {a}, failed in {b}: {name}")


if __name__ == "__main__":
    main()
