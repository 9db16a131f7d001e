#!/usr/bin/env python3
"""Check that each crate's module graph runs one way (no import cycle).

Reads every `crate::` and `super::` reference outside comments, string
literals and test modules (`#[cfg(test)] mod ...`, `tests.rs` files, which
may use anything), at the granularity of top-level modules (`src/x.rs` or
`src/x/mod.rs` is module `x`; `src/x/y.rs` belongs to `x`). Within a
directory module, its submodules are checked the same way.

The extension's `src/` is also checked against its rooms (CONTRIBUTING.md,
"Where code lives"): the files directly in `src/` are the ground, each
directory is a room, and ROOMS below orders them. A module may use its own
room and the rooms listed before it, never one listed after it; within a
room (and within the ground) the modules' graph has no cycle.

Usage: scripts/module_graph.py [--print] [CRATE_SRC_DIR ...]
Defaults to `core/src` and `src`. Exits 1 and prints the cycle or the
upward reference if one exists.
"""
import re
import sys
from pathlib import Path

REF = re.compile(r"\b(crate|super)::(\{[^}]*\}|[a-z_][a-z0-9_]*)", re.S)
NAME = re.compile(r"(?:^|[{,\s])([a-z_][a-z0-9_]*)")


TOKEN = re.compile(
    r"//[^\n]*"                      # line comment (doc comments too)
    r"|/\*.*?\*/"                     # block comment
    r"|\b(?:b?r)(#*)\".*?\"\1"              # raw string: r"..", r#".."#
    r"|(?:\bb)?\"(?:\\.|[^\"\\])*\""          # string
    r"|'(?:\\.|[^'\\\n])'",                # char literal (not a lifetime)
    re.S)


def strip(text):
    """Drop comments and string literals (enough for our sources).

    One left-to-right pass, so a quote inside a comment, or a word ending
    in `r` before a quote, is not mistaken for the start of a string.
    """
    return TOKEN.sub(lambda m: '""' if m.group(0)[:1] in "brR\"'" else "", text)


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
# layers everything else builds on (see CONTRIBUTING.md). In a crate with
# rooms, a module in a room is named `room::module`.
LEAVES = {
    "core/src": {"layout", "clock", "epoch"},
    "src": {"gucs", "errors", "datadir", "mint::shmem", "failpoint"},
}
# Leaves every module may use, leaves included: named crash points of
# test builds (src/failpoint.rs), which compile to nothing elsewhere.
EVERYWHERE = {"src": {"failpoint"}}

# Crates grouped into rooms, bottom first: the files directly in the crate's
# source folder are the ground (below every room), each directory is a
# room, and a room may use the ground, itself and the rooms before it only.
# The reasons for each cut are in CONTRIBUTING.md ("Where code lives").
GROUND = "ground"
ROOMS = {
    "src": ["read", "mint", "lease", "high_water", "convert", "adopt", "operate"],
}

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PATH_START = re.compile(r"\b(crate|super)::")


def use_tree(s, i):
    """Paths (lists of names) of the use tree or path starting at s[i]."""
    while i < len(s) and s[i].isspace():
        i += 1
    if i < len(s) and s[i] == "{":
        out, i = [], i + 1
        while i < len(s):
            while i < len(s) and s[i] in " \t\r\n,":
                i += 1
            if i >= len(s) or s[i] == "}":
                return out, i + 1
            sub, j = use_tree(s, i)
            out += sub
            i = j if j > i else i + 1
        return out, i
    m = IDENT.match(s, i)
    if not m:
        return [[]], i
    name, i = m.group(0), m.end()
    if s.startswith("::", i):
        sub, i = use_tree(s, i + 2)
        return [[name] + p for p in sub], i
    return [[name]], i


def paths(text):
    """(kind, path) of every `crate::` and `super::` reference."""
    text = drop_test_modules(strip(text))
    out = set()
    for m in PATH_START.finditer(text):
        for p in use_tree(text, m.end())[0]:
            if p:
                out.add((m.group(1), tuple(p)))
    return out


def rooms_check(root, order, show):
    """Problems with the rooms of crate `root` (see ROOMS)."""
    rank = {GROUND: 0, **{r: i + 1 for i, r in enumerate(order)}}
    problems = []
    files = {}  # path -> (room, module)
    for p in sorted(root.rglob("*.rs")):
        rel = p.relative_to(root).parts
        if rel in (("lib.rs",), ("main.rs",)) or p.name == "tests.rs":
            continue
        if len(rel) == 1:
            files[p] = (GROUND, p.stem)
            continue
        if rel[0] not in rank:
            problems.append(f"{p}: {rel[0]}/ is not a room; add it to ROOMS in "
                            f"scripts/module_graph.py (and to CONTRIBUTING.md)")
            continue
        files[p] = (rel[0], p.stem if len(rel) == 2 else rel[1])
    modules = {}
    for room, mod in files.values():
        modules.setdefault(room, set()).add(mod)

    def name(node):
        return node[1] if node[0] == GROUND else f"{node[0]}::{node[1]}"

    def resolve(kind, path, src):
        if kind == "super" and src[0] != GROUND:
            if path[0] in modules.get(src[0], ()):
                return (src[0], path[0])
            return None
        if path[0] in rank and path[0] != GROUND:
            sub = path[1] if len(path) > 1 and path[1] != "self" else "mod"
            return (path[0], sub)
        if path[0] in modules.get(GROUND, ()):
            return (GROUND, path[0])
        return None

    edges = {}
    for p, src in files.items():
        edges.setdefault(src, set())
        for kind, path in paths(p.read_text()):
            dst = resolve(kind, path, src)
            if dst is None or dst == src:
                continue
            edges[src].add(dst)
            if rank[dst[0]] > rank[src[0]]:
                problems.append(
                    f"{p}: {name(src)} uses {name(dst)}, but {dst[0]} is above "
                    f"{src[0]} (order: {' < '.join([GROUND] + order)}); move what "
                    f"both need down, or the user up")
    for leaf in sorted(LEAVES.get(str(root), ())):
        node = (GROUND, leaf) if "::" not in leaf else tuple(leaf.split("::"))
        anywhere = {(GROUND, e) for e in EVERYWHERE.get(str(root), ())}
        if edges.get(node, set()) - anywhere:
            problems.append(f"{root}: {leaf} must depend on nothing else in the crate, "
                            f"but uses {', '.join(sorted(map(name, edges[node])))}")
    for room in [GROUND] + order:
        inner = {n[1]: {d[1] for d in e if d[0] == room}
                 for n, e in edges.items() if n[0] == room}
        found = cycle(inner)
        if found:
            problems.append(f"module cycle in {root} {room}: {' -> '.join(found)}")
    if show:
        print(f"{root}: rooms {' < '.join([GROUND] + order)}")
        for room in [GROUND] + order:
            print(f"  {room}:")
            for n in sorted(n for n in edges if n[0] == room and (n[1] != "mod" or edges[n])):
                print(f"    {n[1]} -> {', '.join(sorted(map(name, edges[n]))) or '(nothing)'}")
    return problems


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
        if str(root) in ROOMS:
            for problem in rooms_check(root, ROOMS[str(root)], show):
                print(problem, file=sys.stderr)
                failed = True
            continue
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
