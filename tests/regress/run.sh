#!/usr/bin/env bash
# pg_regress suites against three real clusters:
#   A: preloaded, worker_id 42      -> surface errors settings privileges formats layouts public_ids convert fleet json partitioning registry adopt
#   B: preloaded, worker_id unset   -> unset_worker
#   C: not preloaded, layout 2020-01-01 42/5/16 -> no_preload
# Expected output lives in tests/regress/expected/. REGRESS_SUITES="a b"
# runs only the suites named (see CONTRIBUTING.md).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
PGREGRESS="$(dirname "$("$PG_CONFIG" --pgxs)")/../test/regress/pg_regress"
BASE=$(state_dir "$ROOT/.run/regress" regress)
OUT="$ROOT/tests/regress"          # results/ and regression.diffs land here
PORT=${SNOWFLAKE_TEST_PORT:-16000}
PASSED=0
cleanup() { for c in A B C; do cluster_stop "$BASE/$c"; done; }
trap cleanup EXIT

run_suite() {
    local name="$1" port="$2"; shift 2
    if [ -n "${REGRESS_SUITES:-}" ]; then   # e.g. REGRESS_SUITES="surface convert"
        local s keep=()
        for s in "$@"; do [[ " $REGRESS_SUITES " == *" $s "* ]] && keep+=("$s"); done
        [ ${#keep[@]} -gt 0 ] || return 0
        set -- "${keep[@]}"
    fi
    local dir; dir=$(state_dir "$BASE/$name" "regress/$name")
    log "pg_regress on cluster $name: $*"
    if "$PGREGRESS" --inputdir="$ROOT/tests/regress" --outputdir="$OUT" --bindir="$(pgbin)" \
        --host="$dir" --port="$port" --user=postgres --dbname="regress_$name" "$@" >"$BASE/$name.out" 2>&1; then
        cat "$BASE/$name.out" >&2
    else
        cat "$BASE/$name.out" >&2
        [ -f "$OUT/regression.diffs" ] && cat "$OUT/regression.diffs" >&2
        die "pg_regress failed on cluster $name"
    fi
    local n; n=$(grep -cE '^(ok|test|not ok)? *[a-z_]+ +\.\.\. ok|^ok [0-9]+ ' "$BASE/$name.out" || true)
    PASSED=$((PASSED + n))
}

for c in A B C; do
    dir=$(state_dir "$BASE/$c" "regress/$c"); cluster_stop "$dir"
done
A=$(state_dir "$BASE/A" regress/A); B=$(state_dir "$BASE/B" regress/B); C=$(state_dir "$BASE/C" regress/C)
cluster_init "$A" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 42"
cluster_init "$B" $((PORT + 1)) "shared_preload_libraries = 'snowflake_id'"
cluster_init "$C" $((PORT + 2)) "snowflake_id.epoch = '2020-01-01'" \
    "snowflake_id.worker_bits = 5" "snowflake_id.sequence_bits = 16"
for d in "$A" "$B" "$C"; do cluster_up "$d"; done

run_suite A "$PORT" surface errors settings privileges formats layouts public_ids convert convert_online fleet json partitioning registry adopt
run_suite B $((PORT + 1)) unset_worker
run_suite C $((PORT + 2)) no_preload
echo "$PASSED tests passed" > "$ROOT/.run/regress.summary"
log "pg_regress: $PASSED tests passed"
