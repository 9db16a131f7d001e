#!/usr/bin/env bash
# pg_partman 4.7 (Debian's postgresql-15-partman, so PostgreSQL 15 only;
# other majors skip it): daily partitions in ID space, created with the
# recipe tests/integration/partman.sql that docs/operations.md shows.
#  - create_parent from three days ago; rows keyed for those days land in
#    their day's partition;
#  - run_maintenance() premakes today's and tomorrow's partitions ahead of
#    the data, and new rows from snowflake_nextval() land in today's, none
#    in the default partition;
#  - retention drops the oldest day at the next run_maintenance(), and
#    premake stays two days ahead.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
if [ "$PG_MAJOR" != 15 ]; then
    skip_test "runs on 15: Debian packages pg_partman for its own PostgreSQL"
fi
[ -f "$("$PG_CONFIG" --sharedir)/extension/pg_partman.control" ] \
    || die "pg_partman is not installed for PostgreSQL 15 (apt install postgresql-15-partman)"
BASE=$(state_dir "$ROOT/.run/it-partman" it-partman)
PORT=${SNOWFLAKE_IT_PARTMAN_PORT:-15750}
DIR=$(state_dir "$BASE/cluster" it-partman/cluster)
q() { PGOPTIONS="-c client_min_messages=warning -c TimeZone=UTC" timeout 120 "$(pgbin)/psql" -X -q -h "$DIR" -p "$PORT" -U postgres -v ON_ERROR_STOP=1 "$@"; }
cleanup() { cluster_stop "$DIR"; }
trap cleanup EXIT
cluster_stop "$DIR"
cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 4"
cluster_up "$DIR"
q -c "CREATE EXTENSION snowflake_id"
q -f "$ROOT/tests/integration/partman.sql" >/dev/null

# Partitions as days relative to today (d-3 .. d+2), and rows in each.
layout() {
    q -At -c "
    SELECT string_agg(CASE WHEN c.relname = 'events_default' THEN 'default'
                           ELSE 'd' || to_char((snowflake_timestamp(substring(c.relname FROM 'events_p([0-9]+)')::bigint)::date
                                                - current_date), 'SGFM0') END
                      || ':' || (SELECT count(*) FROM events e WHERE e.tableoid = c.oid),
                      ' ' ORDER BY c.relname = 'events_default', c.relname)
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'events'::regclass"
}
q -c "INSERT INTO events SELECT snowflake_compose(current_date - d + interval '1 hour' * h, 7, h), 'day -' || d
        FROM generate_series(1, 3) d, generate_series(0, 23) h"
got=$(layout); log "after create_parent and the old rows: $got"
[ "$got" = "d-3:24 d-2:24 d-1:24 default:0" ] || die "unexpected partitions after create_parent: $got"

q -c "SELECT partman.run_maintenance('public.events')" >/dev/null
q -c "INSERT INTO events (payload) SELECT 'now' FROM generate_series(1, 10)"
got=$(layout); log "after run_maintenance and 10 new rows: $got"
[ "$got" = "d-3:24 d-2:24 d-1:24 d+0:10 d+1:0 default:0" ] || die "unexpected partitions after premake: $got"

q -c "SELECT partman.run_maintenance('public.events')" >/dev/null
got=$(layout); log "after retention (two days of IDs): $got"
[ "$got" = "d-2:24 d-1:24 d+0:10 d+1:0 d+2:0 default:0" ] || die "unexpected partitions after retention: $got"
log "partman: ok"
trap - EXIT
cleanup
rm -rf "$BASE"   # self-cleaning on success; kept for inspection on failure
