#!/usr/bin/env bash
# Instruction counts of the generators, exactly, with callgrind: a
# single-user backend (library preloaded) runs
#   SELECT count(f()) FROM generate_series(1, N)
# and callgrind counts the instructions inside each generator's C function
# (inclusive of everything it calls) per call, and of the whole statement
# per row. The difference of the per-row statement costs against the
# floor (bench/floor.c, a C function returning a constant, called the same
# way) is what a generator adds to a query.
#
# Then the whole server runs under callgrind (every backend is a fork of the
# postmaster, so each is counted, in a file of its own) and pgbench
# -M prepared -c 1 runs 'SELECT f();' T1 and then T2 times, each run in a
# backend of its own: the difference of the two backends' totals over
# T2 - T1 is the cost of one pgbench transaction in the server, protocol
# and all, with the backend's start-up cancelled out. Unlike TPS, this does
# not move with the neighbours' load. (Under callgrind nearly every call of
# snowflake_nextval() starts a new millisecond, so its count is an upper
# bound of the native one.)
#
# A backend's first snowflake_nextval() also waits for the high-water
# mark's first round (src/mint/high_water.rs), once: a look-up in shared memory
# (a single-user backend has no background workers and skips it); the
# pgbench runs warm the database first, so the difference cancels it.
#   bash bench/profile.sh        (PG_VERSION, default 18; BENCH_PROFILE_N, default 200000;
#                                 BENCH_PROFILE_TXNS, default 5000 = T2 - T1)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
[ -n "${SNOWFLAKE_PREREQS_DONE:-}" ] || bash "$ROOT/scripts/prereqs.sh" "${PG_VERSION:-18}"
select_pg "${PG_VERSION:-18}"
export PATH="$HOME/.cargo/bin:$PATH"
N=${BENCH_PROFILE_N:-200000}
DIR=$(state_dir "$ROOT/.run/profile" profile)
[ -n "${BENCH_NO_INSTALL:-}" ] || install_extension
PORT=${BENCH_PROFILE_PORT:-17050}
cluster_stop "$DIR"
# The single-user runs and, below, the server under callgrind.
cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 1" \
    "jit = off" "autovacuum = off"
single() { as_pg env ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH="$LD_LIBRARY_PATH"} "$(pgbin)/postgres" --single -D "$DIR/data" -j postgres; }
floor_sql=$(bench_floor_sql "$DIR")
printf 'CREATE EXTENSION snowflake_id;\nCREATE SEQUENCE s;\n%s\n' "$floor_sql" | single >/dev/null

# name | expression | C function callgrind should count
GENS=("snowflake_nextval()|snowflake_nextval()|snowflake_nextval_entry"
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
    once=0
    STMT[$name]=$(awk -v t="$total" -v o="$once" -v n="$N" 'BEGIN {printf "%.0f", (t - o) / n}')
    if [ -n "$fn" ]; then
        incl=$(callgrind_annotate --inclusive=yes --threshold=100 "$out" 2>/dev/null | grep -E "[: ]$fn( |\$|\[)" | head -1 | awk '{print $1}' | tr -d ,)
        FN[$name]=$(awk -v t="${incl:-0}" -v o="$once" -v n="$N" 'BEGIN {printf "%.0f", (t - o) / n}')
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

# --- instructions per pgbench transaction --------------------------------
T1=200; T2=$(( T1 + ${BENCH_PROFILE_TXNS:-5000} ))
CG="$DIR/server-callgrind"
rm -rf "$CG"; mkdir -p "$CG"; is_root && chown postgres:postgres "$CG"
as_pg env ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH="$LD_LIBRARY_PATH"} valgrind --tool=callgrind \
    --callgrind-out-file="$CG/cg.%p" --toggle-collect=PostgresMain "$(pgbin)/postgres" -D "$DIR/data" > "$DIR/server-valgrind.log" 2>&1 &
trap 'cluster_stop "$DIR"' EXIT
for ((i = 0; i < 240; i++)); do
    "$(pgbin)/pg_isready" -q -h "$DIR" -p "$PORT" && break; sleep 0.5
done
"$(pgbin)/pg_isready" -q -h "$DIR" -p "$PORT" || { tail -20 "$DIR/server-valgrind.log" >&2; die "the server did not start under callgrind"; }
# Callgrind files in $CG that are not in the sorted list $1.
files_since() { comm -13 <(printf '%s\n' "$1") <(ls "$CG" | sort); }
# One `pgbench -t T` run of EXPR; sets NEW to the callgrind files of the
# backends it opened, once NBACKENDS of them are complete (a backend writes
# its file when it exits).
pgbench_run() {
    local expr="$1" t="$2" before f i
    before=$(ls "$CG" | sort)
    echo "SELECT $expr;" > "$DIR/pgbench.sql"; chmod 644 "$DIR/pgbench.sql"
    "$(pgbin)/pgbench" -n -M prepared -h "$DIR" -p "$PORT" -U postgres -c 1 -t "$t" -f "$DIR/pgbench.sql" postgres \
        > "$DIR/pgbench.out" 2>&1 || { cat "$DIR/pgbench.out" >&2; die "pgbench failed for $expr"; }
    grep -q "number of transactions actually processed: $t" "$DIR/pgbench.out" \
        || { cat "$DIR/pgbench.out" >&2; die "pgbench did not finish $t transactions of $expr"; }
    for ((i = 0; i < 600; i++)); do
        NEW=()
        for f in $(files_since "$before"); do
            # Background workers (the high-water writers) never enter
            # PostgresMain: their totals are 0, and they are not counted.
            if grep -qE '^totals: [1-9]' "$CG/$f"; then NEW+=("$CG/$f"); fi
        done
        [ "${#NEW[@]}" -ge "${NBACKENDS:-1}" ] && break
        sleep 0.2
    done
}
# Instructions of the backend that ran the transactions: the largest of the
# run's backends (pgbench also opens one short connection of its own).
backend_total() {
    pgbench_run "$@"
    [ "${#NEW[@]}" -ge "$NBACKENDS" ] || die "no callgrind output from the backends of $1"
    awk '/^totals:/ {if ($2 > b) b = $2} END {print b}' "${NEW[@]}"
}
# A warm-up run (the first backends after a start build caches that later
# ones read) tells how many backends one pgbench run opens.
NBACKENDS=0
pgbench_run "snowflake_nextval()" 10   # the first round of the high-water mark
pgbench_run "bench_floor()" 10; sleep 3
warm=$(ls "$CG" | sort)
pgbench_run "bench_floor()" 10; sleep 3
NBACKENDS=0
for f in $(files_since "$warm"); do
    if grep -qE '^totals: [1-9]' "$CG/$f"; then NBACKENDS=$((NBACKENDS + 1)); fi
done
(( NBACKENDS >= 1 )) || die "no callgrind output from pgbench's backends"
echo
echo "pgbench -M prepared -c 1, \`SELECT f();\`: server instructions per transaction (backend, $T1 and $T2 transactions, difference)"
echo
echo "Under callgrind a call comes about 50 times later than natively, so nearly every \`snowflake_nextval()\` starts a new millisecond and takes the general path: its row is an upper bound."
echo
echo "| generator | instructions per transaction | vs floor | floor's over the generator's |"
echo "|---|---:|---:|---:|"
declare -A TXN=()
PGB=("snowflake_nextval()|snowflake_nextval()" "nextval (bigserial)|nextval('s')"
     "floor (constant function)|bench_floor()" "constant expression (no call)|42::bigint")
for g in "${PGB[@]}"; do
    IFS='|' read -r name expr <<< "$g"
    a=$(backend_total "$expr" "$T1"); b=$(backend_total "$expr" "$T2")
    TXN[$name]=$(awk -v a="$a" -v b="$b" -v n=$((T2 - T1)) 'BEGIN {printf "%.0f", (b - a) / n}')
done
fl=${TXN["floor (constant function)"]}
for g in "${PGB[@]}"; do
    IFS='|' read -r name _ <<< "$g"
    printf '| %s | %s | %+d | %s× |\n' "$name" "${TXN[$name]}" "$(( ${TXN[$name]} - fl ))" \
        "$(awk -v a="$fl" -v b="${TXN[$name]}" 'BEGIN {printf "%.3f", a / b}')"
done
echo
echo "callgrind files: $DIR/callgrind.* (callgrind_annotate --inclusive=yes FILE), one per server process in $CG"
