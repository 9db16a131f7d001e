# shellcheck shell=bash
# The scaffolding of the attack scripts (tests/security/attack_*.sh and
# unfixed/*.sh): each runs one attack on a cluster of its own.
#   attack_cluster NAME PORT WORKER_ID [SETTING...]: a fresh cluster in
#       .run/attack-NAME, preloaded, with that worker id and settings,
#       stopped at exit together with the PIDs in the array `holders`;
#       sets DIR and PORT.
#   as ROLE DB ARGS...: psql as ROLE in DB, tuples only, stop on error.
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
