#!/usr/bin/env bash
# Red-team attack on the worker-id registry (0.8.0 leases): settings of
# the registry's login role or database stop every leased server.
#
# 1. A registry member: whoever holds the credentials of snowflake_lease,
#    the ONE login role that docs/worker-ids.md has every server use (one
#    compromised minting host is enough). PostgreSQL lets a role set its
#    own defaults and signal its own backends, so she runs, as it:
#        ALTER ROLE snowflake_lease SET default_transaction_read_only = on;
#        SELECT pg_terminate_backend(pid) FROM pg_stat_activity
#         WHERE usename = current_user AND pid <> pg_backend_pid();
#    Every lease worker reconnects into a read-only session: each claim
#    and renewal fails ("cannot execute UPDATE in a read-only
#    transaction") and the whole fleet stops minting (55000) within a
#    lease. statement_timeout = '1ms', or a new PASSWORD, do the same; the
#    same ALTER ROLE also overrides the documented synchronous_commit = on
#    (attack_registry_sync_commit.sh).
# 2. The owner of the registry database (in the red team's version
#    mallory, a plain role; a registry database must now belong to a
#    superuser, so here it is a superuser's maintenance setting):
#        ALTER DATABASE registry SET default_transaction_read_only = on;
#    takes effect at the lease workers' next connection: after any
#    registry restart or failover, or a dropped connection, the fleet
#    stops likewise.
# The lease worker takes whatever session the role and database settings
# give it (src/mint/registry_client.rs sets nothing at connect).
#
# Passes (exit 0) when server 1 keeps minting through both; fails (exit 1)
# while either works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
holders=()
# --- a registry and leased servers (as tests/integration/leases.sh sets
# them up: the documented GRANT, snowflake_lease's synchronous_commit = on,
# the registry not preloaded) ------------------------------------------
P0=${SNOWFLAKE_ATTACK_PORT:-56135}   # the registry; minting server N on P0+N
BASE=$(state_dir "$ROOT/.run/attack-reg-settings" attack-__NAME__)
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
log "attack (registry settings): server 1 holds worker id $(lease_of 1)"
worked=()

# 1. The member.
rs snowflake_lease registry -c "ALTER ROLE snowflake_lease SET default_transaction_read_only = on" \
    -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
         WHERE usename = current_user AND pid <> pg_backend_pid()" >/dev/null
poll_until 8 no_lease 1 || true
if no_lease 1 || ! mints 1; then
    worked+=("member's ALTER ROLE snowflake_lease SET default_transaction_read_only = on: server 1 lost its lease ($(last_error 1))")
fi
log "attack (registry settings) 1: server 1: lease $(lease_of 1 || true); $(last_error 1)"
rs postgres registry -c "ALTER ROLE snowflake_lease RESET default_transaction_read_only" \
    -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = 'snowflake_lease'" >/dev/null
leased 1

# 2. The database owner; then a routine restart of the registry.
rs postgres registry -c "ALTER DATABASE registry SET default_transaction_read_only = on" >/dev/null
cluster_stop "$REG"; cluster_up "$REG"
poll_until 8 no_lease 1 || true
if no_lease 1 || ! mints 1; then
    worked+=("owner's ALTER DATABASE registry SET default_transaction_read_only = on and a registry restart: server 1 lost its lease ($(last_error 1))")
fi
log "attack (registry settings) 2: server 1: lease $(lease_of 1 || true); $(last_error 1)"

[ ${#worked[@]} = 0 ] || die "attack (registry settings) WORKS: $(printf '%s; ' "${worked[@]}")"
log "attack (registry settings) refused"
