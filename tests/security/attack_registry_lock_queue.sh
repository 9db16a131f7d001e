#!/usr/bin/env bash
# Red-team attack on the worker-id registry (0.8.0 leases): the owner of
# the registry database (mallory, a plain role, in the red team's version;
# such a registry is now refused, and here the database is a superuser's,
# so she is any plain role of it) stops every leased server
# of the fleet from renewing, for as long as she likes, with two sessions.
#
# PostgreSQL 16 lets a database's owner VACUUM and ANALYZE every table of
# her database, and the extension grants USAGE on snowflake_id_internal to
# pg_database_owner (high_water.sql), so she can name the registry table:
#   1. BEGIN; ANALYZE snowflake_id_internal.snowflake_registry; -- and wait:
#      ANALYZE in a transaction block keeps its SHARE UPDATE EXCLUSIVE
#      lock until the transaction ends;
#   2. VACUUM FULL snowflake_id_internal.snowflake_registry: its ACCESS
#      EXCLUSIVE request queues behind (1).
# Every renewal's UPDATE (ROW EXCLUSIVE) and every claim queue behind (2).
# The lease worker gives up after a third of the TTL, drops the connection
# and reconnects, and its abandoned backend stays in the queue: each
# server leaks one registry backend per attempt, towards max_connections.
# The servers stop minting (55000) at their deadline.
#
# Passes (exit 0) when the server keeps its lease while she holds her
# sessions; fails (exit 1) while the attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/registry_lib.sh"
registry_scaffold lockq "${SNOWFLAKE_ATTACK_PORT:-16230}"   # the registry; minting server N on the port + N
# ------------------------------------------------------------------------
registry_up
minter_up 1
leased 1
log "attack (registry lock queue): server 1 holds worker id $(lease_of 1)"

# The attack: two sessions of the database owner.
rs mallory registry -c "BEGIN" -c "ANALYZE snowflake_id_internal.snowflake_registry" \
    -c "SELECT pg_sleep(60)" >/dev/null 2>&1 & holders+=($!)
holds() {
    [ "$(rs postgres registry -c "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                                   WHERE a.usename = 'mallory' AND l.granted
                                     AND l.relation = 'snowflake_id_internal.snowflake_registry'::regclass")" != 0 ]
}
poll_until 10 holds || log "attack (registry lock queue): her ANALYZE holds no lock on the registry table"
rs mallory registry -c "VACUUM FULL snowflake_id_internal.snowflake_registry" >/dev/null 2>&1 & holders+=($!)

poll_until 10 no_lease 1 || true
stuck=$(rs postgres registry -c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'snowflake_lease' AND wait_event_type = 'Lock'")
log "attack (registry lock queue): server 1: lease $(lease_of 1 || true), $stuck lease backends waiting on a lock; $(last_error 1)"
no_lease 1 && die "attack (registry lock queue) WORKS: server 1 lost its lease ($stuck registry backends stuck in the lock queue): $(last_error 1)"
mints 1 || die "attack (registry lock queue) WORKS: server 1 cannot mint"
log "attack (registry lock queue) refused"
