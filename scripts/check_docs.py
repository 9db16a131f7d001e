#!/usr/bin/env python3
"""Lint the Markdown documentation.

1. Every relative link resolves: the file exists and, for `file#anchor` or
   `#anchor`, the heading exists (GitHub's anchor rules).
2. Every recipe block `<!-- BEGIN path -->` ... `<!-- END path -->` holds a
   fenced code block equal to the file at `path` that a test runs, so a
   documented recipe is always the tested one.
3. Size: README.md is at most 15 KB (the front door) and no page in docs/
   is over 30 KB (one topic per page); split a page rather than raise
   these.

Usage: scripts/check_docs.py   (from the repository root; exit 1 on a problem)
"""
import re
import subprocess
import sys
from pathlib import Path

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# Bytes, as `wc -c` counts them.
LIMITS = {"README.md": 15_000}
DOCS_LIMIT = 30_000
RECIPE = re.compile(r"^<!-- BEGIN (\S+) -->\n```[a-z]*\n(.*?)```\n<!-- END \1 -->$", re.S | re.M)


def slug(heading):
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, seen, fence = set(), {}, False
        for line in path.read_text().splitlines():
            if line.startswith("```"):
                fence = not fence
            if fence or not line.startswith("#"):
                continue
            base = slug(line.lstrip("#"))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def main():
    files = subprocess.run(["git", "ls-files", "*.md"], capture_output=True, text=True,
                           check=True).stdout.split()
    files += [str(p) for p in Path(".").glob("docs/*.md")] + ["CONTRIBUTING.md", "tests/README.md"]
    problems = []
    for name in sorted(set(f for f in files if Path(f).exists())):
        md = Path(name)
        text = md.read_text()
        body = re.sub(r"(?ms)^```.*?^```", "", text)
        for target in LINK.findall(body):
            if re.match(r"^[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = (md.parent / file_part).resolve() if file_part else md.resolve()
            if not dest.exists():
                problems.append(f"{md}: link to missing {target}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{md}: link to missing heading {target}")
        begins = [b for b in re.findall(r"^<!-- BEGIN (\S+) -->$", text, re.M) if "/" in b]
        recipes = RECIPE.findall(text)
        for path in sorted(set(begins) - {p for p, _ in recipes}):
            problems.append(f"{md}: the recipe block of {path} has no matching <!-- END {path} --> "
                            "after one fenced code block, so it is not checked")
        for path, block in recipes:
            tested = Path(path)
            if not tested.exists() or tested.read_text() != block:
                problems.append(f"{md}: the recipe differs from {path}, the file the tests run")
    for page in [Path("README.md")] + sorted(Path("docs").glob("*.md")):
        limit = LIMITS.get(str(page), DOCS_LIMIT)
        size = len(page.read_bytes())
        if size > limit:
            problems.append(f"{page}: {size} bytes, over the limit of {limit}: "
                            "split it by topic (CONTRIBUTING.md#documentation)")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
