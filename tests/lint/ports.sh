#!/usr/bin/env bash
# The ports of the test steps (issue 64): steps run side by side, so each
# keeps ports of its own. Every default port of a script in tests/ and
# bench/ (FOO_PORT:-N, the first port of the script's range) is below
# 32768, outside Linux's ephemeral range (32768-60999), where a client's
# outgoing connection may hold a server's port at the moment it starts;
# and the ranges of two steps that may run at once (40 ports from each
# default) do not meet. The security layer's scripts run in one step (two
# at a time, on ports of their own), and so do the benchmarks: each is
# one range owner.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
cd "$ROOT"
git ls-files 'tests/*.sh' 'bench/*.sh' | xargs grep -oE '[A-Z_]*PORT[A-Z_]*:-[0-9]{4,5}\}' /dev/null \
    | sed -E 's/:[A-Z_]*:-([0-9]+)\}$/ \1/' | python3 -c '
import sys
owners = []
for line in sys.stdin:
    path, port = line.split()
    port = int(port)
    owner = ("the security layer" if path.startswith("tests/security/")
             else "the bench smoke" if path.startswith("bench/") else path)
    owners.append((owner, path, port))
bad = [f"{p}: port {n} is in the ephemeral range (32768 and up)" for _, p, n in owners if n >= 32768]
for i, (o1, p1, n1) in enumerate(owners):
    for o2, p2, n2 in owners[i + 1:]:
        if o1 != o2 and abs(n1 - n2) < 40:
            bad.append(f"{p1} ({n1}) and {p2} ({n2}): ranges less than 40 ports apart, and the steps may run at once")
if not owners:
    bad.append("no default ports found: the pattern no longer matches the scripts")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
' || die "the test steps' ports above may meet, or may be taken by a client's ephemeral port"
log "ports: $(git ls-files 'tests/*.sh' 'bench/*.sh' | xargs grep -lE '[A-Z_]*PORT[A-Z_]*:-[0-9]{4,5}\}' | wc -l) scripts, every default port below 32768, no two steps' ranges within 40 ports"
