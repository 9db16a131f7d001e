#!/usr/bin/env bash
# Real clusters, one scenario each:
#  1. A custom layout (epoch 2020-01-01, 5 worker bits, 16 sequence bits)
#     mints and decodes IDs in that layout.
#  2. Invalid configurations refuse to start, with a clear log message:
#     no layout or worker id is ever silently replaced by a default, nor
#     the file of the keys of public IDs (a relative path, or one inside
#     the data directory).
#  3. An epoch in the future: snowflake_nextval() fails with 22008.
#  4. The burst lead bound: with max_lead = 50ms and 8 sequence bits (a
#     ceiling of 256 IDs/ms, far below what one backend computes even on a
#     busy machine, so the burst reaches the bound whatever the load: it
#     must count back-pressure waits), 500k IDs in one statement end no
#     more than ~50 ms ahead of the clock, and took at least as long as
#     the ceiling allows: callers slept, and no ID was duplicated.
#  5. A real backward clock step of one hour (libfaketime) under inserts:
#     no error, no duplicate, no decrease, one WARNING, and no caller waits
#     for the clock (no back-pressure wait; the time taken is reported).
#  6. A server-wide synchronous_commit = off (as benchmarks and bulk
#     loads run): the reservation worker renews and re-logs the
#     reservation outside any transaction, and keeps running (0.7.0's
#     first build crashed it in a restart loop): each act is awaited by
#     polling the WAL for the worker's records (pg_walinspect).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
BASE=$(state_dir "$ROOT/.run/it-config" it-config)
PORT=${SNOWFLAKE_IT_PORT:-15050}
DIR="$BASE/c"
trap 'cluster_stop "$DIR"' EXIT
mkdir -p "$DIR"; is_root && chown postgres:postgres "$DIR"
cluster_stop "$DIR"
PRELOAD="shared_preload_libraries = 'snowflake_id'"

# 1. Custom layout.
cluster_init "$DIR" "$PORT" "$PRELOAD" "snowflake_id.worker_id = 31" \
    "snowflake_id.epoch = '2020-01-01 00:00:00+00'" "snowflake_id.worker_bits = 5" "snowflake_id.sequence_bits = 16"
cluster_start "$DIR"
read -r w skew ctx shift_ok < <(pq "$DIR" "$PORT" -At -F ' ' <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
WITH g AS (SELECT snowflake_nextval() AS id)
SELECT snowflake_worker_id(id),
       abs(extract(epoch FROM snowflake_timestamp(id) - clock_timestamp()))::int,
       (SELECT context FROM pg_settings WHERE name = 'snowflake_id.epoch'),
       -- worker field sits right above 16 sequence bits; epoch is 2020
       ((id >> 16) & 31) = 31 AND (id >> 21) = (extract(epoch FROM snowflake_timestamp(id)) * 1000)::bigint - 1577836800000
  FROM g;
SQL
)
[ "$w" = 31 ] && [ "$skew" -le 2 ] && [ "$ctx" = postmaster ] && [ "$shift_ok" = t ] \
    || die "custom layout: worker=$w skew=$skew context=$ctx fields_ok=$shift_ok"
log "custom layout 2020-01-01 42/5/16 with worker 31: ok"
cluster_stop "$DIR"

# 2. Invalid configurations refuse to start.
refuses() {  # refuses "expected log text" conf-lines...
    local want="$1"; shift
    cluster_init "$DIR" "$PORT" "$PRELOAD" "$@"
    if cluster_start "$DIR" 2>/dev/null; then cluster_stop "$DIR"; die "started with: $*"; fi
    grep -qF "$want" "$DIR/server.log" || { cat "$DIR/server.log" >&2; die "log lacks: $want"; }
    log "refused to start with [$*]: $(grep -F "$want" "$DIR/server.log" | head -1 | cut -c1-140)"
}
refuses "leaves 23 timestamp bits, fewer than the minimum of 35" \
    "snowflake_id.worker_id = 1" "snowflake_id.worker_bits = 20" "snowflake_id.sequence_bits = 20"
refuses 'invalid value "yesterday" for parameter "snowflake_id.epoch"' \
    "snowflake_id.worker_id = 1" "snowflake_id.epoch = 'yesterday'"
refuses 'invalid value "5000" for parameter "snowflake_id.worker_id"' "snowflake_id.worker_id = 5000"
refuses 'invalid value "40" for parameter "snowflake_id.worker_bits"' \
    "snowflake_id.worker_id = 1" "snowflake_id.worker_bits = 40"
# The keys of public IDs: never silently the data directory's file instead.
refuses 'invalid value "relative/keys" for parameter "snowflake_id.public_keys_file"' \
    "snowflake_id.worker_id = 1" "snowflake_id.public_keys_file = 'relative/keys'"
refuses 'It is inside the data directory, where every base backup copies it' \
    "snowflake_id.worker_id = 1" "snowflake_id.public_keys_file = '$DIR/data/keys'"

# 3. Epoch in the future.
cluster_init "$DIR" "$PORT" "$PRELOAD" "snowflake_id.worker_id = 1" "snowflake_id.epoch = '2090-01-01'"
cluster_start "$DIR"
out=$(pq "$DIR" "$PORT" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
      -c '\set VERBOSITY verbose' -c "SELECT snowflake_nextval()" 2>&1 || true)
grep -q "ERROR:  22008: current time is before the snowflake epoch" <<<"$out" || die "future epoch: $out"
log "future epoch: 22008 current time is before the snowflake epoch"
cluster_stop "$DIR"

# 4. Burst lead bound.
cluster_init "$DIR" "$PORT" "$PRELOAD" "snowflake_id.worker_id = 3" "snowflake_id.max_lead = 50ms" \
    "snowflake_id.sequence_bits = 8"
cluster_start "$DIR"
# The lead is read in the same statement, right after the last ID (a busy
# machine can only make it smaller). IDs of one backend are strictly
# increasing (checked below with lag()), so the burst has no duplicate.
read -r n lead_ms elapsed_ms waits < <(pq "$DIR" "$PORT" -At -F ' ' <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
SELECT count(*),
       round(extract(epoch FROM snowflake_timestamp(max(id)) - clock_timestamp()) * 1000),
       round(extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000),
       (SELECT backpressure_waits FROM snowflake_stats())
  FROM (SELECT snowflake_nextval() AS id FROM generate_series(1, 500000)) s;
SQL
)
dec=$(pq "$DIR" "$PORT" -At -c "SELECT count(*) FROM (SELECT id, lag(id) OVER (ORDER BY n) AS p
        FROM (SELECT n, snowflake_nextval() AS id FROM generate_series(1, 500000) n) a) b WHERE p >= id")
min_ms=$((500000 / 256 - 51 - 1))
log "burst: $n IDs in ${elapsed_ms} ms, final lead ${lead_ms} ms (bound 50), format floor ${min_ms} ms, $waits back-pressure waits, $dec decreases"
[ "$n" = 500000 ] && [ "$dec" = 0 ] || die "burst: count $n, $dec decreases"
[ "$waits" -gt 0 ] || die "burst: no back-pressure wait: the burst never reached the bound, the test proves nothing"
[ "${lead_ms%.*}" -le 51 ] || die "burst: lead ${lead_ms} ms exceeds max_lead 50 ms"
[ "${elapsed_ms%.*}" -ge "$min_ms" ] || die "burst: ${elapsed_ms} ms is faster than the format allows"
cluster_stop "$DIR"

# 5. A real backward clock step (libfaketime moves the wall clock only; the
#    monotonic clock never steps on real systems).
FT=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1
[ -f "$FT" ] || die "libfaketime is missing (apt package libfaketime)"
echo "+0" > "$BASE/faketime"; chmod 644 "$BASE/faketime"
cluster_init "$DIR" "$PORT" "$PRELOAD" "snowflake_id.worker_id = 9"
cluster_start "$DIR" LD_PRELOAD="$FT" FAKETIME_TIMESTAMP_FILE="$BASE/faketime" FAKETIME_NO_CACHE=1 \
    FAKETIME_DONT_FAKE_MONOTONIC=1
pq "$DIR" "$PORT" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
    -c "CREATE TABLE s (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), phase int, n serial)"
pq "$DIR" "$PORT" -c "INSERT INTO s (phase) SELECT 1 FROM generate_series(1, 20000)"
waits0=$(pq "$DIR" "$PORT" -At -c "SELECT backpressure_waits FROM snowflake_stats()")
echo "-1h" > "$BASE/faketime"
start=$(date +%s%N)
pq "$DIR" "$PORT" -c "INSERT INTO s (phase) SELECT 2 FROM generate_series(1, 20000)" 2>"$BASE/step.err"
for _ in $(seq 1 20); do pq "$DIR" "$PORT" -c "INSERT INTO s (phase) VALUES (3)" 2>>"$BASE/step.err"; done
took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
waits1=$(pq "$DIR" "$PORT" -At -c "SELECT backpressure_waits FROM snowflake_stats()")
echo "+0" > "$BASE/faketime"
pq "$DIR" "$PORT" -c "INSERT INTO s (phase) SELECT 4 FROM generate_series(1, 1000)"
read -r rows dec < <(pq "$DIR" "$PORT" -At -F ' ' -c "
    SELECT count(*),
           (SELECT count(*) FROM (SELECT id, lag(id) OVER (ORDER BY n) p FROM s) x WHERE p >= id)
      FROM s")
grep -q "system clock moved backwards by 3[56][0-9][0-9]\.[0-9]* s" "$DIR/server.log" \
    || { tail -20 "$DIR/server.log" >&2; die "no clock-step WARNING in the log"; }
warnings=$(grep -c "system clock moved backwards" "$DIR/server.log")
log "clock step -1h: $rows rows, $dec decreases, $((waits1 - waits0)) back-pressure waits and ${took_ms} ms (reported) for 20020 inserts after the step, $warnings WARNING(s)"
[ "$rows" = 41020 ] && [ "$dec" = 0 ] || die "clock step: rows=$rows decreases=$dec"
[ "$warnings" = 1 ] || die "expected exactly one (rate-limited) WARNING, got $warnings"
[ "$waits1" = "$waits0" ] || die "inserts after the step waited for the clock $((waits1 - waits0)) times: callers stalled"

# 6. synchronous_commit = off in the server's configuration.
cluster_stop "$DIR"
cluster_init "$DIR" "$PORT" "$PRELOAD" "snowflake_id.worker_id = 5" "synchronous_commit = off"
cluster_start "$DIR"
# The worker has no database connection, so no row in pg_stat_activity.
worker_pid() { ps --ppid "$(head -1 "$DIR/data/postmaster.pid")" -o pid=,args= | awk '/snowflake_id reservation/ {print $1}'; }
pq "$DIR" "$PORT" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" -c "CREATE EXTENSION pg_walinspect" \
    -c "CREATE FUNCTION logged_since(pg_lsn) RETURNS bool LANGUAGE plpgsql AS \$\$
        BEGIN
            RETURN EXISTS (SELECT FROM pg_get_wal_records_info(\$1, pg_current_wal_flush_lsn())
                            WHERE resource_manager = 'snowflake_id');
        EXCEPTION WHEN others THEN RETURN false;   -- nothing flushed after the LSN yet
        END \$\$"
first=$(pq "$DIR" "$PORT" -At -c "SELECT max(id) FROM snowflake_nextval(200000) id")
# logged_since LSN: a reservation record of ours in the WAL after LSN.
logged_since() { [ "$(pq "$DIR" "$PORT" -At -c "SELECT logged_since('$1')")" = t ]; }
redo() { pq "$DIR" "$PORT" -At -c "SELECT redo_lsn FROM pg_control_checkpoint()"; }
# A checkpoint passes the last reservation record: the worker logs it again.
pq "$DIR" "$PORT" -c "CHECKPOINT"
poll_until 120 logged_since "$(redo)" || die "synchronous_commit = off: no reservation record in 120 s after a checkpoint"
relog_ms=$POLL_MS
have_worker() { [ -n "$(worker_pid)" ]; }
poll_until 60 have_worker || die "synchronous_commit = off: no reservation worker"
before=$(worker_pid)
# A restart: the worker's first act is to log the reservation again (after
# the shutdown checkpoint).
cluster_stop "$DIR"; cluster_start "$DIR"
poll_until 120 logged_since "$(redo)" || die "synchronous_commit = off: no reservation record in 120 s after a restart"
restart_ms=$POLL_MS
lsn=$(pq "$DIR" "$PORT" -At -c "SELECT pg_current_wal_insert_lsn()")
pq "$DIR" "$PORT" -At -c "SELECT count(*) FROM snowflake_nextval(200000)" >/dev/null
poll_until 120 logged_since "$lsn" || die "synchronous_commit = off: no renewal in 120 s after a burst"
poll_until 60 have_worker || die "synchronous_commit = off: no reservation worker after the restart"
after=$(worker_pid)
log "synchronous_commit = off: reservation records $relog_ms ms after a checkpoint and $restart_ms ms after a restart (reported)"
if grep -q "terminated by signal" "$DIR/server.log"; then
    grep "terminated by signal" "$DIR/server.log" | head -3 >&2
    die "synchronous_commit = off: the reservation worker crashed"
fi
[ -n "$before" ] && [ -n "$after" ] && [ "$after" = "$(worker_pid)" ] \
    || die "synchronous_commit = off: the reservation worker is not running steadily (pids: '$before' '$after')"
last=$(pq "$DIR" "$PORT" -At -c "SELECT snowflake_nextval() > $first")
[ "$last" = t ] || die "synchronous_commit = off: an ID after the restart is not above the ones before"
log "synchronous_commit = off: the reservation worker re-logged and renewed without a crash; IDs increase across a restart"
