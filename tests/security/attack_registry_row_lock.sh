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
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
# --- a registry and leased servers as docs/worker-ids.md sets them up:
# one login role per server, members of the NOLOGIN group snowflake_lease
# that holds the EXECUTE grants; the registry database and the schema
# "snowflake" a superuser's -------------------------------------------------
P0=${SNOWFLAKE_ATTACK_PORT:-56200}   # the registry; minting server N on P0+N
BASE=$(state_dir "$ROOT/.run/attack-reg-rowlock" attack-__NAME__)
REG="$BASE/reg"
STOPPED=""
reg_cleanup() {
    local p d
    [ -n "$STOPPED" ] && kill -CONT "$STOPPED" 2>/dev/null
    for p in "${holders[@]}"; do kill "$p" 2>/dev/null || true; done
    for d in "$BASE"/m* "$REG"; do [ -d "$d" ] && cluster_stop "$d"; done
    return 0
}
trap reg_cleanup EXIT
node() {
    local d="$1" port="$2"; shift 2
    mkdir -p "$d"; if is_root; then chown postgres:postgres "$d"; fi
    cluster_stop "$d"
    cluster_init "$d" "$port" "shared_buffers = 16MB" "$@"
    cluster_up "$d"
}
rs() { local r="$1" db="$2"; shift 2
       "$(pgbin)/psql" -X -q -h "$REG" -p "$P0" -U "$r" -d "$db" -v ON_ERROR_STOP=1 -At "$@"; }
ms() { local n="$1"; shift
       "$(pgbin)/psql" -X -q -h "$BASE/m$n" -p $((P0 + n)) -U postgres -d postgres -v ON_ERROR_STOP=1 -At "$@"; }
registry_up() {
    node "$REG" "$P0"
    rs postgres postgres -c "CREATE DATABASE registry" >/dev/null
    rs postgres registry -c "SET client_min_messages = warning" \
        -c "CREATE SCHEMA snowflake AUTHORIZATION postgres" \
        -c "CREATE EXTENSION snowflake_id SCHEMA snowflake" \
        -c "SELECT snowflake.snowflake_registry_init()" \
        -c "CREATE ROLE snowflake_lease NOLOGIN" \
        -c "GRANT USAGE ON SCHEMA snowflake TO snowflake_lease" \
        -c "GRANT EXECUTE ON FUNCTION
              snowflake.snowflake_registry_claim(uuid,text,integer,text,text,integer,integer,integer,bigint,integer,bigint),
              snowflake.snowflake_registry_renew(integer,uuid,bigint,integer,bigint),
              snowflake.snowflake_registry_release(integer,uuid,bigint) TO snowflake_lease" \
        -c "CREATE ROLE lease_m1 LOGIN CONNECTION LIMIT 3 IN ROLE snowflake_lease" \
        -c "CREATE ROLE mallory LOGIN CONNECTION LIMIT 3 IN ROLE snowflake_lease" >/dev/null
}
minter_up() {
    node "$BASE/m$1" $((P0 + $1)) "shared_preload_libraries = 'snowflake_id'" \
        "snowflake_id.worker_id_source = 'registry'" \
        "snowflake_id.registry = 'host=$REG port=$P0 dbname=registry user=lease_m$1'" \
        "snowflake_id.lease_ttl = '3s'"
    ms "$1" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" >/dev/null
}
lease_of() { ms "$1" -c "SELECT lease_worker_id FROM snowflake_stats()" 2>/dev/null; }
has_lease() { [ -n "$(lease_of "$1")" ]; }
last_error() { ms "$1" -c "SELECT coalesce(registry_last_error, '') FROM snowflake_stats()" 2>&1 | cut -c1-200; }
mints() { ms "$1" -c "SELECT snowflake_nextval()" >/dev/null 2>&1; }
leased() { poll_until 30 has_lease "$1" || die "server $1 leased no worker id within 30 s ($(last_error "$1"))"; }
state_of() { rs postgres registry -c "SELECT state FROM snowflake.snowflake_registry_holders WHERE worker_id = $1"; }
# ------------------------------------------------------------------------
registry_up
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
rs mallory registry >/dev/null 2>&1 <<SQL & holders+=($!)
BEGIN;
SELECT * FROM snowflake.snowflake_registry_claim(gen_random_uuid(), 'x', 1, 'x', 'x', $W, 10, 12,
    1704067200000, 600000, (extract(epoch FROM clock_timestamp()) * 1000)::bigint);
SELECT pg_sleep(120);
SQL
locked() {
    [ "$(rs postgres registry -c "SELECT count(*) FROM pg_stat_activity
                                   WHERE usename = 'mallory' AND wait_event = 'PgSleep'")" = 1 ]
}
poll_until 10 locked || die "mallory's claim did not run"
log "attack (registry row lock): mallory holds worker id $W in an open transaction; the registry says '$(state_of "$W")'"

# Server 1 wakes up.
kill -CONT "$STOPPED"; STOPPED=""
back() { has_lease 1 && mints 1; }
poll_until 20 back || true
log "attack (registry row lock): server 1: lease '$(lease_of 1 || true)'; $(last_error 1)"
back || die "attack (registry row lock) WORKS: server 1 cannot mint while mallory keeps worker id $W locked (1023 ids free): $(last_error 1)"
log "attack (registry row lock) refused: server 1 mints under worker id $(lease_of 1)"
