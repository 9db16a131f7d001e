#!/usr/bin/env bash
# Concurrent single-row INSERTs by key type (issue 17): does hash-
# partitioning a snowflake-keyed table lift insert throughput, and how do
# time-ordered and random keys compare once the primary-key index no
# longer fits in shared_buffers?
#
# For each regime, one fresh cluster; for each key, a table
# (id <key> PRIMARY KEY DEFAULT <expr>, v int), prefilled with PREFILL rows;
# then pgbench -M prepared runs "INSERT INTO t (v) VALUES (1)" with C
# clients for T seconds, keys interleaved and rotated, REPS times. Medians
# of TPS, and ratios to snowflake_nextval() on an unpartitioned table, in
# the same run.
#
#   bash bench/inserts.sh            both regimes (about 15 minutes on 2 cores)
#   bash bench/inserts.sh --smoke    toy sizes (CI: the runner must not rot)
#
#   PG_VERSION (18), INS_CLIENTS ("2 8"), INS_SECONDS (8), INS_REPS (3),
#   INS_PREFILL (5000000: rows per table in the "index outgrows
#   shared_buffers" regime), INS_PORT (17150), INS_OUT (.run/bench/inserts.md)
set -euo pipefail
SMOKE=0; [ "${1:-}" = "--smoke" ] && SMOKE=1
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
[ -n "${SNOWFLAKE_PREREQS_DONE:-}" ] || bash "$ROOT/scripts/prereqs.sh" "${PG_VERSION:-18}"
select_pg "${PG_VERSION:-18}"
PORT=${INS_PORT:-17150}
if [ $SMOKE = 1 ]; then
    CLIENTS="2"; SECS=1; REPS=1; PREFILL=20000
else
    CLIENTS=${INS_CLIENTS:-"2 8"}; SECS=${INS_SECONDS:-8}; REPS=${INS_REPS:-3}; PREFILL=${INS_PREFILL:-5000000}
fi
DIR=$(state_dir "$ROOT/.run/bench-inserts" bench-inserts)
OUT=${INS_OUT:-$ROOT/.run/bench/inserts.md}
mkdir -p "$(dirname "$OUT")"
cleanup() { cluster_stop "$DIR"; }
trap cleanup EXIT
[ -n "${BENCH_NO_INSTALL:-}" ] || install_extension
q() { "$(pgbin)/psql" -X -q -At -h "$DIR" -p "$PORT" -U postgres -v ON_ERROR_STOP=1 "$@"; }

# name|type|default|partitions (8: bench/recipes/hash_partitions.sql)
KEYS=("bigserial|bigint|nextval('SEQ')|0"
      "snowflake_nextval()|bigint|snowflake_nextval()|0"
      "snowflake_nextval(), 8 hash partitions|bigint|snowflake_nextval()|8"
      "gen_random_uuid()|uuid|gen_random_uuid()|0")
[ "$PG_MAJOR" -ge 18 ] && KEYS+=("uuidv7()|uuid|uuidv7()|0")

declare -A TPS=()
regime() {  # regime LABEL SHARED_BUFFERS PREFILL
    local label="$1" sb="$2" prefill="$3" i name type expr parts t rep c
    log "inserts: $label (shared_buffers = $sb, $prefill rows per table before measuring)"
    cluster_stop "$DIR"
    cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 1" \
        "shared_buffers = '$sb'" "max_wal_size = '8GB'" "checkpoint_timeout = '30min'" \
        "autovacuum = off" "synchronous_commit = off" "jit = off" \
        "max_connections = $(( $(printf '%s\n' 40 $CLIENTS | sort -n | tail -1) + 10 ))"
    cluster_up "$DIR"
    q -c "CREATE EXTENSION snowflake_id"
    for i in "${!KEYS[@]}"; do
        IFS='|' read -r name type expr parts <<< "${KEYS[$i]}"
        t="k$i"
        q -c "CREATE SEQUENCE ${t}_seq"
        if [ "$parts" -gt 0 ]; then
            # The recipe docs/operations.md shows.
            q -v tbl="$t" -f "$ROOT/bench/recipes/hash_partitions.sql" >/dev/null
        else
            q -c "CREATE TABLE $t (id $type PRIMARY KEY DEFAULT ${expr/SEQ/${t}_seq}, v int NOT NULL)"
        fi
        [ "$prefill" -gt 0 ] && q -c "INSERT INTO $t (v) SELECT 1 FROM generate_series(1, $prefill)"
    done
    q -c "VACUUM ANALYZE" -c "CHECKPOINT"
    for ((rep = 0; rep < REPS; rep++)); do
        for c in $CLIENTS; do
            for k in "${!KEYS[@]}"; do
                i=$(( (k + rep) % ${#KEYS[@]} ))
                IFS='|' read -r name _ _ _ <<< "${KEYS[$i]}"
                echo "INSERT INTO k$i (v) VALUES (1);" > "$DIR/ins.sql"
                "$(pgbin)/pgbench" -n -M prepared -h "$DIR" -p "$PORT" -U postgres -c "$c" -j "$c" -T "$SECS" \
                    -f "$DIR/ins.sql" postgres > "$DIR/pgbench.out" 2>&1 || { cat "$DIR/pgbench.out" >&2; die "pgbench failed for $name"; }
                pgbench_ok "$DIR/pgbench.out" "pgbench had failures for $name"
                TPS["$label|$c|$i"]+="$(sed -nE 's/^tps = ([0-9.]+).*/\1/p' "$DIR/pgbench.out" | head -1) "
            done
        done
    done
    # Index size against shared_buffers, for the report.
    for i in "${!KEYS[@]}"; do
        TPS["$label|size|$i"]=$(q -c "SELECT pg_size_pretty(sum(pg_relation_size(indexrelid))) FROM pg_index
                                       WHERE indrelid = 'k$i'::regclass OR indrelid IN (SELECT relid FROM pg_partition_tree('k$i'))")
    done
}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

regime "index in shared_buffers" "1GB" 0
regime "index outgrows shared_buffers" "64MB" "$PREFILL"

{
    echo "# Concurrent single-row inserts by key type"
    echo
    echo "PostgreSQL $PG_MAJOR, $(nproc) cores; pgbench -M prepared, \`INSERT INTO t (v) VALUES (1)\`, ${SECS} s per sample, median of $REPS; ratio to snowflake_nextval() unpartitioned in the same regime and client count."
    for label in "index in shared_buffers" "index outgrows shared_buffers"; do
        echo
        echo "## $label"
        echo
        printf '| key |'; for c in $CLIENTS; do printf ' %s clients, TPS | ratio |' "$c"; done; echo ' primary-key index after the run |'
        printf '|---|'; for _ in $CLIENTS; do printf -- '---:|---:|'; done; echo '---:|'
        for i in "${!KEYS[@]}"; do
            IFS='|' read -r name _ _ _ <<< "${KEYS[$i]}"
            printf '| %s |' "$name"
            for c in $CLIENTS; do
                m=$(echo "${TPS["$label|$c|$i"]}" | median); base=$(echo "${TPS["$label|$c|1"]}" | median)
                printf ' %s | %s |' "$(printf '%.0f' "$m")" "$(awk -v a="$m" -v b="$base" 'BEGIN {printf "%.2f", a / b}')"
            done
            echo " ${TPS["$label|size|$i"]} |"
        done
    done
} > "$OUT"
cat "$OUT"
log "inserts: report in $OUT"
