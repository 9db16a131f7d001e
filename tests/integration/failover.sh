#!/usr/bin/env bash
# Failover with WAL-logged reservations, on real clusters:
#  1. The resource manager is registered (pg_get_wal_resource_managers) and
#     its records read well in pg_walinspect.
#  2. Synchronous failover. A primary and a pg_basebackup -R standby with
#     the same worker id, synchronous_standby_names = '*', the standby's
#     wall clock 1 h behind (libfaketime, monotonic clock untouched).
#     8 pgbench connections insert into a DEFAULT snowflake_nextval() table
#     while a client takes bursts of snowflake_nextval(count) that lead the
#     clock and records every ID it received. kill -9 of the primary,
#     pg_ctl promote: every ID issued after the promotion is above every ID
#     committed on the old primary and every ID any client received from it.
#  3. A standby that does not preload the library stops replaying with
#     PostgreSQL's "resource manager with ID 199 not registered"; with the
#     library added to shared_preload_libraries it catches up.
#  4. WAL overhead: snowflake_id records and bytes per second under steady
#     8-connection insert load (reported; expect about one record a second).
#  5. Point-in-time recovery: a base backup plus archived WAL, recovered to
#     a target time with the recovered server's clock an hour behind: its
#     first new IDs are above every ID in the recovered data.
#  7. Asynchronous failover, measured: replication to the standby is cut
#     while the primary takes leading bursts (and nextval() on a sequence), then the primary is killed and the standby, its clock an
#     hour behind, promoted. Reported: the reservation records and the
#     milliseconds of IDs the standby never received, how many new IDs are
#     at or below an ID a client had received, and the same for the
#     sequence. Asserted: new IDs are above every reservation the standby
#     did receive.
#  6. Rejoin (run right after 2): pg_rewind the old primary against the
#     new one, attach it as a standby (its clock an hour behind too), take
#     a leading burst on the new primary, fail back: the old primary's new
#     IDs are above everything the new primary issued.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
BASE=$(state_dir "$ROOT/.run/it-failover" it-failover)
PORT=${SNOWFLAKE_IT_FAILOVER_PORT:-15200}
PRIMARY="$BASE/primary"; STANDBY="$BASE/standby"; SPORT=$((PORT + 1))
mkdir -p "$PRIMARY" "$STANDBY"; is_root && chown postgres:postgres "$PRIMARY" "$STANDBY"
trap 'cluster_stop "$STANDBY"; cluster_stop "$PRIMARY"; cluster_stop "$BASE/restored"' EXIT
cluster_stop "$STANDBY"; cluster_stop "$PRIMARY"
FT=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1
[ -f "$FT" ] || die "libfaketime is missing (apt package libfaketime)"
CLOCK="$BASE/faketime"; echo "-3600s" > "$CLOCK"; chmod 644 "$CLOCK"
p() { pq "$PRIMARY" "$PORT" -At -F ' ' "$@"; }
s() { pq "$STANDBY" "$SPORT" -At -F ' ' "$@"; }
PRELOAD="shared_preload_libraries = 'snowflake_id'"

make_standby() { basebackup_standby "$PRIMARY" "$PORT" "$STANDBY" "$SPORT"; }
# replayed_to LSN [CLIENT]: wait until the standby (CLIENT, default s, the
# server in $STANDBY) has replayed LSN (120 s at most).
replayed_to() {
    local client="${2:-s}"
    has_replayed() { [ "$("$client" -c "SELECT pg_last_wal_replay_lsn() >= '$1'::pg_lsn" 2>/dev/null || true)" = t ]; }
    poll_until 120 has_replayed "$1"
}

cluster_init "$PRIMARY" "$PORT" "$PRELOAD" "snowflake_id.worker_id = 21" \
    "wal_level = replica" "max_wal_senders = 4" "wal_log_hints = on" "wal_keep_size = 512MB"
cluster_start "$PRIMARY" || { tail -20 "$PRIMARY/server.log" >&2; die "primary did not start"; }
p -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" -c "CREATE EXTENSION pg_walinspect" \
  -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), conn int NOT NULL DEFAULT pg_backend_pid())"

log "1. resource manager 199 registered; its records in pg_walinspect"
[ "$(p -c "SELECT rm_name, rm_builtin FROM pg_get_wal_resource_managers() WHERE rm_id = 199")" = "snowflake_id f" ] \
    || die "resource manager 199 not registered"
start_lsn=$(p -c "SELECT pg_current_wal_insert_lsn()")
p -c "SELECT snowflake_nextval(20000)" >/dev/null   # ~5 ms of IDs; the first call after start reserves
# Up to what is flushed: the reservation is, before any ID it covers is
# returned; a hint bit's record the call left after it need not be, and
# PostgreSQL 15's pg_walinspect refuses an end past the flush.
end_lsn=$(p -c "SELECT pg_current_wal_flush_lsn()")
desc=$(p -c "SELECT record_type || ': ' || description FROM pg_get_wal_records_info('$start_lsn', '$end_lsn')
              WHERE resource_manager = 'snowflake_id' ORDER BY start_lsn DESC LIMIT 1")
grep -qE "^RESERVE: reserved until [0-9-]+ [0-9:.]+\+00; worker 21, epoch 2024-01-01 00:00:00.000\+00, worker_bits 10, sequence_bits 12$" <<<"$desc" \
    || die "pg_walinspect shows: $desc"
log "   $desc"

log "2. synchronous failover: standby 1 h behind, 8 inserting connections and a leading burst client"
make_standby
cluster_start "$STANDBY" LD_PRELOAD="$FT" FAKETIME_TIMESTAMP_FILE="$CLOCK" FAKETIME_NO_CACHE=1 \
    FAKETIME_DONT_FAKE_MONOTONIC=1 || { tail -20 "$STANDBY/server.log" >&2; die "standby did not start"; }
p -c "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()" >/dev/null
is_sync() { [ "$(p -c "SELECT sync_state FROM pg_stat_replication")" = sync ]; }
poll_until 120 is_sync || die "the standby is not synchronous after 120 s"
skew=$(s -c "SELECT round(extract(epoch FROM now()) - $(date +%s))")
[ "$skew" -le -3590 ] || die "the standby's clock is not an hour behind ($skew s)"
printf 'INSERT INTO t DEFAULT VALUES;\n' > "$BASE/ins.sql"
"$(pgbin)/pgbench" -n -h "$PRIMARY" -p "$PORT" -U postgres -c 8 -j 2 -T 300 -f "$BASE/ins.sql" postgres \
    >"$BASE/pgbench.out" 2>&1 & bench=$!
# The burst client prints the largest ID of every burst it received.
( while :; do "$(pgbin)/psql" -X -q -At -h "$PRIMARY" -p "$PORT" -U postgres \
        -c "SELECT max(x) FROM snowflake_nextval(300000) x" 2>/dev/null || exit 0; done ) \
    >"$BASE/burst.ids" & burst=$!
# The crash comes once there is load to lose: 1000 committed rows and a
# burst received (a bound only a hung machine reaches), then 2 s more.
loaded() { [ -s "$BASE/burst.ids" ] && [ "$(p -c "SELECT count(*) > 1000 FROM t")" = t ]; }
poll_until 120 loaded || die "too little load in 120 s: $(p -c "SELECT count(*) FROM t") rows, bursts '$(cat "$BASE/burst.ids")'"
log "   load reached 1000 rows and a burst in $POLL_MS ms"
sleep 2   # more load, not a wait for a state
kill9 "$PRIMARY"
wait "$bench" || true; wait "$burst" || true
as_pg "$(pgbin)/pg_ctl" -D "$STANDBY/data" -w promote >/dev/null
[ "$(s -c "SELECT pg_is_in_recovery()")" = f ] || die "the standby was not promoted"
received=$(sort -n "$BASE/burst.ids" | tail -1)
read -r committed rows < <(s -c "SELECT max(id), count(*) FROM t")
[ -n "$received" ] && [ "$rows" -gt 1000 ] || die "too little load: $rows rows, bursts '$received'"
s -c "INSERT INTO t (conn) SELECT -1 FROM generate_series(1, 20000)"
read -r lo n < <(s -c "SELECT min(id), count(*) FROM t WHERE conn = -1")
[ "$n" = 20000 ] || die "inserts after promotion"
[ "$lo" -gt "$committed" ] || die "after failover: new ID $lo <= committed $committed"
[ "$lo" -gt "$received" ] || die "after failover: new ID $lo <= an ID a client received, $received"
log "   $rows committed rows, bursts up to $received; 20000 IDs after promotion, all above both (from $lo)"

log "6. rejoin: pg_rewind the old primary, attach it to the new one, fail back"
# Before 16, pg_rewind reads the source's timeline from its control file,
# which a promotion updates only at its next checkpoint.
s -c "CHECKPOINT"
as_pg env ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH="$LD_LIBRARY_PATH"} "$(pgbin)/pg_rewind" -D "$PRIMARY/data" \
    --source-server="host=$STANDBY port=$SPORT user=postgres dbname=postgres" -R >"$BASE/rewind.out" 2>&1 \
    || { cat "$BASE/rewind.out" >&2; die "pg_rewind failed"; }
# pg_rewind copied the new primary's configuration: this server's own port
# and socket again (the last setting wins).
{ echo "port = $PORT"; echo "unix_socket_directories = '$PRIMARY'"; } | as_pg tee -a "$PRIMARY/data/postgresql.conf" >/dev/null
cluster_start "$PRIMARY" LD_PRELOAD="$FT" FAKETIME_TIMESTAMP_FILE="$CLOCK" FAKETIME_NO_CACHE=1 \
    FAKETIME_DONT_FAKE_MONOTONIC=1 || { tail -20 "$PRIMARY/server.log" >&2; die "the rewound primary did not start"; }
[ "$(p -c "SELECT pg_is_in_recovery()")" = t ] || die "the rewound primary is not a standby"
newmax=$(s -c "SELECT max(x) FROM snowflake_nextval(300000) x")
replayed_to "$(s -c "SELECT pg_current_wal_insert_lsn()")" p || die "the rewound standby did not catch up"
cluster_stop "$STANDBY"
as_pg "$(pgbin)/pg_ctl" -D "$PRIMARY/data" -w promote >/dev/null
[ "$(p -c "SELECT pg_is_in_recovery()")" = f ] || die "fail-back promotion"
p -c "INSERT INTO t (conn) SELECT -2 FROM generate_series(1, 10000)"
read -r lo2 others < <(p -c "SELECT min(id) FILTER (WHERE conn = -2), max(id) FILTER (WHERE conn <> -2) FROM t")
[ "$lo2" -gt "$newmax" ] && [ "$lo2" -gt "$others" ] || die "after fail-back: new ID $lo2, new primary's burst $newmax, rows $others"
log "   rewound, replayed the new primary's burst (up to $newmax); after fail-back 10000 IDs from $lo2, above all"

log "3. a standby without the library stops replaying; with it, it catches up"
cluster_stop "$STANDBY"; cluster_stop "$PRIMARY"
# The killed postmaster left its socket lock behind (and its PID may be in
# use again by now): a new primary in a clean directory.
rm -rf "$PRIMARY/data" "$PRIMARY/server.log" "$PRIMARY"/.s.PGSQL.*
ARCHIVE="$BASE/archive"; rm -rf "$ARCHIVE"; mkdir -p "$ARCHIVE"; is_root && chown postgres:postgres "$ARCHIVE"
cluster_init "$PRIMARY" "$PORT" "$PRELOAD" "snowflake_id.worker_id = 22" "wal_level = replica" "max_wal_senders = 4" \
    "archive_mode = on" "archive_command = 'cp %p $ARCHIVE/%f'"
cluster_start "$PRIMARY" || die "primary did not start"
p -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
  -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), conn int)"
make_standby
as_pg sed -i "/^shared_preload_libraries/d" "$STANDBY/data/postgresql.conf"
cluster_start "$STANDBY" || die "standby did not start"
p -c "INSERT INTO t (conn) SELECT 1 FROM generate_series(1, 1000)"
lsn=$(p -c "SELECT pg_current_wal_insert_lsn()")
rmgr_refused() { grep -q "resource manager with ID 199 not registered" "$STANDBY/server.log"; }
poll_until 120 rmgr_refused || true   # asserted below
grep -q "FATAL:  resource manager with ID 199 not registered" "$STANDBY/server.log" \
    || { tail -20 "$STANDBY/server.log" >&2; die "no FATAL for the missing resource manager"; }
grep -qE 'HINT:  Include the extension module that implements this resource manager in "?shared_preload_libraries' "$STANDBY/server.log" \
    || die "no HINT for the missing resource manager"
cluster_stop "$STANDBY"
echo "$PRELOAD" | as_pg tee -a "$STANDBY/data/postgresql.conf" >/dev/null
cluster_start "$STANDBY" || { tail -20 "$STANDBY/server.log" >&2; die "standby did not start with the library"; }
replayed_to "$lsn" || die "the standby did not catch up after preloading"
[ "$(s -c "SELECT count(*) FROM t")" = 1000 ] || die "rows missing on the standby"
log "   FATAL 'resource manager with ID 199 not registered' with its HINT; preloaded, it replays to $lsn"

log "4. WAL overhead under steady 8-connection insert load (10 s)"
cluster_stop "$STANDBY"
p -c "SET client_min_messages = warning" -c "CREATE EXTENSION pg_walinspect"
from=$(p -c "SELECT pg_current_wal_insert_lsn()")
"$(pgbin)/pgbench" -n -h "$PRIMARY" -p "$PORT" -U postgres -c 8 -j 2 -T 10 -f "$BASE/ins.sql" postgres >"$BASE/wal.out" 2>&1 \
    || { cat "$BASE/wal.out" >&2; die "pgbench failed"; }
to=$(p -c "SELECT pg_current_wal_insert_lsn()")
read -r recs bytes all_bytes < <(p -c "
    SELECT count(*) FILTER (WHERE resource_manager = 'snowflake_id'),
           coalesce(sum(record_length) FILTER (WHERE resource_manager = 'snowflake_id'), 0),
           pg_wal_lsn_diff('$to', '$from')::bigint
      FROM pg_get_wal_records_info('$from', '$to')")
tps=$(sed -nE 's/^tps = ([0-9.]+).*/\1/p' "$BASE/wal.out" | head -1)
log "   $recs snowflake_id records ($bytes bytes) in 10 s of $tps inserts/s: $(( recs / 10 ))/s, $(( bytes / 10 )) B/s, of $(( all_bytes / 10 )) B/s of WAL in all"
[ "$recs" -ge 3 ] && [ "$recs" -le 40 ] || die "unexpected number of reservation records: $recs in 10 s"

log "5. point-in-time recovery to a target time, recovered clock an hour behind"
BACKUP="$BASE/backup"; RESTORED="$BASE/restored"; RPORT=$((PORT + 2))
mkdir -p "$RESTORED"; is_root && chown postgres:postgres "$RESTORED"
cluster_stop "$RESTORED"; rm -rf "$BACKUP" "$RESTORED/data" "$RESTORED/server.log" "$RESTORED"/.s.PGSQL.*
as_pg "$(pgbin)/pg_basebackup" -h "$PRIMARY" -p "$PORT" -U postgres -D "$BACKUP" -X stream -c fast
"$(pgbin)/pgbench" -n -h "$PRIMARY" -p "$PORT" -U postgres -c 4 -j 2 -T 3 -f "$BASE/ins.sql" postgres >/dev/null 2>&1
p -c "SELECT max(x) FROM snowflake_nextval(500000) x" >/dev/null   # a burst ahead of the clock
target=$(p -c "SELECT now()")
sleep 0.2
"$(pgbin)/pgbench" -n -h "$PRIMARY" -p "$PORT" -U postgres -c 4 -j 2 -T 2 -f "$BASE/ins.sql" postgres >/dev/null 2>&1
# The segment holding the target is archived before the backup is restored.
seg=$(p -c "SELECT pg_walfile_name(pg_switch_wal())")
archived() { [ "$(p -c "SELECT coalesce(last_archived_wal >= '$seg', false) FROM pg_stat_archiver")" = t ]; }
poll_until 120 archived || die "WAL segment $seg not archived in 120 s"
as_pg cp -a "$BACKUP" "$RESTORED/data"
{
    echo "port = $RPORT"; echo "unix_socket_directories = '$RESTORED'"; echo "archive_mode = off"
    echo "restore_command = 'cp $ARCHIVE/%f %p'"; echo "recovery_target_time = '$target'"
    echo "recovery_target_action = 'promote'"
} | as_pg tee -a "$RESTORED/data/postgresql.conf" >/dev/null
as_pg touch "$RESTORED/data/recovery.signal"
cluster_start "$RESTORED" LD_PRELOAD="$FT" FAKETIME_TIMESTAMP_FILE="$CLOCK" FAKETIME_NO_CACHE=1 \
    FAKETIME_DONT_FAKE_MONOTONIC=1 || { tail -20 "$RESTORED/server.log" >&2; die "restored server did not start"; }
r() { pq "$RESTORED" "$RPORT" -At -F ' ' "$@"; }
recovered() { [ "$(r -c "SELECT pg_is_in_recovery()" 2>/dev/null || true)" = f ]; }
poll_until 300 recovered || true   # asserted below
[ "$(r -c "SELECT pg_is_in_recovery()")" = f ] || { tail -20 "$RESTORED/server.log" >&2; die "recovery did not end"; }
read -r rmax rn < <(r -c "SELECT max(id), count(*) FROM t")
pmax=$(p -c "SELECT max(id) FROM t")
[ "$rmax" -lt "$pmax" ] || die "the recovery target did not cut the data ($rmax vs $pmax)"
r -c "INSERT INTO t (conn) SELECT -5 FROM generate_series(1, 10000)"
lo=$(r -c "SELECT min(id) FROM t WHERE conn = -5")
[ "$lo" -gt "$rmax" ] || die "after point-in-time recovery: new ID $lo <= recovered $rmax"
cluster_stop "$RESTORED"
log "   recovered $rn rows to $target; 10000 new IDs (clock 1 h behind) all above them, from $lo"

log "7. asynchronous failover with replication cut for 4 s: the exposure"
p -c "CREATE SEQUENCE seq" -c "SELECT nextval('seq')" >/dev/null
make_standby
cluster_start "$STANDBY" LD_PRELOAD="$FT" FAKETIME_TIMESTAMP_FILE="$CLOCK" FAKETIME_NO_CACHE=1 \
    FAKETIME_DONT_FAKE_MONOTONIC=1 || { tail -20 "$STANDBY/server.log" >&2; die "standby did not start"; }
p -c "SELECT max(x) FROM snowflake_nextval(100000) x" >/dev/null
replayed_to "$(p -c "SELECT pg_current_wal_insert_lsn()")" || die "the async standby did not catch up"
# Cut replication: without primary_conninfo the WAL receiver stops and
# stays stopped (pausing it would not do: what the primary sends meanwhile
# waits in the socket and arrives when it resumes).
s -c "ALTER SYSTEM SET primary_conninfo = ''" -c "SELECT pg_reload_conf()" >/dev/null
no_receiver() { [ -z "$(s -c "SELECT pid FROM pg_stat_wal_receiver")" ]; }
poll_until 120 no_receiver || true   # asserted below
[ -z "$(s -c "SELECT pid FROM pg_stat_wal_receiver")" ] || die "the WAL receiver did not stop"
received_lsn=$(s -c "SELECT pg_last_wal_receive_lsn()")
: > "$BASE/async.ids"
# 4 s of bursts: longer than the 2 s reservation window, so the primary
# renews reservations the standby never receives.
for _ in $(seq 1 8); do
    p -c "SELECT max(x) FROM snowflake_nextval(300000) x" >> "$BASE/async.ids"
    sleep 0.5
done
seqmax=$(p -c "SELECT max(nextval('seq')) FROM generate_series(1, 100000)")
kill9 "$PRIMARY"
# The highest reservation the standby replayed, as it keeps it in its own
# state file (read before the promoted server writes reservations of its own).
replayed_ms=$(sed -n 's/^reserved_until_ms=//p' "$STANDBY/data/snowflake_id.state")
as_pg "$(pgbin)/pg_ctl" -D "$STANDBY/data" -w promote >/dev/null
[ "$(s -c "SELECT pg_is_in_recovery()")" = f ] || die "the async standby was not promoted"
primary_ms=$(sed -n 's/^reserved_until_ms=//p' "$PRIMARY/data/snowflake_id.state")
# pg_waldump cannot load the library: our records show as custom199.
missing=$(as_pg "$(pgbin)/pg_waldump" -p "$PRIMARY/data/pg_wal" -s "$received_lsn" -r custom199 2>/dev/null | grep -c "rmgr: custom199" || true)
received=$(sort -n "$BASE/async.ids" | tail -1)
s -c "INSERT INTO t (conn) SELECT -7 FROM generate_series(1, 20000)"
read -r lo at_risk < <(s -c "SELECT min(id), count(*) FILTER (WHERE id <= $received) FROM t WHERE conn = -7")
floor=$(s -c "SELECT snowflake_max_id(to_timestamp($replayed_ms / 1000.0))")
[ "$lo" -gt "$floor" ] || die "new ID $lo not above the replayed reservation ($replayed_ms)"
seqnext=$(s -c "SELECT nextval('seq')")
log "   not received: $missing reservation record(s), $(( primary_ms - replayed_ms )) ms of IDs; of 20000 new IDs (from $lo), $at_risk at or below one a client had received ($received)"
log "   the sequence: $(( seqmax - seqnext + 1 > 0 ? seqmax - seqnext + 1 : 0 )) values handed out by the old primary are handed out again ($seqnext .. $seqmax)"
cluster_stop "$STANDBY"
