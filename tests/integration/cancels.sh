#!/usr/bin/env bash
# Cancels and terminations of callers that wait, on a real cluster with the
# lead bound engaged (max_lead = 1ms, so a burst spends most of its time
# sleeping on back-pressure). Latencies are measured in the server: from
# the signal (or the statement timeout) to the caller no longer running.
#  1. statement_timeout ends a sleeping burst within 50 ms of the timeout
#     (median of 5; SQLSTATE 57014).
#  2. pg_cancel_backend ends it within 50 ms (median of 5).
#  3. pg_terminate_backend of a bulk burst that renews the durable
#     reservation for itself (max_lead = 1h, so its blocks run far ahead of
#     the reservation) at random moments, 10 times, while 4 pgbench clients
#     keep inserting rows keyed by snowflake_nextval(): the others are never
#     wedged (no failure, progress after every termination, every second of
#     the run) and the primary key never sees a duplicate.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
BASE=$(state_dir "$ROOT/.run/it-cancels" it-cancels)
PORT=${SNOWFLAKE_IT_CANCELS_PORT:-55830}
DIR=$(state_dir "$BASE/cluster" it-cancels/cluster)
q() { PGOPTIONS="-c client_min_messages=warning" timeout 120 "$(pgbin)/psql" -X -q -h "$DIR" -p "$PORT" -U postgres -v ON_ERROR_STOP=1 "$@"; }
cleanup() { cluster_stop "$DIR"; }
trap cleanup EXIT
cluster_stop "$DIR"
cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 5" \
    "snowflake_id.max_lead = '1ms'"
cluster_up "$DIR"
q -c "CREATE EXTENSION snowflake_id"

BURST="SELECT count(*) FROM snowflake_nextval(200000000)"   # ~49 s at the format's ceiling
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Wait until a session runs the burst and has slept on back-pressure; print its pid.
burst_pid() {
    local n pid
    for ((n = 0; n < 200; n++)); do
        pid=$(q -At -c "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%snowflake_nextval(200000000)%' AND pid <> pg_backend_pid()")
        [ -n "$pid" ] && { echo "$pid"; return 0; }
        sleep 0.05
    done
    return 1
}

# Milliseconds until session PID no longer runs a statement, counted from
# FROM_SQL (an expression: clock_timestamp() right after SIGNAL_SQL, or the
# session's query_start), measured in the server at half-millisecond polls.
time_until_idle() {
    local pid="$1" signal_sql="$2" from_sql="$3"
    q -At -c "
    DO \$\$
    DECLARE t0 timestamptz; qs timestamptz;
    BEGIN
        SELECT query_start INTO qs FROM pg_stat_activity WHERE pid = $pid;
        $signal_sql;
        t0 := $from_sql;
        LOOP
            PERFORM pg_stat_clear_snapshot();
            EXIT WHEN NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $pid AND state = 'active');
            IF clock_timestamp() > t0 + interval '10 seconds' THEN
                RAISE EXCEPTION 'session % still running 10 s later', $pid;
            END IF;
            PERFORM pg_sleep(0.0005);
        END LOOP;
        PERFORM set_config('it.ms', round(extract(epoch FROM clock_timestamp() - t0)::numeric * 1000, 1)::text, false);
    END \$\$;
    SELECT current_setting('it.ms')"
}

# --- 1. statement_timeout ------------------------------------------------------------
overruns=()
for _ in 1 2 3 4 5; do
    q -c "SET statement_timeout = '300ms'" -c "$BURST" >"$BASE/burst.out" 2>&1 &
    burst=$!
    pid=$(burst_pid) || die "the burst did not start"
    ms=$(time_until_idle "$pid" "PERFORM 1" "qs")
    overruns+=("$(awk -v m="$ms" 'BEGIN {printf "%.1f", m - 300}')")
    wait "$burst" && die "the burst was not ended by statement_timeout"
    grep -q "canceling statement due to statement timeout" "$BASE/burst.out" || { cat "$BASE/burst.out" >&2; die "no 57014 after statement_timeout"; }
done
med=$(printf '%s\n' "${overruns[@]}" | median)
log "statement_timeout = 300ms on a burst sleeping on back-pressure: 57014, ended this many ms after the timeout: ${overruns[*]} (median $med)"
awk -v m="$med" 'BEGIN {exit !(m <= 50)}' || die "statement_timeout overran by $med ms (median)"

# --- 2. pg_cancel_backend -------------------------------------------------------------
cancels=()
waits0=$(q -At -c "SELECT backpressure_waits FROM snowflake_stats()")
for _ in 1 2 3 4 5; do
    q -c "$BURST" >"$BASE/burst.out" 2>&1 &
    burst=$!
    pid=$(burst_pid) || die "the burst did not start"
    sleep 0.3
    cancels+=("$(time_until_idle "$pid" "PERFORM pg_cancel_backend($pid)" "clock_timestamp()")")
    wait "$burst" && die "the burst was not cancelled"
    grep -q "canceling statement due to user request" "$BASE/burst.out" || { cat "$BASE/burst.out" >&2; die "no 57014 after pg_cancel_backend"; }
done
waits1=$(q -At -c "SELECT backpressure_waits FROM snowflake_stats()")
[ "$waits1" -gt "$waits0" ] || die "the bursts never slept on back-pressure"
med=$(printf '%s\n' "${cancels[@]}" | median)
log "pg_cancel_backend of a burst sleeping on back-pressure ($((waits1 - waits0)) waits): ended after ms: ${cancels[*]} (median $med)"
awk -v m="$med" 'BEGIN {exit !(m <= 50)}' || die "pg_cancel_backend took $med ms (median) to end a sleeping burst"

# --- 3. pg_terminate_backend of a bulk burst that renews the reservation ---------------
q -c "ALTER SYSTEM SET snowflake_id.max_lead = '1h'" -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
q -c "CREATE TABLE keyed (id bigint PRIMARY KEY DEFAULT snowflake_nextval())"
printf 'INSERT INTO keyed DEFAULT VALUES;\n' > "$BASE/one.sql"
timeout 120 "$(pgbin)/pgbench" -n -h "$DIR" -p "$PORT" -U postgres -c 4 -j 2 -T 12 -P 1 \
    -f "$BASE/one.sql" postgres >"$BASE/pgbench.out" 2>&1 &
bench=$!
written0=$(q -At -c "SELECT reservations_written FROM snowflake_stats()")
terminated=0
for i in $(seq 1 10); do
    q -c "SELECT count(*) FROM snowflake_nextval(50000000)" >/dev/null 2>&1 &
    burst=$!
    pid=""; n=0
    while [ -z "$pid" ] && [ $n -lt 100 ]; do
        pid=$(q -At -c "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%snowflake_nextval(50000000)%' AND pid <> pg_backend_pid()")
        [ -n "$pid" ] || sleep 0.02
        n=$((n + 1))
    done
    [ -n "$pid" ] || die "burst $i did not start"
    sleep "0.$(( (i * 37) % 9 + 1 ))"
    [ "$(q -At -c "SELECT pg_terminate_backend($pid)")" = t ] && terminated=$((terminated + 1))
    wait "$burst" || true
    before=$(q -At -c "SELECT last_id FROM snowflake_stats()")
    sleep 0.2
    after=$(q -At -c "SELECT last_id FROM snowflake_stats()")
    [ "$after" -gt "$before" ] || die "no progress after terminating burst $i: the others are wedged"
done
written1=$(q -At -c "SELECT reservations_written FROM snowflake_stats()")
wait "$bench" || { cat "$BASE/pgbench.out" >&2; die "pgbench failed while bursts were terminated"; }
pgbench_clean "$BASE/pgbench.out" || { cat "$BASE/pgbench.out" >&2; die "pgbench had failures"; }
slowest=$(sed -nE 's/^progress: .* ([0-9.]+) tps.*/\1/p' "$BASE/pgbench.out" | sort -g | head -1)
log "pg_terminate_backend of $terminated bulk bursts renewing the reservation ($((written1 - written0)) renewals meanwhile): 4 pgbench clients never failed and never stalled (slowest second: $slowest tps)"
awk -v t="$slowest" 'BEGIN {exit !(t > 0)}' || die "a second with no progress for the other clients"
rows=$(q -At -c "SELECT count(*) FROM keyed")
log "the clients' $rows rows all have distinct keys (the primary key is the judge)"

log "cancels: ok"
trap - EXIT
cleanup
rm -rf "$BASE"   # self-cleaning on success; kept for inspection on failure
