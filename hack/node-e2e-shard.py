#!/usr/bin/env python3
"""Picks one shard of a node e2e form: reads the JSON report of a dry run of e2e_node.test with
the form's focus and skip, orders its specs by their full text, and prints a focus regex that
selects exactly the specs whose position modulo N is K-1 (round robin, so the slow groups
spread over the shards; the order, and so each shard, holds for a given e2e_node.test).
The specs of one Ordered container stay together (its later specs read what the first ones
did): the suite's source, under --source-root (the Go module cache the binary was built
from), says which containers are Ordered.
With --place, only the specs of that place are sharded: `vm` holds the [Serial] specs (they
restart or reconfigure kubelet, which the suite does through systemd) and those matching
--vm-only (what the host lacks); `host` holds the rest.
    node-e2e-shard.py DRY_RUN_REPORT.json K N --source-root DIR [--place host|vm --vm-only REGEX]"""
import argparse
import functools
import json
import os
import re
import sys


class Source:
    """Reads the suite's source lines, to tell an Ordered container by its declaration."""

    def __init__(self, root):
        self.root = root

    @functools.lru_cache(maxsize=None)
    def lines(self, name):
        path = os.path.join(self.root, name)
        if not os.path.exists(path):
            sys.exit(f"{path}: the suite's source is not there, so its Ordered containers are unknown")
        return open(path, encoding="utf-8", errors="replace").read().splitlines()

    def ordered(self, location):
        lines = self.lines(location["FileName"])
        n = location["LineNumber"]
        return 0 < n <= len(lines) and "Ordered" in lines[n - 1]


def spec_units(report, source):
    """(suite description, [(unit, spec texts, serial)]): a unit is one spec, or every spec of one
    Ordered container (its outermost), in the order of their texts."""
    suite = json.load(open(report))[0]
    units = {}
    for spec in suite.get("SpecReports") or []:
        if spec.get("LeafNodeType") != "It" or spec.get("State") != "passed":
            continue
        parts = (spec.get("ContainerHierarchyTexts") or []) + [spec.get("LeafNodeText", "")]
        text = " ".join(p for p in parts if p)
        labels = set(spec.get("LeafNodeLabels") or [])
        for level in spec.get("ContainerHierarchyLabels") or []:
            labels.update(level or [])
        serial = "[Serial]" in text or "Serial" in labels
        locations = spec.get("ContainerHierarchyLocations") or []
        key = next((tuple((l["FileName"], l["LineNumber"]) for l in locations[: i + 1])
                    for i, l in enumerate(locations) if source.ordered(l)), text)
        texts, was_serial = units.setdefault(key, ([], False))
        texts.append(text)
        units[key] = (texts, was_serial or serial)
    ordered = sorted((sorted(texts), serial) for texts, serial in units.values())
    return suite.get("SuiteDescription", ""), ordered


def place_of(texts, serial, vm_only):
    return "vm" if serial or (vm_only and any(vm_only.search(t) for t in texts)) else "host"


def shard_focus(description, units, k, n):
    """ginkgo matches the focus against "<suite description> <spec text>"; anchoring both ends
    keeps a spec whose text ends another's from coming along."""
    picked = [t for texts in units[k - 1::n] for t in texts]
    prefix = re.escape(description + " ")
    return "|".join(f"^{prefix}{re.escape(t)}$" for t in picked), len(picked)


def main():
    parser = argparse.ArgumentParser(usage=__doc__)
    parser.add_argument("report")
    parser.add_argument("k", type=int)
    parser.add_argument("n", type=int)
    parser.add_argument("--place", choices=["host", "vm"])
    parser.add_argument("--vm-only", default="")
    parser.add_argument("--source-root", required=True)
    args = parser.parse_args()
    if not 1 <= args.k <= args.n:
        sys.exit(f"shard {args.k}/{args.n}: K must be 1..N")
    description, units = spec_units(args.report, Source(args.source_root))
    vm_only = re.compile(args.vm_only) if args.vm_only else None
    units = [texts for texts, serial in units if args.place is None or place_of(texts, serial, vm_only) == args.place]
    if not units:
        sys.exit(f"{args.report}: the dry run selected no spec{' for the ' + args.place if args.place else ''}")
    focus, count = shard_focus(description, units, args.k, args.n)
    where = f" on the {args.place}" if args.place else ""
    total = sum(len(t) for t in units)
    print(f"shard {args.k}/{args.n}{where}: {count} of {total} specs ({len(units)} units)", file=sys.stderr)
    print(focus)


if __name__ == "__main__":
    main()
