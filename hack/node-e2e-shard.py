#!/usr/bin/env python3
"""Picks one shard of a node e2e form: reads the JSON report of a dry run of e2e_node.test with
the form's focus and skip, orders its specs by their full text, and prints a focus regex that
selects exactly the specs whose position modulo N is K-1 (round robin, so the slow groups
spread over the shards; the order, and so each shard, holds for a given e2e_node.test).
    node-e2e-shard.py DRY_RUN_REPORT.json K N"""
import json
import re
import sys


def spec_texts(report):
    """(suite description, [spec text as ginkgo matches it]) of the specs the dry run selected."""
    suite = json.load(open(report))[0]
    texts = []
    for spec in suite.get("SpecReports") or []:
        if spec.get("LeafNodeType") != "It" or spec.get("State") != "passed":
            continue
        parts = (spec.get("ContainerHierarchyTexts") or []) + [spec.get("LeafNodeText", "")]
        texts.append(" ".join(p for p in parts if p))
    return suite.get("SuiteDescription", ""), sorted(set(texts))


def shard_focus(description, texts, k, n):
    """ginkgo matches the focus against "<suite description> <spec text>"; anchoring both ends
    keeps a spec whose text ends another's from coming along."""
    picked = texts[k - 1::n]
    prefix = re.escape(description + " ")
    return "|".join(f"^{prefix}{re.escape(t)}$" for t in picked), len(picked)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    k, n = int(sys.argv[2]), int(sys.argv[3])
    if not 1 <= k <= n:
        sys.exit(f"shard {k}/{n}: K must be 1..N")
    description, texts = spec_texts(sys.argv[1])
    if not texts:
        sys.exit(f"{sys.argv[1]}: the dry run selected no spec")
    focus, count = shard_focus(description, texts, k, n)
    print(f"shard {k}/{n}: {count} of {len(texts)} specs", file=sys.stderr)
    print(focus)


if __name__ == "__main__":
    main()
