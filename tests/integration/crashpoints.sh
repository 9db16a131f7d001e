#!/usr/bin/env bash
# Crash at every step that makes an ID durable (issue 55, item 5). A test
# build (cargo feature `failpoints`, src/failpoint.rs) is installed into a
# private copy of this PostgreSQL; each named failure point is armed in
# turn, the workload that reaches it runs until the process there aborts
# (SIGABRT, as a crash ends it), and the server comes back by each start
# path:
#   crash     the postmaster's own crash restart (a child died);
#   nofile    then an immediate stop, the state file removed, a start
#             (what a crash followed by a lost file, or pg_upgrade, gives).
# After each start, with the clock 5 minutes behind every ID handed out
# before, the first ID of every database (all at once) and 200 more are
# above every ID any client saw, stored or not, and the server still
# mints. The points:
#   mark-raise-before-flush, mark-raise-after-flush    a mark's in-place raise
#   mark-insert-before-flush, mark-insert-after-flush  a new worker id's row
#   state-file-written, state-file-synced, state-file-renamed
#                                                      the state file's write
#   reservation-wal-inserted, reservation-wal-flushed  the reservation's record
#   startup-read-of-a-database                         the start-up read
# and, last, the start-up read made slow at that point: a call during it
# is refused after half a second, with a DETAIL that says how far the read has got.
# and, with the worker id leased from a registry (a second cluster), the
# lease's renewal, sent and answered (lease-renewal-sent,
# lease-renewal-answered): after the crash restart the server leases an
# id again, and mints above every earlier ID.
# PostgreSQL 18 only. CRASHPOINTS="state-file-synced" runs some only.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
if [ "$PG_MAJOR" != 18 ]; then
    skip_test "runs on 18"
fi
BASE=$(state_dir "$ROOT/.run/it-crashpoints" it-crashpoints)
PORT=${SNOWFLAKE_IT_PORT:-15350}
fake_clock "$BASE/faketime"
D="$BASE/s"
trap 'cluster_stop "$D"' EXIT
cluster_stop "$D"
POINTS=${CRASHPOINTS:-"mark-raise-before-flush mark-raise-after-flush mark-insert-before-flush mark-insert-after-flush state-file-written state-file-synced state-file-renamed reservation-wal-inserted reservation-wal-flushed startup-read-of-a-database"}
DBS="c1 c2 c3"

# The test build, in a private copy of this PostgreSQL.
PGCOPY="$BASE/pg"
src=$(cd "$(pgbin)/.." && pwd)
STAGE="$ROOT/target/install-stage/pg$PG_MAJOR-failpoints"
stamp="$(build_inputs) $PG_CONFIG failpoints"
if [ "$(cat "$STAGE.stamp" 2>/dev/null)" != "$stamp" ]; then
    log "building snowflake_id with its failure points (a test build) for PostgreSQL $PG_MAJOR"
    rm -rf "$STAGE" && mkdir -p "$STAGE"
    (cd "$ROOT" && env -u SOURCE_DATE_EPOCH cargo pgrx package --pg-config "$PG_CONFIG" --features failpoints \
        --out-dir "$STAGE" >"$STAGE.log" 2>&1) || { tail -30 "$STAGE.log" >&2; die "the failpoints build failed; see $STAGE.log"; }
    echo "$stamp" > "$STAGE.stamp"
fi
rm -rf "$PGCOPY"; cp -a "$src" "$PGCOPY"
cp "$STAGE$("$PG_CONFIG" --pkglibdir)/snowflake_id.so" "$PGCOPY/lib/"
cp "$STAGE$("$PG_CONFIG" --sharedir)"/extension/snowflake_id* "$PGCOPY/share/extension/"
is_root && chown -R postgres:postgres "$BASE"
PG_CONFIG="$PGCOPY/bin/pg_config"
grep -q "failure point" "$PGCOPY/lib/snowflake_id.so" || die "the test build has no failure points"

start() { fake_start "$D"; }
q() { pq "$D" "$PORT" -At "$@"; }
arm() { echo "$1" | as_pg tee "$D/data/snowflake_id.failpoint" >/dev/null; }
SEEN="$BASE/seen.ids"; : > "$SEEN"
seen_max() { sort -n "$SEEN" | tail -1; }
# mint DB: 50 IDs handed out (not stored); their largest is remembered.
mint() { q -d "$1" -c "SELECT max(x) FROM snowflake_nextval(50) x" >> "$SEEN" 2>/dev/null; }
# up: the server accepts connections again (after its own crash restart).
up() { q -c "SELECT 1" >/dev/null 2>&1; }
crashed() { [ ! -f "$D/data/snowflake_id.failpoint" ] && grep -q "failure point \"$1\" reached" "$D/server.log"; }

# check LABEL: the first ID of every database, all at once, and 200 more
# in each, above every ID handed out before.
check() {
    local max db id pids=() lo
    max=$(seen_max)
    for db in $DBS; do mint_when_ready "$D" "$PORT" "$db" > "$BASE/first.$db" 2>&1 & pids+=($!); done
    for p in "${pids[@]}"; do wait "$p" || true; done
    for db in $DBS; do
        id=$(grep -E '^[0-9]+$' "$BASE/first.$db" | tail -1 || true)
        [ -n "$id" ] || die "$1: no first ID in $db: $(cat "$BASE/first.$db")"
        [ "$id" -gt "$max" ] || die "$1: the first ID of $db, $id, is not above $max, an ID handed out before"
        lo=$(q -d "$db" -c "WITH ins AS (INSERT INTO t (v) SELECT g FROM generate_series(1, 200) g RETURNING id) SELECT min(id) FROM ins") \
            || die "$1: inserting in $db failed (a key minted again?)"
        [ "$lo" -gt "$max" ] || die "$1: a new ID in $db ($lo) is not above $max"
        q -d "$db" -c "SELECT max(id) FROM t" >> "$SEEN"
    done
    log "   $1: every first ID and 200 more in each database above $max"
}

setclock "+0"
mkdir -p "$D"; is_root && chown postgres:postgres "$D"
cluster_init "$D" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 30" \
    "snowflake_id.max_lead = '1h'" "restart_after_crash = on"
start
for db in $DBS; do
    q -c "CREATE DATABASE $db" >/dev/null
    q -d "$db" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
        -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), v int)" >/dev/null
    mint "$db"
done
w=30
for point in $POINTS; do
    case $point in lease-renewal-*) continue ;; esac   # below, with a registry
    log "$point"
    setclock "+0"
    arm "$point"
    # Drive the workload that reaches the point, until the process there
    # aborts (a bound only a hung system reaches).
    case $point in
        mark-insert-*)
            # A new worker id: each database's first ID of it writes its row.
            w=$((w + 1))
            q -c "ALTER SYSTEM SET snowflake_id.worker_id = $w" -c "SELECT pg_reload_conf()" >/dev/null ;;
        startup-read-of-a-database)
            cluster_stop "$D"; rm -f "$D/data/snowflake_id.state"; arm "$point"
            start ;;
    esac
    reach() {
        crashed "$point" && return 0
        for db in $DBS; do mint "$db" || true; done
        crashed "$point"
    }
    poll_until 60 reach || die "$point: not reached in 60 s"
    log "   reached: the process there aborted"
    # Start path 1: the postmaster's own crash restart, the clock behind.
    setclock "-5m"
    poll_until 60 up || die "$point: the server did not come back after its crash"
    check "$point, crash restart"
    # Start path 2: then an immediate stop and no state file.
    as_pg "$(pgbin)/pg_ctl" -D "$D/data" -m immediate -w stop >/dev/null
    rm -f "$D/data/snowflake_id.state"
    start
    check "$point, no state file"
done
# A slow start-up read (each reader sleeps 1.5 s at the point): a call
# during it fails after half a second with 55000 and a DETAIL that says how far the
# read has got (issue 55), and mints above every earlier ID once it is
# done.
log "a slow start-up read"
cluster_stop "$D"; rm -f "$D/data/snowflake_id.state"
echo "startup-read-of-a-database sleep=1500" | as_pg tee "$D/data/snowflake_id.failpoint" >/dev/null
setclock "-5m"; start
out=$(q -d c1 -c "SELECT snowflake_nextval()" 2>&1) && die "an ID during the start-up read: $out"
[[ "$out" == *"high-water mark is not available"* && "$out" == *"DETAIL:"*"the read has got through "*" of "*" databases"* ]] \
    || [[ "$out" == *"DETAIL:"*"has not listed the databases yet"* ]] || die "the refusal during the read does not say how far it has got: $out"
log "   refused during the read: $(grep DETAIL <<< "$out")"
rm -f "$D/data/snowflake_id.failpoint"
check "slow start-up read"
# The lease's renewal: the worker id leased from a registry.
if [ -z "${CRASHPOINTS:-}" ] || [[ " $CRASHPOINTS " == *" lease-renewal-"* ]]; then
    log "the lease's renewal (a registry on a second cluster)"
    R="$BASE/r"; RPORT=$((PORT + 1))
    cluster_stop "$R"; rm -rf "$R"; mkdir -p "$R"; is_root && chown postgres:postgres "$R"
    cluster_init "$R" "$RPORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 1"
    cluster_start "$R" || { tail -20 "$R/server.log" >&2; die "the registry did not start"; }
    trap 'cluster_stop "$D"; cluster_stop "$R"' EXIT
    pq "$R" "$RPORT" -At -c "CREATE ROLE snowflake_lease NOLOGIN" \
        -c "CREATE ROLE lease_d LOGIN IN ROLE snowflake_lease" -c "CREATE DATABASE registry" >/dev/null
    pq "$R" "$RPORT" -At -d registry -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
        -c "SELECT snowflake_registry_init(worker_bits => 10)" \
        -c "GRANT EXECUTE ON FUNCTION snowflake_registry_claim(uuid,text,integer,text,text,integer,integer,integer,bigint,integer,bigint),
                                      snowflake_registry_renew(integer,uuid,bigint,integer,bigint),
                                      snowflake_registry_release(integer,uuid,bigint) TO snowflake_lease" \
        -c "GRANT USAGE ON SCHEMA public TO snowflake_lease" >/dev/null
    q -c "ALTER SYSTEM SET snowflake_id.worker_id_source = 'registry'" \
        -c "ALTER SYSTEM SET snowflake_id.registry = 'host=$R port=$RPORT dbname=registry user=lease_d'" \
        -c "ALTER SYSTEM SET snowflake_id.lease_ttl = '3s'" >/dev/null
    setclock "+0"; cluster_stop "$D"; start
    leased() { [ -n "$(q -d c1 -c "SELECT lease_worker_id FROM snowflake_stats()" 2>/dev/null)" ]; }
    for point in lease-renewal-sent lease-renewal-answered; do
        log "$point"
        poll_until 60 leased || die "$point: no worker id leased in 60 s"
        for db in $DBS; do mint "$db"; done
        arm "$point"
        poll_until 60 crashed "$point" || die "$point: not reached in 60 s"
        log "   reached: the lease worker aborted there"
        setclock "-5m"
        poll_until 60 up || die "$point: the server did not come back after its crash"
        poll_until 60 leased || die "$point: no worker id leased again in 60 s after the crash"
        check "$point, crash restart"
        setclock "+0"
    done
fi
q -d c1 -c "SELECT snowflake_nextval()" >/dev/null || die "the server does not mint after the last point"
log "crashpoints: ok"
