#!/usr/bin/env python3
"""Fails when files of the crate import each other, directly or round a loop.

Every file under src/ is a module (a mod.rs is its directory's). An edge A -> B is any path
in A (a `use`, a `pub use` re-export, or a path in code) that names B or an item of B:
`crate::…`, `super::…`, `self::…`, or a path that starts with one of A's child modules. A
parent's `mod` declarations are not edges, nor are paths in test modules (`#[cfg(test)]`
files and `mod tests` blocks): a test may reach anywhere. Parents and children count like
any other pair: a mod.rs that re-exports a child's item while the child uses one of the
mod.rs's own items is a loop. Strongly connected components of more than one file are
printed, with their edges, and fail the check.

It also fails on an import that points up the layers docs/architecture.md lists (LAYERS
below; layer 4 is ordered inside too): a file may import its own layer and those beneath
it; and on a top-level module that LAYERS or the documentation's list of layers leaves out.
  hack/check-module-cycles.py [SRC]      (default: src)
"""
import os
import re
import sys

PATH = re.compile(r"(?<![\w:])(crate|super|self|[a-z_][a-z0-9_]*)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
GROUP = re.compile(r"(?<![\w:])(crate|super|self|[a-z_][a-z0-9_]*)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^}]*)\}", re.S)


# docs/architecture.md's layers, by top-level module; the crate root (lib.rs: the module list
# and SELF_EXE) may be named from anywhere. Layer 4 is ordered inside as well (its second
# figure): a module imports those of its own rank and below.
LAYERS = {
    "cri": (0, 0), "blocking": (0, 0), "crash": (0, 0),
    "model": (1, 0), "store": (1, 0), "error": (1, 0),
    "config": (2, 0),
    "policy": (3, 0),
    "cgroup": (4, 0), "checkpoint": (4, 0), "sandbox": (4, 0), "process_tree": (4, 0), "image": (4, 0),
    "network": (4, 0),
    "nri": (4, 0),
    "node": (4, 1), "oci": (4, 1),
    "monitor": (4, 2), "metrics": (4, 2),
    "streaming": (4, 3), "swap": (4, 3),
    "service": (5, 0),
    "grpc": (6, 0), "daemon": (6, 0), "client": (6, 0), "doctor": (6, 0), "service_manager": (6, 0),
}


def rank(layer):
    return f"{layer[0]}.{layer[1]}" if layer[0] == 4 else str(layer[0])


def upward(graph):
    """Imports from a file into a layer above its own."""
    out = []
    for here, tos in graph.items():
        for to in tos:
            if not here or not to:
                continue
            a, b = LAYERS.get(here[0]), LAYERS.get(to[0])
            if a is None or b is None:
                out.append((here, to, "a top-level module no layer lists"))
            elif b > a:
                out.append((here, to, f"layer {rank(a)} imports layer {rank(b)}"))
    return sorted(out)


def modules(src):
    found = {}
    for root, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs") or (root == src and name == "main.rs"):
                continue  # main.rs is the binary's crate, which imports the library by name
            rel = os.path.relpath(os.path.join(root, name), src)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib"):
                rel = rel[:-1]
            found[tuple(rel)] = os.path.join(root, name)
    return found


def strip_tests(text):
    """Drops `#[cfg(test)] mod … { … }` blocks (balanced braces) and comments."""
    text = re.sub(r"//[^\n]*", "", text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def target(mods, here, kind, segments):
    """The file a path names, or None when it is not one of the crate's (another crate's, or a
    name that is no child of `here`)."""
    if kind not in ("crate", "super", "self"):
        if here + (kind,) not in mods:
            return None
        kind, segments = "self", "::" + kind + segments
    base = {"crate": [], "super": list(here[:-1]), "self": list(here)}[kind]
    parts = segments.strip(":").split("::") if segments else []
    if kind == "super" and parts and parts[0] == "super":
        # super::super::…
        while parts and parts[0] == "super":
            base = base[:-1]
            parts = parts[1:]
    path = base + [p for p in parts if p]
    while path and tuple(path) not in mods:
        path = path[:-1]
    return tuple(path)


def edges(mods):
    graph = {m: set() for m in mods}
    for here, file in mods.items():
        text = open(file, encoding="utf-8").read()
        # A test file is `tests.rs`, or any file under a `tests/` folder.
        is_test = any(part == "tests" for part in here)
        if is_test or re.search(r"^#!\[cfg\(test\)\]", text, re.M):
            continue
        # `pub(in crate::…)` limits who sees an item: it imports nothing.
        text = re.sub(r"pub\(in [^)]*\)", "pub", strip_tests(text))
        paths = []
        for m in GROUP.finditer(text):
            for item in re.split(r"[,\s]+", m.group(3)):
                item = item.split("::")[0].strip()
                if item and item not in ("self",):
                    paths.append((m.group(1), m.group(2) + "::" + item))
        paths += [(m.group(1), m.group(2)) for m in PATH.finditer(text)]
        for kind, segments in paths:
            to = target(mods, here, kind, segments)
            if to is not None and to != here:
                graph[here].add(to)
    return graph


def cycles(graph):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "src"
    mods = modules(src)
    graph = edges(mods)
    loops = cycles(graph)
    name = lambda m: "::".join(m) or "crate"
    for loop in loops:
        members = set(loop)
        print(f"loop of {len(loop)} files:")
        for m in loop:
            print(f"  {name(m)} -> {', '.join(sorted(name(t) for t in graph[m] if t in members))}")
    ups = upward(graph)
    for here, to, why in ups:
        print(f"upward import: {name(here)} -> {name(to)} ({why})")
    # Every top-level module has a layer, and docs/architecture.md's list of layers names it.
    tops = sorted({m[0] for m in mods if m})
    unlisted = [t for t in tops if t not in LAYERS]
    doc = os.path.join(os.path.dirname(os.path.abspath(src)), "docs", "architecture.md")
    layers_text = open(doc, encoding="utf-8").read().split("Files import one way")[-1].split("No file imports")[0]
    undocumented = [t for t in tops if f"`{t}`" not in layers_text]
    for t in unlisted:
        print(f"no layer for the top-level module {t} (LAYERS)")
    for t in undocumented:
        print(f"docs/architecture.md's layers do not name `{t}`")

    count = sum(len(v) for v in graph.values())
    print(f"{len(mods)} files, {count} imports, {len(loops)} loop(s), {len(ups)} upward import(s)")
    return 1 if loops or ups or unlisted or undocumented else 0


if __name__ == "__main__":
    sys.exit(main())
