#!/usr/bin/env python3
"""Summarises a ginkgo JSON report (critest's, the node e2e suite's): one TOTAL line, then each failure with its
message and place, then each spec that skipped itself with its reason.
    summary.py REPORT.json EXIT_STATUS WALL_SECONDS"""
import collections
import json
import os
import sys

FAILED_STATES = {"failed", "panicked", "timedout", "interrupted", "aborted"}


def first_line(text):
    lines = (text or "").strip().splitlines()
    return lines[0] if lines else ""


def main():
    report, status, wall = sys.argv[1:4]
    print(f"suite exit={status} wall={wall}s")
    if not os.path.exists(report):
        print(f"TOTAL 0  PASSED 0  FAILED 1  SKIPPED 0  (no report: suite exit {status})")
        return
    counts = collections.Counter()
    failed, skipped = [], []
    for suite in json.load(open(report)):
        for spec in suite.get("SpecReports") or []:
            state = spec.get("State")
            failure = spec.get("Failure") or {}
            if spec.get("LeafNodeType") != "It":
                # A suite-level node (BeforeSuite, …) that failed fails the run.
                if state not in ("passed", "skipped"):
                    failed.append((spec.get("LeafNodeType", "suite node"), first_line(failure.get("Message"))))
                    counts["failed"] += 1
                continue
            name = " ".join((spec.get("ContainerHierarchyTexts") or []) + [spec.get("LeafNodeText", "")])
            counts[state] += 1
            if state in FAILED_STATES:
                where = failure.get("Location") or {}
                place = f"{os.path.basename(where.get('FileName', ''))}:{where.get('LineNumber', '')}"
                failed.append((name, f"{first_line(failure.get('Message'))}  [{place}]"))
            elif state == "skipped" and failure.get("Message"):
                skipped.append((name, first_line(failure.get("Message"))))
    total = sum(counts.values())
    nfailed = sum(v for k, v in counts.items() if k in FAILED_STATES)
    print(f"TOTAL {total}  PASSED {counts['passed']}  FAILED {nfailed}  SKIPPED {counts['skipped']}")
    # Skipped specs include those a focus left out; these skipped themselves while running.
    print(f"SELF-SKIPPED {len(skipped)}")
    print("\nFAILED:")
    for name, why in failed:
        print(f"  - {name}\n      {why}")
    print("\nSKIPPED by the spec itself:")
    for name, why in skipped:
        print(f"  - {name}\n      {why}")


if __name__ == "__main__":
    main()
