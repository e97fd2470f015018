#!/usr/bin/env python3
"""Import circles between the source files of both crates (issue 37's measure).

Every `use` tree and every inline `crate::…`, `super::…`, `self::…` or `privpca_core::…` path in
a non-test file is resolved to the file of the longest module prefix it names (an item of a
module counts as that module's file; the service crate's re-exports of the core's modules and
of `protocols::power::{simulate, state}` are followed into crates/core). The strongly connected
components of that graph with more than one file are the circles. Test files (`*_tests.rs`,
`tests.rs`, `tests/` folders, `testing.rs`) are left out: a test module importing its parent
is not a layering question.

    scripts/import-circles.py            # every circle, cross-folder ones first
    scripts/import-circles.py --edges    # and the edges inside each circle
    scripts/import-circles.py --check    # exit 1 on a circle between folders, or two inside

Output: one line per circle, `folders | files`, then the counts.
"""
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = {"svc": os.path.join(ROOT, "src"), "core": os.path.join(ROOT, "crates/core/src")}
# Service-crate module paths that are the core's modules (src/lib.rs and
# src/protocols/power/mod.rs re-export them).
REEXPORTS = {
    ("algorithms",): ("core", ("algorithms",)),
    ("dataset",): ("core", ("dataset",)),
    ("federation",): ("core", ("federation",)),
    ("forecast",): ("core", ("forecast",)),
    ("ingest",): ("core", ("ingest",)),
    ("linalg",): ("core", ("linalg",)),
    ("privacy",): ("core", ("privacy",)),
    ("transparency",): ("core", ("transparency",)),
    ("protocols", "power", "simulate"): ("core", ("algorithms", "federated_power", "simulate")),
    ("protocols", "power", "state"): ("core", ("algorithms", "federated_power", "state")),
}


def is_test(path):
    base = os.path.basename(path)
    return (
        base.endswith("_tests.rs")
        or base in ("tests.rs", "testing.rs")
        or f"{os.sep}tests{os.sep}" in path
        or "_tests" + os.sep in path
    )


def modules():
    """(crate, module path) -> file, for every file, following `#[path]` attributes."""
    table = {}
    for crate, root in CRATES.items():
        for dirpath, _, names in os.walk(root):
            for name in names:
                if not name.endswith(".rs"):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)[:-3].split(os.sep)
                if rel[-1] == "mod":
                    rel = rel[:-1]
                if rel in (["lib"], ["main"]):
                    rel = []
                table[(crate, tuple(rel))] = path
    return table


USE = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.S | re.M)
INLINE = re.compile(r"\b((?:crate|super|self|privpca_core)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")


def expand(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e]."""
    tree = re.sub(r"\s+as\s+", "@", tree)
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, text):
        depth, start, parts = 0, 0, []
        for i, ch in enumerate(text):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(text[start:i])
                start = i + 1
        parts.append(text[start:])
        for part in parts:
            if not part:
                continue
            if "{" in part:
                head, rest = part.split("{", 1)
                if "}" in rest:
                    walk(prefix + head, rest[: rest.rindex("}")])
            else:
                full = (prefix + part.split("@")[0]).removesuffix("::*").removesuffix("::self")
                out.append(full)

    walk("", tree)
    return out


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//")[0] for line in text.split("\n"))


def resolve(table, crate, here, path):
    parts = [p for p in path.split("::") if p]
    if not parts:
        return None
    if parts[0] == "privpca_core":
        crate, mod = "core", []
        parts = parts[1:]
    elif parts[0] == "crate":
        mod = []
        parts = parts[1:]
    elif parts[0] in ("super", "self"):
        mod = list(here)
        while parts and parts[0] in ("super", "self"):
            if parts[0] == "super":
                mod = mod[:-1]
            parts = parts[1:]
    else:
        return None
    full = tuple(mod + parts)
    if crate == "svc":
        for k in sorted(REEXPORTS, key=len, reverse=True):
            if full[: len(k)] == k:
                crate, full = REEXPORTS[k][0], REEXPORTS[k][1] + full[len(k):]
                break
    for n in range(len(full), -1, -1):
        f = table.get((crate, full[:n]))
        if f:
            return f
    return None


def module_of(table, path):
    for (crate, mod), f in table.items():
        if f == path:
            return crate, mod
    raise KeyError(path)


def graph():
    table = modules()
    # `#[path = "x.rs"] mod name;` gives file x.rs the module path parent::name.
    inverse = {}
    for (crate, mod), f in table.items():
        inverse[f] = (crate, mod)
    for (crate, mod), f in list(table.items()):
        text = open(f, encoding="utf-8").read()
        for m in re.finditer(r'#\[path\s*=\s*"([^"]+)"\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)', text):
            target = os.path.normpath(os.path.join(os.path.dirname(f), m.group(1)))
            if target in inverse:
                inverse[target] = (crate, mod + (m.group(2),))
    table = {v: k for k, v in inverse.items()}
    edges = defaultdict(set)
    for f, (crate, mod) in inverse.items():
        if is_test(f):
            continue
        here = mod  # `super` in a/b.rs (module a::b) is module a; `self` is a::b.
        text = strip_comments(open(f, encoding="utf-8").read())
        paths = []
        for m in USE.finditer(text):
            paths.extend(expand(m.group(1)))
        paths.extend(m.group(1) for m in INLINE.finditer(text))
        for p in paths:
            p = p.replace("pub(crate)", "")
            target = resolve(table, crate, here, p)
            if target and target != f and not is_test(target):
                edges[f].add(target)
    return inverse, edges


def sccs(nodes, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def folder(f):
    """A module's folder: `x/a.rs` with its submodules in `x/a/` belongs to `x/a`."""
    own = f[:-3]
    return own if os.path.isdir(own) else os.path.dirname(f)


def main():
    inverse, edges = graph()
    nodes = [f for f in inverse if not is_test(f)]
    circles = [sorted(c) for c in sccs(nodes, edges) if len(c) > 1]
    rel = lambda f: os.path.relpath(f, ROOT)
    cross = [c for c in circles if len({folder(f) for f in c}) > 1]
    inside = [c for c in circles if c not in cross]
    for label, group in (("across folders", cross), ("inside one folder", inside)):
        for c in group:
            folders = sorted({rel(folder(f)) for f in c})
            print(f"{label}: {', '.join(folders)} | {' '.join(rel(f) for f in c)}")
            if "--edges" in sys.argv:
                for f in c:
                    inner = sorted(rel(t) for t in edges[f] if t in c)
                    print(f"    {rel(f)} -> {', '.join(inner)}")
    print(f"{len(cross)} circles across folders, {len(inside)} inside one folder, {len(nodes)} files")
    # Issue 37: no circle between folders, at most one inside a folder (with its reason written
    # in docs/design/architecture.md).
    if "--check" in sys.argv and (cross or len(inside) > 1):
        sys.exit(1)


if __name__ == "__main__":
    main()
