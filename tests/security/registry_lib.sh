# shellcheck shell=bash
# The scaffolding of the worker-id registry's attack scripts
# (tests/security/attack_registry_*.sh): a registry cluster and leased
# minting servers, each on a cluster of its own, stopped at exit.
#   registry_scaffold NAME PORT: state in .run/attack-reg-NAME; the
#       registry's cluster in $REG on PORT ($P0), minting server N in
#       $BASE/mN on PORT + N (a standby of the registry, if any, in
#       $BASE/standby); at exit the PIDs in `holders` are killed,
#       mallory's registry sessions ended and every cluster stopped.
#   node DIR PORT [SETTING...]: a fresh cluster in DIR, started.
#   rs ROLE DB ARGS...: psql on the registry; ms N ARGS...: psql as
#       postgres on minting server N (tuples only, stop on error).
#   registry_up [OWNER]: the red team's first set-up: database "registry"
#       owned by OWNER (default postgres), the extension in public, one
#       login role snowflake_lease shared by the servers (with
#       synchronous_commit = on, as docs/worker-ids.md first said, and a
#       limit of 16 live leases: issue 47 allows a role one) and
#       mallory, a plain login role.
#   registry_up_documented [SETTING...]: docs/worker-ids.md's set-up: the
#       extension in schema snowflake, the grants on the NOLOGIN group
#       snowflake_lease, login roles lease_m1 and mallory in it with
#       CONNECTION LIMIT 3; SETTINGs for the registry's cluster; REG_INIT
#       the arguments of its snowflake_registry_init().
#   minter_up N [SETTING...]: minting server N, leasing from "registry"
#       for 3 s, as the login role of the set-up.
#   lease_of N, has_lease N, no_lease N, last_error N, mints N, leased N,
#   state_of WORKER_ID: what server N holds, and the registry's view.
#   hold_open SQL: mallory runs SQL in a transaction she keeps open.
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
holders=()   # (attack_lib.sh sets it too; shellcheck cannot follow the source)

registry_scaffold() {
    P0="$2"
    BASE=$(state_dir "$ROOT/.run/attack-reg-$1" "attack-reg-$1")
    REG="$BASE/reg"
    trap reg_cleanup EXIT
}
reg_cleanup() {
    local p d
    for p in "${holders[@]}"; do kill "$p" 2>/dev/null || true; done
    if [ -d "$REG/data" ]; then
        rs postgres registry -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'mallory'" >/dev/null 2>&1 || true
    fi
    for d in "$BASE"/m* "$BASE"/standby "$REG"; do [ -d "$d" ] && cluster_stop "$d"; done
    return 0
}
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

# The EXECUTE grants of docs/worker-ids.md, on the functions in SCHEMA.
registry_grants() {
    echo "GRANT EXECUTE ON FUNCTION
              $1.snowflake_registry_claim(uuid,text,integer,text,text,integer,integer,integer,bigint,integer,bigint),
              $1.snowflake_registry_renew(integer,uuid,bigint,integer,bigint),
              $1.snowflake_registry_release(integer,uuid,bigint) TO snowflake_lease"
}
# The schema of the extension on the registry, and the login role of
# minting server N (set by the set-up).
REG_SCHEMA=public
minter_role() { echo snowflake_lease; }
registry_up() {
    node "$REG" "$P0"
    rs postgres postgres -c "CREATE ROLE snowflake_lease LOGIN" -c "CREATE ROLE mallory LOGIN" \
        -c "CREATE DATABASE registry OWNER ${1:-postgres}" >/dev/null
    rs postgres registry -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
        -c "SELECT snowflake_registry_init()" -c "ALTER ROLE snowflake_lease SET synchronous_commit = on" \
        -c "$(registry_grants public)" \
        -c "SELECT snowflake_registry_role_limit('snowflake_lease', 16)" >/dev/null
}
registry_up_documented() {
    REG_SCHEMA=snowflake
    minter_role() { echo "lease_m$1"; }
    node "$REG" "$P0" "$@"
    rs postgres postgres -c "CREATE DATABASE registry" >/dev/null
    rs postgres registry -c "SET client_min_messages = warning" \
        -c "CREATE SCHEMA snowflake AUTHORIZATION postgres" \
        -c "CREATE EXTENSION snowflake_id SCHEMA snowflake" \
        -c "SELECT snowflake.snowflake_registry_init(${REG_INIT:-})" \
        -c "CREATE ROLE snowflake_lease NOLOGIN" \
        -c "GRANT USAGE ON SCHEMA snowflake TO snowflake_lease" \
        -c "$(registry_grants snowflake)" \
        -c "CREATE ROLE lease_m1 LOGIN CONNECTION LIMIT 3 IN ROLE snowflake_lease" \
        -c "CREATE ROLE mallory LOGIN CONNECTION LIMIT 3 IN ROLE snowflake_lease" >/dev/null
}
minter_up() {
    local n="$1"; shift
    node "$BASE/m$n" $((P0 + n)) "shared_preload_libraries = 'snowflake_id'" \
        "snowflake_id.worker_id_source = 'registry'" \
        "snowflake_id.registry = 'host=$REG port=$P0 dbname=registry user=$(minter_role "$n")'" \
        "snowflake_id.lease_ttl = '3s'" "$@"
    ms "$n" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" >/dev/null
}
lease_of() { ms "$1" -c "SELECT lease_worker_id FROM snowflake_stats()" 2>/dev/null; }
has_lease() { [ -n "$(lease_of "$1")" ]; }
no_lease() { [ -z "$(lease_of "$1")" ]; }
last_error() { ms "$1" -c "SELECT coalesce(registry_last_error, '') FROM snowflake_stats()" 2>&1; }
# mints N: server N mints (asking again while its start-up read of the
# high-water marks runs: 55000 at once then, since issue 55).
mints() {
    local t0=$SECONDS out
    until out=$(ms "$1" -c "SELECT snowflake_nextval()" 2>&1); do
        [[ "$out" == *"high-water mark is not available"* ]] && [ $((SECONDS - t0)) -lt 30 ] || return 1
        sleep 0.05
    done
}
leased() { poll_until 30 has_lease "$1" || die "server $1 leased no worker id within 30 s ($(last_error "$1"))"; }
state_of() { rs postgres registry -c "SELECT state FROM $REG_SCHEMA.snowflake_registry_holders WHERE worker_id = $1"; }
# hold_open SQL: mallory runs SQL on the registry inside a transaction she
# keeps open (for 120 s, ended at exit); true once she sleeps in it,
# false if she does not within 10 s.
hold_open() {
    rs mallory registry >/dev/null 2>&1 <<SQL & holders+=($!)
BEGIN;
$1
SELECT pg_sleep(120);
SQL
    poll_until 10 mallory_sleeps
}
mallory_sleeps() {
    [ "$(rs postgres registry -c "SELECT count(*) FROM pg_stat_activity
                                   WHERE usename = 'mallory' AND wait_event = 'PgSleep'")" = 1 ]
}
