# shellcheck shell=bash
# The scaffolding of the attack scripts (tests/security/attack_*.sh and
# unfixed/*.sh): each runs one attack on a cluster of its own.
#   attack_cluster NAME PORT WORKER_ID [SETTING...]: a fresh cluster in
#       .run/attack-NAME, preloaded, with that worker id and settings,
#       stopped at exit together with the PIDs in the array `holders`;
#       sets DIR and PORT.
#   as ROLE DB ARGS...: psql as ROLE in DB, tuples only, stop on error.
#   bob_orders: the victim, bob: the extension in bobdb (his database,
#       which must exist), CONNECT revoked from PUBLIC so that no one
#       else can connect, his table keyed by snowflake_nextval() and one
#       INSERT.
#   bob_inserts LABEL SECONDS: bob INSERTs every 0.5 s for SECONDS, each
#       with a 15 s statement timeout, logging each failure under LABEL;
#       sets BOB_TRIES and BOB_ERRS.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
holders=()
attack_cluster() {
    local name="$1" worker="$3"; PORT="$2"; shift 3
    local base; base=$(state_dir "$ROOT/.run/attack-$name" "attack-$name")
    DIR="$base/c"
    mkdir -p "$DIR"; if is_root; then chown postgres:postgres "$DIR"; fi
    trap attack_cleanup EXIT
    cluster_stop "$DIR"
    cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = $worker" "$@"
    cluster_up "$DIR"
}
attack_cleanup() {
    local p
    for p in "${holders[@]}"; do kill "$p" 2>/dev/null || true; done
    cluster_stop "$DIR"
}
as() {
    local role="$1" db="$2"; shift 2
    "$(pgbin)/psql" -X -q -h "$DIR" -p "$PORT" -U "$role" -d "$db" -v ON_ERROR_STOP=1 -At "$@"
}
bob_orders() {
    as postgres bobdb -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
        -c "REVOKE CONNECT ON DATABASE bobdb FROM PUBLIC" >/dev/null
    as bob bobdb -c "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text)" >/dev/null
    as bob bobdb -c "INSERT INTO orders (item) VALUES ('warm-up')" >/dev/null
}
BOB_TRIES=0 BOB_ERRS=0
bob_inserts() {
    local label="$1" end=$((SECONDS + $2)) last
    BOB_TRIES=0 BOB_ERRS=0
    while [ $SECONDS -lt "$end" ]; do
        if ! last=$(as bob bobdb -c "SET statement_timeout = '15s'" \
                      -c "INSERT INTO orders (item) VALUES ('book') RETURNING id" 2>&1); then
            BOB_ERRS=$((BOB_ERRS + 1)); log "attack ($label): bob's INSERT failed: $(echo "$last" | head -1)"
        fi
        BOB_TRIES=$((BOB_TRIES + 1))
        sleep 0.5
    done
}
