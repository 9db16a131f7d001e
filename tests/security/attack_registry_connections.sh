#!/usr/bin/env bash
# Red-team attack on the worker-id registry (0.8.0 leases), second round:
# a member of snowflake_lease (mallory: the login role of another server,
# or anyone who has its password) keeps every other server that connects
# to the registry from then on from ever getting a lease, with nothing but
# idle sessions.
#
# The documented set-up gives each server its own login role, but sets no
# CONNECTION LIMIT on it: mallory may open every connection slot of the
# registry that is not reserved for superusers (max_connections less
# superuser_reserved_connections and reserved_connections). Servers that
# are connected keep their sessions; every server that needs a new one
# cannot get it ("too many clients already"): a server restarted (a minor
# upgrade, a crash of its postmaster, a node drained in Kubernetes), every
# server after a registry failover or restart (the documented Patroni
# set-up: all sessions drop at once, and her script reconnects first), a
# server whose request timed out (it drops the connection and reconnects).
# Each stops minting (55000) at the end of its lease and stays stopped
# while she holds the slots: ids need not run out.
#
# docs/worker-ids.md now gives each login role a CONNECTION LIMIT (3: a
# request that timed out may leave a session behind for a moment), which
# a member cannot raise, and this script sets the registry up that way.
#
# Passes (exit 0) when a restarted server leases a worker id while she
# holds her sessions; fails (exit 1) while the attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
# --- a registry and leased servers as docs/worker-ids.md sets them up:
# one login role per server, members of the NOLOGIN group snowflake_lease
# that holds the EXECUTE grants; the registry database and the schema
# "snowflake" a superuser's -------------------------------------------------
P0=${SNOWFLAKE_ATTACK_PORT:-56220}   # the registry; minting server N on P0+N
BASE=$(state_dir "$ROOT/.run/attack-reg-conns" attack-__NAME__)
REG="$BASE/reg"
reg_cleanup() {
    local p d
    for p in "${holders[@]}"; do kill "$p" 2>/dev/null || true; done
    if [ -d "$REG/data" ]; then
        rs postgres registry -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'mallory'" >/dev/null 2>&1 || true
    fi
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
    node "$REG" "$P0" "max_connections = 20"
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
log "attack (registry connections): server 1 holds worker id $(lease_of 1)"

# The attack: mallory opens idle sessions until the registry refuses her,
# and takes back every slot that frees up.
grab() {
    while :; do
        "$(pgbin)/psql" -X -q -h "$REG" -p "$P0" -U mallory -d registry -c "SELECT pg_sleep(300)" >/dev/null 2>&1 &
        sleep 0.05
    done
}
grab & holders+=($!)
mine() { rs postgres registry -c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'mallory'"; }
full() { ! "$(pgbin)/psql" -X -q -h "$REG" -p "$P0" -U lease_m1 -d registry -Atc "SELECT 1" >/dev/null 2>&1; }
poll_until 10 full || log "attack (registry connections): mallory cannot fill the registry's connection slots (her CONNECTION LIMIT)"
log "attack (registry connections): mallory holds $(mine) sessions of the registry"

# Server 1 restarts, as servers do.
cluster_stop "$BASE/m1"
cluster_up "$BASE/m1"
poll_until 20 has_lease 1 || true
log "attack (registry connections): restarted server 1: lease '$(lease_of 1 || true)'; $(last_error 1)"
back() { has_lease 1 && mints 1; }
back || die "attack (registry connections) WORKS: restarted server 1 cannot mint while mallory holds $(mine) registry sessions: $(last_error 1)"
log "attack (registry connections) refused: server 1 mints under worker id $(lease_of 1)"
