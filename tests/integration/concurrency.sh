#!/usr/bin/env bash
# Real-cluster concurrency: 8 pgbench connections in one database plus 4 in
# a second database insert for 10 s into tables keyed by
# DEFAULT snowflake_nextval(). Checks: zero failures, zero duplicates (the
# PRIMARY KEY is the judge, and the two databases' IDs never overlap), the
# worker id of every row, and strict increase within each connection. Then
# a reload of snowflake_id.worker_id takes effect without a restart and
# IDs keep increasing.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
DIR=$(state_dir "$ROOT/.run/it-concurrency" it-concurrency)
PORT=${SNOWFLAKE_IT_PORT:-15000}
DURATION=${SNOWFLAKE_IT_SECONDS:-10}
trap 'cluster_stop "$DIR"' EXIT
cluster_stop "$DIR"
cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 42"
cluster_start "$DIR"

pq "$DIR" "$PORT" -c "CREATE DATABASE db2"
for db in postgres db2; do
    pq "$DIR" "$PORT" -d "$db" <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
CREATE SEQUENCE ord_seq;
CREATE TABLE ids (
    id   bigint PRIMARY KEY DEFAULT snowflake_nextval(),
    conn int    NOT NULL DEFAULT pg_backend_pid(),
    ord  bigint NOT NULL DEFAULT nextval('ord_seq')
);
SQL
done
printf 'INSERT INTO ids DEFAULT VALUES;\n' > "$DIR/one.sql"
printf 'INSERT INTO ids (conn) SELECT pg_backend_pid() FROM generate_series(1, 10);\n' > "$DIR/ten.sql"

bench() {  # bench DB CLIENTS OUTFILE
    "$(pgbin)/pgbench" -n -h "$DIR" -p "$PORT" -U postgres -c "$2" -j 2 -T "$DURATION" \
        -f "$DIR/one.sql@9" -f "$DIR/ten.sql@1" "$1" >"$3" 2>&1
}
log "pgbench: 8 clients on postgres + 4 clients on db2 for ${DURATION}s"
bench postgres 8 "$DIR/b1.out" & p1=$!
bench db2 4 "$DIR/b2.out" & p2=$!
rc=0; wait $p1 || rc=$?; wait $p2 || rc=$?
cat "$DIR/b1.out" "$DIR/b2.out" | grep -E "processed|failed|clients" >&2
[ $rc = 0 ] || { cat "$DIR/b1.out" "$DIR/b2.out" >&2; die "pgbench failed"; }
for f in b1 b2; do
    pgbench_ok "$DIR/$f.out" "$f: failed transactions"
done

check() {  # check DB EXPECTED_CONNS
    pq "$DIR" "$PORT" -d "$1" -At -F ' ' -c "
        SELECT count(*), count(DISTINCT id), count(DISTINCT conn),
               count(*) FILTER (WHERE snowflake_worker_id(id) <> 42),
               (SELECT count(*) FROM (SELECT id, lag(id) OVER (PARTITION BY conn ORDER BY ord) AS prev
                                        FROM ids) s WHERE prev >= id)
          FROM ids"
}
read -r n1 d1 c1 w1 dec1 < <(check postgres)
read -r n2 d2 c2 w2 dec2 < <(check db2)
log "postgres: $n1 rows, $d1 distinct, $c1 connections, $w1 wrong worker, $dec1 decreases"
log "db2:      $n2 rows, $d2 distinct, $c2 connections, $w2 wrong worker, $dec2 decreases"
[ "$n1" -gt 1000 ] && [ "$n2" -gt 1000 ] || die "too few rows inserted"
[ "$n1" = "$d1" ] && [ "$n2" = "$d2" ] || die "duplicate IDs"
[ "$c1" = 8 ] && [ "$c2" = 4 ] || die "expected 8 and 4 connections, got $c1 and $c2"
[ "$w1" = 0 ] && [ "$w2" = 0 ] || die "rows with a wrong worker id"
[ "$dec1" = 0 ] && [ "$dec2" = 0 ] || die "IDs not strictly increasing within a connection"

# The two databases share one generator: their IDs never collide.
pq "$DIR" "$PORT" -d db2 -c "\\copy (SELECT id FROM ids) TO '$DIR/db2.ids'"
overlap=$(pq "$DIR" "$PORT" -At <<SQL
CREATE TEMP TABLE db2_ids (id bigint PRIMARY KEY);
\\copy db2_ids FROM '$DIR/db2.ids'
SELECT count(*) FROM ids JOIN db2_ids USING (id);
SQL
)
[ "$overlap" = 0 ] || die "$overlap IDs appear in both databases"
log "no ID appears in both databases ($((n1 + n2)) rows in all)"

# worker_id is reloadable: ALTER SYSTEM + pg_reload_conf, no restart.
before_max=$(pq "$DIR" "$PORT" -At -c "SELECT max(id) FROM ids")
pq "$DIR" "$PORT" -c "ALTER SYSTEM SET snowflake_id.worker_id = 7" -c "SELECT pg_reload_conf()" >/dev/null
# New sessions see the setting once the postmaster has handled the reload.
worker_is_7() { [ "$(pq "$DIR" "$PORT" -At -c "SHOW snowflake_id.worker_id")" = 7 ]; }
poll_until 60 worker_is_7 || die "worker_id = 7 not in effect 60 s after the reload"
read -r nw bad mn < <(pq "$DIR" "$PORT" -At -F ' ' -c "
    INSERT INTO ids (conn) SELECT 0 FROM generate_series(1, 1000);
    SELECT count(*), count(*) FILTER (WHERE snowflake_worker_id(id) <> 7), min(id) FROM ids WHERE conn = 0")
[ "$nw" = 1000 ] && [ "$bad" = 0 ] || die "after reload: $bad of $nw rows lack worker id 7"
[ "$mn" -gt "$before_max" ] || die "IDs after the worker-id change are not larger"
log "worker_id reload: 1000 new rows with worker 7, all above the previous maximum"
echo "concurrency: $((n1 + n2)) rows from 12 connections in 2 databases, 0 duplicates" > "$ROOT/.run/it-concurrency.summary"
