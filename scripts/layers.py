#!/usr/bin/env python3
"""Checks that a crate's top-level modules import each other without a circle.

Usage: scripts/layers.py [CRATE_SRC ...]   (default: crates/daemon/src)

Each file under SRC belongs to the top-level module named by its first path component
(`sources/x11.rs` → `sources`, `journal.rs` → `journal`; `lib.rs` is the root and `bin/` holds
binaries, both ignored). An
edge A → B is any `crate::B` path written in a file of A, in code or a `use` line, outside
`#[cfg(test)]` modules and comments. Test modules may reach anywhere: they are not the layering.
Prints the layers (each module after everything it imports) or every circle found, and exits 1
on a circle.
"""
import os
import re
import sys

PATH = re.compile(r"\bcrate::(?:\{\s*)?([a-z_][a-z0-9_]*)")
# `use crate::{a::X, b::Y}` names several modules at once.
GROUP = re.compile(r"\bcrate::\{([^;]*)\}", re.S)


def code_of(text):
    """The text with comments and #[cfg(test)] items (to the end of their braces) removed."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        j = m.end()
        semi, brace = text.find(";", j), text.find("{", j)
        if brace == -1 or (semi != -1 and semi < brace):
            i = semi + 1  # `#[cfg(test)] mod tests;` or a test-only `use`
            continue
        depth, k = 0, brace
        while k < len(text):
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            k += 1
            if depth == 0:
                break
        i = k
    out.append(text[i:])
    return "".join(out)


def graph(src):
    modules, edges = set(), {}
    test_files = set()
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, src)
            if rel == "lib.rs" or rel.startswith("bin" + os.sep):
                continue  # the crate root, and binaries (which use the library, not its layers)
            top = rel.split(os.sep)[0].removesuffix(".rs")
            modules.add(top)
            if re.search(r"(^|/)tests?(_\w+)?\.rs$", rel) or "/tests/" in rel:
                test_files.add(rel)
                continue
            code = code_of(open(path, encoding="utf-8").read())
            names = set(PATH.findall(code))
            for g in GROUP.findall(code):
                names |= {n.split("::")[0].strip() for n in g.split(",") if n.strip()}
            for n in names:
                if n and n != top and n != "self":
                    edges.setdefault(top, {}).setdefault(n, set()).add(rel)
    return modules, edges


def circles(modules, edges):
    """Tarjan's strongly connected components with more than one module."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in modules:
                continue
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
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(modules):
        if v not in index:
            visit(v)
    return out


def layers(modules, edges):
    depth = {}

    def d(v, seen=()):
        if v in depth:
            return depth[v]
        below = [d(w, seen + (v,)) for w in edges.get(v, {}) if w in modules and w not in seen]
        depth[v] = 1 + max(below, default=-1)
        return depth[v]

    for v in modules:
        d(v)
    by = {}
    for v, k in depth.items():
        by.setdefault(k, []).append(v)
    return [sorted(by[k]) for k in sorted(by)]


def main():
    srcs = sys.argv[1:] or ["crates/daemon/src"]
    bad = False
    for src in srcs:
        modules, edges = graph(src)
        found = circles(modules, edges)
        if found:
            bad = True
            print(f"{src}: {len(found)} import circle(s):")
            for comp in found:
                print(f"  {' ↔ '.join(comp)}")
                for a in comp:
                    for b in sorted(edges.get(a, {})):
                        if b in comp:
                            files = ", ".join(sorted(edges[a][b]))
                            print(f"    {a} → {b}  ({files})")
        else:
            print(f"{src}: no import circle; layers, lowest first:")
            for i, layer in enumerate(layers(modules, edges)):
                print(f"  {i}: {' '.join(layer)}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
