#!/usr/bin/env bash
# Command 1: install prerequisites, build and install the extension, start
# a local PostgreSQL with it preloaded, and show it working. Leaves the
# server running. Re-running is safe: it rebuilds, restarts and re-demos.
#
#   PG_VERSION           PostgreSQL major to run: 15, 16, 17 or 18 (default 18)
#   PG_CONFIG            or: the pg_config of an existing PostgreSQL to use instead
#   SNOWFLAKE_PORT       port of the local server (default 54329)
#   SNOWFLAKE_WORKER_ID  its snowflake_id.worker_id (default 1)
set -euo pipefail
USER_PG_CONFIG=${PG_CONFIG:-}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
PORT=${SNOWFLAKE_PORT:-54329}
WORKER_ID=${SNOWFLAKE_WORKER_ID:-1}

if [ -n "$USER_PG_CONFIG" ]; then
    bash "$ROOT/scripts/prereqs.sh" "$USER_PG_CONFIG"
    export PG_CONFIG="$USER_PG_CONFIG"
else
    bash "$ROOT/scripts/prereqs.sh" "${PG_VERSION:-18}"
    select_pg "${PG_VERSION:-18}"
fi
export PATH="$HOME/.cargo/bin:$PATH"
DIR=$(state_dir "$ROOT/.run/run-$PG_MAJOR" "run-$PG_MAJOR")
stop_demo_servers "$DIR"   # one demo server at a time
cluster_stop "$DIR"            # a running server would keep the old library
install_extension              # by rename: never over a loaded library

if [ ! -f "$DIR/data/PG_VERSION" ]; then
    log "initialising a cluster in $DIR/data"
    cluster_init "$DIR" "$PORT" \
        "shared_preload_libraries = 'snowflake_id'" \
        "snowflake_id.worker_id = $WORKER_ID"
    sed -i 's/^fsync = off$/fsync = on/' "$DIR/data/postgresql.conf"
fi
log "starting PostgreSQL on port $PORT (socket in $DIR)"
cluster_start "$DIR" || { tail -20 "$DIR/server.log" >&2; die "server did not start"; }

log "demo: a table keyed by snowflake_nextval(), filled from 8 connections at once"
pq "$DIR" "$PORT" <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id;
DROP TABLE IF EXISTS demo_orders;
CREATE TABLE demo_orders (
    id      bigint PRIMARY KEY DEFAULT snowflake_nextval(),
    item    text NOT NULL,
    conn    int  NOT NULL DEFAULT pg_backend_pid()
);
SQL
printf "INSERT INTO demo_orders (item) VALUES ('item ' || :client_id);\n" > "$DIR/demo.sql"
"$(pgbin)/pgbench" -n -h "$DIR" -p "$PORT" -U postgres -c 8 -j 2 -t 250 -f "$DIR/demo.sql" postgres \
    > "$DIR/demo.pgbench" 2>&1 || { cat "$DIR/demo.pgbench" >&2; die "pgbench failed"; }
grep -E "transactions actually processed" "$DIR/demo.pgbench" >&2
pq "$DIR" "$PORT" -P pager=off <<'SQL'
\echo
\echo '-- every row got a unique ID from the shared generator:'
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_ids, count(DISTINCT conn) AS connections
  FROM demo_orders;
\echo '-- decoded:'
SELECT o.id, d.ts, d.worker_id, d.sequence, o.item
  FROM demo_orders o, snowflake_decode(o.id) d
 ORDER BY o.id DESC LIMIT 5;
\echo '-- a time-range query is a primary-key range scan: the rows of 20 ms'
\echo '-- in the middle of the demo, found through the primary key:'
ANALYZE demo_orders;
SELECT d.ts AS t FROM demo_orders o, snowflake_decode(o.id) d
 ORDER BY o.id OFFSET 1000 LIMIT 1 \gset
EXPLAIN (COSTS OFF)
SELECT count(*) FROM demo_orders
 WHERE id BETWEEN snowflake_min_id(:'t') AND snowflake_max_id(timestamptz :'t' + interval '20 ms');
SELECT count(*) AS rows_in_those_20_ms FROM demo_orders
 WHERE id BETWEEN snowflake_min_id(:'t') AND snowflake_max_id(timestamptz :'t' + interval '20 ms');
SQL

cat <<EOM

snowflake_id is running on PostgreSQL $PG_MAJOR (worker_id $WORKER_ID).
  connect:  bash scripts/psql.sh        (or: make psql)
  stop:     bash scripts/stop.sh        (or: make stop)
  log:      $DIR/server.log
EOM
