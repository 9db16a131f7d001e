#!/usr/bin/env bash
# Red-team attack on the worker-id registry (0.8.0 leases): a registry
# member turns off the synchronous commit of every server's claims and
# renewals, which docs/worker-ids.md requires ("every committed claim and
# renewal must survive a failover of the registry": a lost renewal lets
# the next holder of the id start below IDs the old holder minted).
#
# The documented setup pins it for the servers' shared login role:
#     ALTER ROLE snowflake_lease SET synchronous_commit = on;
# but a role may change its own defaults: whoever holds snowflake_lease's
# credentials (one compromised minting host) runs
#     SET synchronous_commit = local;
#     ALTER ROLE snowflake_lease SET synchronous_commit = local;
# and every lease worker's next session commits without waiting for a
# standby. (The SECURITY DEFINER functions cannot pin it: a SET clause
# ends with the function, before the commit.)
#
# Shown without a failover: the registry names a synchronous standby that
# never connects, so a claim committed as documented never returns and the
# server leases nothing; after her ALTER ROLE it leases an id, that is,
# the registry acknowledged a claim that no standby has.
#
# Passes (exit 0) when the server still leases nothing; fails (exit 1)
# while the attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
holders=()
# --- a registry and leased servers (as tests/integration/leases.sh sets
# them up: the documented GRANT, snowflake_lease's synchronous_commit = on,
# the registry not preloaded) ------------------------------------------
P0=${SNOWFLAKE_ATTACK_PORT:-56140}   # the registry; minting server N on P0+N
BASE=$(state_dir "$ROOT/.run/attack-reg-sync" attack-__NAME__)
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
rs postgres postgres -c "ALTER SYSTEM SET synchronous_standby_names = 'the_standby'" \
    -c "SELECT pg_reload_conf()" >/dev/null
minter_up 1
# As documented: no acknowledged claim without the standby.
if poll_until 6 has_lease 1; then
    die "setup: server 1 leased worker id $(lease_of 1) although no synchronous standby is connected"
fi
log "attack (registry synchronous_commit): without a standby, server 1 leases nothing: $(last_error 1)"

# The attack: two statements of the member.
rs snowflake_lease registry -c "SET synchronous_commit = local" \
    -c "ALTER ROLE snowflake_lease SET synchronous_commit = local" >/dev/null

if poll_until 10 has_lease 1; then
    die "attack (registry synchronous_commit) WORKS: server 1 leased worker id $(lease_of 1) on a claim no standby has (the member's ALTER ROLE snowflake_lease SET synchronous_commit = local overrode the documented 'on')"
fi
log "attack (registry synchronous_commit) refused: $(last_error 1)"
