#!/usr/bin/env python3
"""Fails when a file of the repository refers to a path outside it: everything a script, a
test or the build needs must come with a clone (or from Debian, crates.io or PyPI).

It looks at every relative path that climbs (`../x`, `$(dirname "$0")/../x`) in the tracked
scripts and build files, and in Rust code joined to CARGO_MANIFEST_DIR, and resolves it from
the file's own directory and from the repository root (the scripts run from there). A path passes when one of the two stays inside
the repository and names something that is there (or whose directory is there).
    hack/check-self-contained.py [ROOT]
"""
import os
import re
import subprocess
import sys

# Where the repository's own programs live.
SCANNED = ("hack/", "tests/", ".ci/", "benches/", "contrib/", "src/", "build.rs", "Cargo.toml", "Dockerfile")
# `../x`, not preceded by anything that makes it part of a longer path or a variable.
CLIMB = re.compile(r"(?<![\w$)}/.])((?:\.\./)+[\w.\-/]*)")
# `$(dirname "$0")/../x` and `$(dirname "${BASH_SOURCE[0]}")/../x`: from the file's directory.
# A string that climbs, in a line that joins it to CARGO_MANIFEST_DIR.
MANIFEST_CLIMB = re.compile(r"\"/?((?:\.\./)+[\w.\-/]*)")
FROM_SCRIPT = re.compile(r"\$\(dirname \"\$(?:0|\{BASH_SOURCE\[0\]\})\"\)/((?:\.\./?)+[\w.\-/]*)")


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, check=True).stdout
        files = out.splitlines()
    except (OSError, subprocess.CalledProcessError):
        files = [os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs]
    return [f for f in files if f.startswith(SCANNED) or f in SCANNED]


def inside(root, path):
    return os.path.commonpath([root, path]) == root


def lands_inside(root, base, rel):
    path = os.path.normpath(os.path.join(base, rel))
    return inside(root, path) and (os.path.exists(path) or os.path.isdir(os.path.dirname(path)))


def problems(root, name, text):
    if name.endswith(".rs"):
        yield from rust_problems(root, name, text)
        return
    base = os.path.dirname(os.path.join(root, name))
    for number, line in enumerate(text.splitlines(), 1):
        for rel in FROM_SCRIPT.findall(line):
            if not inside(root, os.path.normpath(os.path.join(base, rel))):
                yield f"{name}:{number}: {rel} (from the script's directory) leaves the repository"
        for rel in CLIMB.findall(line):
            if not (lands_inside(root, base, rel) or lands_inside(root, root, rel)):
                yield f"{name}:{number}: {rel} names nothing inside the repository"


def rust_problems(root, name, text):
    """Rust code names the repository's files from CARGO_MANIFEST_DIR (its root); elsewhere a
    climbing path in Rust is test data (a path traversal to refuse), not a reference."""
    for number, line in enumerate(text.splitlines(), 1):
        if "CARGO_MANIFEST_DIR" not in line:
            continue
        for rel in MANIFEST_CLIMB.findall(line):
            if not lands_inside(root, root, rel):
                yield f"{name}:{number}: {rel} (from the crate's root) names nothing inside the repository"


def main():
    root = os.path.realpath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    found, checked = [], 0
    for name in tracked_files(root):
        try:
            with open(os.path.join(root, name), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        checked += 1
        found.extend(problems(root, name, text))
    for p in found:
        print(p)
    print(f"{checked} files checked: {len(found)} paths outside the repository")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
