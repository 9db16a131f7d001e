#!/usr/bin/env bash
# Red-team attack on the worker-id registry (0.8.0 leases), second round:
# a member of snowflake_lease (mallory: the login role of another server,
# or anyone who has its password) stops a server whose lease ran out in the
# registry from ever minting again, for as long as she keeps one session
# open, and leaves no trace in the registry.
#
# snowflake_registry_claim() locks the row it takes with FOR UPDATE. The
# lease worker calls it in a statement of its own, but a member may call it
# inside BEGIN ... and keep the transaction open: the row stays locked, and
# the claim, never committed, shows nowhere (snowflake_registry_holders
# still says "expired"). She may pass any preferred id, so she picks the
# id of a server whose lease expired in the registry: a server paused past
# its TTL (a stalled host, a VM migration: docs/worker-ids.md, scenario 3),
# or every server after a registry outage longer than the TTL (scenario 4).
# When the server comes back, its lease worker renews; the renewal's UPDATE
# waits for her row lock, ends with lock_timeout (55P03), and is retried,
# forever: an error is not a lost lease, so the worker never claims another
# id, though a thousand are free. The server refuses every ID (55000)
# until she ends her transaction.
#
# Passes (exit 0) when the server mints again, under some worker id,
# while she holds her transaction; fails (exit 1) while the attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/registry_lib.sh"
registry_scaffold rowlock "${SNOWFLAKE_ATTACK_PORT:-16300}"   # the registry; minting server N on the port + N
# ------------------------------------------------------------------------
registry_up_documented
minter_up 1
leased 1
W=$(lease_of 1)
log "attack (registry row lock): server 1 holds worker id $W"

# Server 1 stalls past its TTL (its lease worker stopped, as a host under
# memory pressure or a migrated VM stops it); its row expires.
STOPPED=$(ps -o pid=,args= --ppid "$(head -1 "$BASE/m1/data/postmaster.pid")" | awk '/snowflake_id lease/ {print $1}')
[ -n "$STOPPED" ] || die "no lease worker on server 1"
kill -STOP "$STOPPED"
expired() { [ "$(state_of "$W")" = expired ]; }
poll_until 15 expired || die "worker id $W did not expire in the registry"

# The attack: mallory claims that id, preferred, in a transaction she keeps.
hold_open "SELECT * FROM snowflake.snowflake_registry_claim(gen_random_uuid(), 'x', 1, 'x', 'x', $W, 10, 12,
    1704067200000, 600000, (extract(epoch FROM clock_timestamp()) * 1000)::bigint);" \
    || die "mallory's claim did not run"
log "attack (registry row lock): mallory holds worker id $W in an open transaction; the registry says '$(state_of "$W")'"

# Server 1 wakes up.
kill -CONT "$STOPPED"; STOPPED=""
back() { has_lease 1 && mints 1; }
poll_until 20 back || true
log "attack (registry row lock): server 1: lease '$(lease_of 1 || true)'; $(last_error 1)"
back || die "attack (registry row lock) WORKS: server 1 cannot mint while mallory keeps worker id $W locked (1023 ids free): $(last_error 1)"
log "attack (registry row lock) refused: server 1 mints under worker id $(lease_of 1)"
