#!/usr/bin/env bash
# snowflake_convert_plan()'s estimate against the real offline
# conversion's time (snowflake_convert_column()): a table of
# SNOWFLAKE_CONVERT_ROWS / 5 rows (2M on PostgreSQL 18, 60,000 on the
# other majors), converted after its plan; the estimate is within 4x of
# the time the conversion took, either way.
# The bound compares two times taken a second apart, so the step runs
# alone (ALONE in scripts/test.sh): beside another step, CI's run of
# 2026-11-29 at e058d7e saw 0.16 s estimated and 1.02 s taken on
# PostgreSQL 17. (Until then this was section 4 of convert_online.sh.)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
BASE=$(state_dir "$ROOT/.run/it-convert-estimate" it-convert-estimate)
PORT=${SNOWFLAKE_IT_CONVERT_ESTIMATE_PORT:-15960}
DIR=$(state_dir "$BASE/cluster" it-convert-estimate/cluster)
if [ "$PG_MAJOR" = 18 ]; then ROWS=${SNOWFLAKE_CONVERT_ROWS:-10000000}; else ROWS=${SNOWFLAKE_CONVERT_ROWS:-300000}; fi
q() { PGOPTIONS="-c client_min_messages=warning" timeout 600 "$(pgbin)/psql" -X -q -h "$DIR" -p "$PORT" -U postgres -v ON_ERROR_STOP=1 "$@"; }
trap 'cluster_stop "$DIR"' EXIT
cluster_stop "$DIR"
# The settings of convert_online.sh's cluster, where this check ran before.
cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 9" \
    "shared_buffers = '512MB'" "max_wal_size = '1GB'" "maintenance_work_mem = '256MB'"
cluster_up "$DIR"
q -c "CREATE EXTENSION snowflake_id" \
  -c "CREATE TABLE est (id serial PRIMARY KEY, customer int NOT NULL, amount int NOT NULL, n int NOT NULL DEFAULT 0)" \
  -c "INSERT INTO est (customer, amount) SELECT g % 1000, g % 997 FROM generate_series(1, $((ROWS / 5))) g" -c "ANALYZE est"
q -c "SELECT step, action, object, lock, pg_size_pretty(table_bytes) AS size, rows_estimate, estimated_time FROM snowflake_convert_plan('est', 'id')" >&2
est=$(q -At -c "SELECT round(extract(epoch FROM estimated_time)::numeric, 2) FROM snowflake_convert_plan('est', 'id') WHERE action = 'widen'")
t2=$(date +%s.%N)
q -c "SELECT count(*) FROM snowflake_convert_column('est', 'id')" >/dev/null
actual=$(awk -v a="$t2" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}')
log "snowflake_convert_plan estimated $est s to rewrite $((ROWS / 5)) rows; the conversion took $actual s"
awk -v e="$est" -v a="$actual" 'BEGIN {exit !(e > 0 && e / a < 4 && a / e < 4)}' || die "the estimate ($est s) is more than 4x off the real time ($actual s)"
log "convert_estimate: ok"
