#!/usr/bin/env bash
# Instruction counts of the generators, exactly, with callgrind: a
# single-user backend (library preloaded) runs
#   SELECT count(f()) FROM generate_series(1, N)
# and callgrind counts the instructions inside each generator's C function
# (inclusive of everything it calls) per call, and of the whole statement
# per row. The difference of the per-row statement costs against the
# floor (bench/floor.c, a C function returning a constant, called the same
# way) is what a generator adds to a query.
#   bash bench/profile.sh        (PG_VERSION, default 18; BENCH_PROFILE_N, default 200000)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
[ -n "${SNOWFLAKE_PREREQS_DONE:-}" ] || bash "$ROOT/scripts/prereqs.sh" "${PG_VERSION:-18}"
select_pg "${PG_VERSION:-18}"
export PATH="$HOME/.cargo/bin:$PATH"
N=${BENCH_PROFILE_N:-200000}
DIR=$(state_dir "$ROOT/.run/profile" profile)
[ -n "${BENCH_NO_INSTALL:-}" ] || install_extension
rm -rf "$DIR/data"
as_pg "$(pgbin)/initdb" -D "$DIR/data" -U postgres -A trust --no-sync >/dev/null
printf "shared_preload_libraries = 'snowflake_id'\nsnowflake_id.worker_id = 1\njit = off\n" | as_pg tee -a "$DIR/data/postgresql.conf" >/dev/null
single() { as_pg env ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH="$LD_LIBRARY_PATH"} "$@" "$(pgbin)/postgres" --single -D "$DIR/data" -j postgres; }
floor_sql=$(bench_floor_sql "$DIR")
printf 'CREATE EXTENSION snowflake_id;\nCREATE SEQUENCE s;\n%s\n' "$floor_sql" | single >/dev/null

# name | expression | C function callgrind should count
GENS=("snowflake_nextval()|snowflake_nextval()|snowflake_nextval_wrapper"
      "nextval (bigserial)|nextval('s')|nextval_oid"
      "gen_random_uuid()|gen_random_uuid()|gen_random_uuid")
[ "$PG_MAJOR" -ge 18 ] && GENS+=("uuidv7()|uuidv7()|uuidv7")
GENS+=("floor (constant function)|bench_floor()|bench_floor"
      "constant expression (no call)|42::bigint|")
declare -A STMT=() FN=()
for g in "${GENS[@]}"; do
    IFS='|' read -r name expr fn <<< "$g"
    out="$DIR/callgrind.$RANDOM"
    printf 'SELECT count(%s) FROM generate_series(1, %s);\n' "$expr" "$N" > "$DIR/stmt.sql"
    chmod 644 "$DIR/stmt.sql"
    # Count only the statement: toggle on ExecutorRun.
    as_pg env ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH="$LD_LIBRARY_PATH"} valgrind --tool=callgrind \
        --callgrind-out-file="$out" --toggle-collect=standard_ExecutorRun --separate-recs=1 \
        "$(pgbin)/postgres" --single -D "$DIR/data" -j postgres < "$DIR/stmt.sql" > "$DIR/valgrind.log" 2>&1 \
        || { cat "$DIR/valgrind.log" >&2; die "valgrind failed for $name"; }
    total=$(callgrind_annotate "$out" 2>/dev/null | sed -nE 's/^([0-9,]+) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
    STMT[$name]=$(awk -v t="$total" -v n="$N" 'BEGIN {printf "%.0f", t / n}')
    if [ -n "$fn" ]; then
        incl=$(callgrind_annotate --inclusive=yes --threshold=100 "$out" 2>/dev/null | grep -E "[: ]$fn( |\$|\[)" | head -1 | awk '{print $1}' | tr -d ,)
        FN[$name]=$(awk -v t="${incl:-0}" -v n="$N" 'BEGIN {printf "%.0f", t / n}')
    fi
    cp "$out" "$DIR/callgrind.$(echo "$name" | tr -c 'a-z0-9' '_')"; rm -f "$out"
done
fl=${STMT["floor (constant function)"]}
echo "| generator | instructions per call (inside the C function) | instructions per row (statement) | added to the floor per row |"
echo "|---|---:|---:|---:|"
for g in "${GENS[@]}"; do
    IFS='|' read -r name _ fn <<< "$g"
    echo "| $name | ${FN[$name]:-—} | ${STMT[$name]} | $(( ${STMT[$name]} - fl )) |"
done
echo
echo "callgrind files: $DIR/callgrind.* (callgrind_annotate --inclusive=yes FILE)"
