#!/usr/bin/env python3
"""Check that each crate's module graph runs one way (no import cycle).

Reads every `crate::` and `super::` reference outside comments, string
literals and test modules (`#[cfg(test)] mod ...`, `tests.rs` files, which
may use anything), at the granularity of top-level modules (`src/x.rs` or
`src/x/mod.rs` is module `x`; `src/x/y.rs` belongs to `x`). Within a
directory module, its submodules are checked the same way.

Usage: scripts/module_graph.py [--print] [CRATE_SRC_DIR ...]
Defaults to `core/src` and `src`. Exits 1 and prints the cycle if one exists.
"""
import re
import sys
from pathlib import Path

REF = re.compile(r"\b(crate|super)::(\{[^}]*\}|[a-z_][a-z0-9_]*)", re.S)
NAME = re.compile(r"(?:^|[{,\s])([a-z_][a-z0-9_]*)")


def strip(text):
    """Drop comments and string literals (enough for our sources)."""
    text = re.sub(r"r#*\"(?:.|\n)*?\"#*", '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    text = re.sub(r"/\*(?:.|\n)*?\*/", "", text)
    return re.sub(r"//[^\n]*", "", text)


def drop_test_modules(text):
    """Remove `#[cfg(test)] mod NAME { ... }` blocks: tests may use anything."""
    out, pos = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text):
        if m.start() < pos:
            continue
        out.append(text[pos:m.start()])
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        pos = i
    out.append(text[pos:])
    return "".join(out)


def refs(text):
    out = set()
    for kind, target in REF.findall(drop_test_modules(strip(text))):
        if target.startswith("{"):
            for part in target[1:-1].split(","):
                part = part.strip()
                if part and part != "self":
                    out.add((kind, re.split(r"::|\s", part)[0]))
        else:
            out.add((kind, target))
    return out


def graph(root):
    """Edges between the modules directly under `root`."""
    mods = {}
    for p in sorted(root.rglob("*.rs")):
        rel = p.relative_to(root).parts
        if rel in (("lib.rs",), ("main.rs",)) or p.name == "tests.rs" and len(rel) > 1:
            continue
        top = rel[0][:-3] if len(rel) == 1 else rel[0]
        mods.setdefault(top, []).append(p)
    edges = {m: set() for m in mods}
    for m, files in mods.items():
        for f in files:
            for kind, target in refs(f.read_text()):
                # `super::` from a top-level file means the crate root;
                # from a submodule it means the parent (same module).
                if kind == "crate" and target in mods and target != m:
                    edges[m].add(target)
    return edges


def subgraph(d):
    """Edges between the submodules of directory module `d`."""
    subs = {p.stem: p for p in d.glob("*.rs") if p.name not in ("mod.rs", "tests.rs")}
    edges = {s: set() for s in subs}
    for s, p in subs.items():
        for kind, target in refs(p.read_text()):
            if kind == "super" and target in subs and target != s:
                edges[s].add(target)
    return edges


# Modules that must depend on nothing else in their crate: the bottom
# layers everything else builds on (see CONTRIBUTING.md).
LEAVES = {
    "core/src": {"layout", "clock", "epoch"},
    "src": {"gucs", "shmem", "errors", "datadir"},
}


def cycle(edges):
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(edges[n]):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def main(argv):
    show = "--print" in argv
    roots = [Path(a) for a in argv if not a.startswith("--")] or [Path("core/src"), Path("src")]
    failed = False
    for root in roots:
        graphs = [(str(root), graph(root))]
        graphs += [(str(d), subgraph(d)) for d in sorted(root.iterdir())
                   if d.is_dir() and any(d.glob("*.rs"))]
        for leaf in sorted(LEAVES.get(str(root), ())):
            if graphs[0][1].get(leaf):
                print(f"{root}: {leaf} must depend on nothing else in the crate, "
                      f"but uses {', '.join(sorted(graphs[0][1][leaf]))}", file=sys.stderr)
                failed = True
        for name, edges in graphs:
            if show:
                print(f"{name}:")
                for m in sorted(edges):
                    print(f"  {m} -> {', '.join(sorted(edges[m])) or '(nothing)'}")
            found = cycle(edges)
            if found:
                print(f"module cycle in {name}: {' -> '.join(found)}", file=sys.stderr)
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
