#!/usr/bin/env bash
# Cancels and terminations of callers that wait, on a real cluster with the
# lead bound engaged (max_lead = 1ms, so a burst spends most of its time
# sleeping on back-pressure). Each burst asks for 200M IDs (~49 s at the
# format's ceiling); a cancel must end it with 57014 before it finishes its
# work, and the session is seen waiting before it is cancelled. Latencies
# are measured in the server, from the signal (or the statement timeout) to
# the caller no longer running, and reported (medians of 5), not asserted:
# latency targets live in the benchmarks; a busy machine cannot fail this
# script. Only a caller still running 30 s after its cancel fails it.
#  1. statement_timeout ends a sleeping burst with 57014.
#  2. pg_cancel_backend ends it with 57014.
#  3. Waiting for the reservation, still with max_lead = 1ms, and a
#     synchronous standby that never answers (synchronous_standby_names
#     names nobody), so that every renewal waits for it as a commit would:
#     - a caller waiting for another's renewal is ended by pg_cancel_backend
#       and by statement_timeout, with 57014;
#     - the caller that renews is ended by pg_cancel_backend with 57014,
#       and publishes nothing: no ID past a reservation the standby has not
#       confirmed;
#     - pg_terminate_backend of the renewing caller hands the renewal to a
#       waiting caller at once; once the requirement is lifted, IDs flow
#       again, above every earlier one;
#     - a fast shutdown completes while the reservation worker waits for
#       the standby;
#     - each of the first three starts on a freshly armed cluster, and is
#       made again (up to 10 times, the attempts reported) if the
#       high-water mark the last round published ran out before its
#       callers were in place: once the standby stops answering no round
#       can commit, so the window is a few seconds, which a busy machine
#       can miss.
#  4. pg_terminate_backend of a bulk burst that renews the durable
#     reservation for itself (max_lead = 1h, so its blocks run far ahead of
#     the reservation) at random moments, 10 times, while 4 pgbench clients
#     keep inserting rows keyed by snowflake_nextval(): the others are never
#     wedged (no failure, progress after every termination; the slowest
#     second of the run is reported) and the primary key never sees a
#     duplicate.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
BASE=$(state_dir "$ROOT/.run/it-cancels" it-cancels)
PORT=${SNOWFLAKE_IT_CANCELS_PORT:-15600}
DIR=$(state_dir "$BASE/cluster" it-cancels/cluster)
q() { PGOPTIONS="-c client_min_messages=warning" timeout 120 "$(pgbin)/psql" -X -q -h "$DIR" -p "$PORT" -U postgres -v ON_ERROR_STOP=1 "$@"; }
cleanup() { cluster_stop "$DIR"; }
trap cleanup EXIT
cluster_stop "$DIR"
cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 5" \
    "snowflake_id.max_lead = '1ms'"
cluster_up "$DIR"
q -c "CREATE EXTENSION snowflake_id"

# The median of the numbers read ("-" marks one not measured).
median() { grep -v '^-$' | sort -g | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "-")}'; }
# overrun MS LIMIT: MS - LIMIT, or "-" where MS was not measured.
overrun() { if [ "$1" = - ]; then echo -; else awk -v m="$1" -v l="$2" 'BEGIN {printf "%.1f", m - l}'; fi; }

# The burst every section starts, tagged TAG so that its session can be
# found: N IDs (default 200M, ~49 s at the format's ceiling).
burst() { echo "SELECT count(*) FROM snowflake_nextval(${2:-200000000}) /* $1 */"; }
# Wait (60 s at most) until a session runs the burst tagged TAG; print its pid.
burst_pid() {
    local tag="$1" pid t0=$SECONDS
    while [ $((SECONDS - t0)) -lt 60 ]; do
        pid=$(q -At -c "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%/* $tag */%' AND pid <> pg_backend_pid()")
        [ -n "$pid" ] && { echo "$pid"; return 0; }
        sleep 0.02
    done
    return 1
}

# Milliseconds until session PID no longer runs a statement, counted from
# FROM_SQL (an expression: clock_timestamp() right after SIGNAL_SQL, or the
# session's query_start), measured in the server at half-millisecond polls.
# A session still running 30 s later (the burst would need ~49 s to finish
# its work) was not stopped by the signal: that fails the script. Prints
# "-" where the session had already ended when first polled (a busy
# machine can start the poll after a statement timeout fired).
time_until_idle() {
    local pid="$1" signal_sql="$2" from_sql="$3"
    q -At -c "
    DO \$\$
    DECLARE t0 timestamptz; qs timestamptz;
    BEGIN
        SELECT query_start INTO qs FROM pg_stat_activity WHERE pid = $pid AND state = 'active';
        IF qs IS NULL THEN
            PERFORM set_config('it.ms', '-', false);
            RETURN;
        END IF;
        $signal_sql;
        t0 := $from_sql;
        LOOP
            PERFORM pg_stat_clear_snapshot();
            EXIT WHEN NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $pid AND state = 'active');
            IF clock_timestamp() > t0 + interval '30 seconds' THEN
                RAISE EXCEPTION 'session % still running 30 s later', $pid;
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
    q -c "SET statement_timeout = '300ms'" -c "$(burst timed)" >"$BASE/burst.out" 2>&1 &
    burst=$!
    pid=$(burst_pid timed) || die "the burst did not start"
    ms=$(time_until_idle "$pid" "PERFORM 1" "qs")
    overruns+=("$(overrun "$ms" 300)")
    wait "$burst" && die "the burst was not ended by statement_timeout"
    poll_until 10 grep -q "canceling statement due to statement timeout" "$BASE/burst.out" || { cat "$BASE/burst.out" >&2; die "no 57014 after statement_timeout"; }
done
med=$(printf '%s\n' "${overruns[@]}" | median)
log "statement_timeout = 300ms on a burst sleeping on back-pressure: 57014, ended this many ms after the timeout: ${overruns[*]} (median $med; reported, not asserted)"

# --- 2. pg_cancel_backend -------------------------------------------------------------
# A burst (snowflake_nextval(count)) sleeps at its share of the lead
# (snowflake_id.bulk_lead_share), through the same sleep as back-pressure,
# shown as the wait event type Extension; it is not counted in
# backpressure_waits. Each burst is seen sleeping before it is cancelled.
sleeping() {  # sleeping PID: the session is seen waiting on Extension (60 s at most)
    local t0=$SECONDS
    while [ $((SECONDS - t0)) -lt 60 ]; do
        [ "$(q -At -c "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1")" = Extension ] && return 0
    done
    return 1
}
cancels=()
for _ in 1 2 3 4 5; do
    q -c "$(burst cancelled)" >"$BASE/burst.out" 2>&1 &
    burst=$!
    pid=$(burst_pid cancelled) || die "the burst did not start"
    sleeping "$pid" || die "the burst was never seen sleeping"
    cancels+=("$(time_until_idle "$pid" "PERFORM pg_cancel_backend($pid)" "clock_timestamp()")")
    wait "$burst" && die "the burst was not cancelled"
    poll_until 10 grep -q "canceling statement due to user request" "$BASE/burst.out" || { cat "$BASE/burst.out" >&2; die "no 57014 after pg_cancel_backend"; }
done
med=$(printf '%s\n' "${cancels[@]}" | median)
log "pg_cancel_backend of a burst sleeping for the clock (each seen sleeping): 57014, ended after ms: ${cancels[*]} (median $med; reported, not asserted)"

# --- 3. waiting for the reservation: a synchronous standby that never answers ---------
# A new cluster: before its first ID the worker is idle (it renews only
# after recent activity), so the first caller renews. Once the standby
# stops answering, no high-water round can commit either (the writers'
# commits wait for it too), so callers can renew only up to the mark the
# last round published, a few seconds ahead: a renewal attempted later
# waits for a round and fails with 55000 ("high-water mark is not
# available"), as it must. How much of that window the script gets
# depends on the machine's speed, so each attempt below is armed afresh
# (a new cluster, then the standby that never answers; not a restart,
# after which the worker counts the IDs it continues above as recent
# activity and renews itself) and an attempt that met the mark before
# its callers were in place is made again, up to 10 times; the number of
# attempts is reported.
requires_nobody() { [ "$(q -At -c "SHOW synchronous_standby_names")" = nobody ]; }
arm() {
    cluster_stop "$DIR"
    cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 5" \
        "snowflake_id.max_lead = '1ms'"
    cluster_up "$DIR"
    q -c "CREATE EXTENSION snowflake_id"
    last0=$(q -At -c "SELECT coalesce(last_id, 0) FROM snowflake_stats()")
    q -c "ALTER SYSTEM SET synchronous_standby_names = 'nobody'" -c "SELECT pg_reload_conf()" >/dev/null
    poll_until 60 requires_nobody || die "synchronous_standby_names not in effect 60 s after the reload"
}
# met_the_mark TAG...: a burst among TAG ended on the high-water mark.
met_the_mark() {
    local tag
    for tag in "$@"; do grep -q "high-water mark is not available" "$BASE/$tag.out" 2>/dev/null && return 0; done
    return 1
}

# Wait (60 s at most) until session PID waits with a wait event matching
# WANT; print it. Fails at once if the session has ended.
wait_event_of() {
    local pid="$1" want="$2" ev t0=$SECONDS
    while [ $((SECONDS - t0)) -lt 60 ]; do
        ev=$(q -At -c "SELECT coalesce(wait_event, '') FROM pg_stat_activity WHERE pid = $pid AND state = 'active'
                       UNION ALL SELECT 'ended' WHERE NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $pid AND state = 'active')")
        [ "$ev" = ended ] && { echo ended; return 1; }
        [[ "$ev" =~ $want ]] && { echo "$ev"; return 0; }
        sleep 0.02
    done
    echo "${ev:-none}"; return 1
}
# Start a burst in the background, tagged TAG, after the statement PRE;
# print its pid.
start_burst() {
    local tag="$1" pre="${2:-SELECT 1}"
    q -c "$pre" -c "$(burst "$tag")" >"$BASE/$tag.out" 2>&1 &
    burst_pid "$tag"
}
WAITING='^(Extension|snowflake_id reservation)$'
stat_now() { q -At -c "SELECT reserved_until || ' ' || coalesce(last_id, 0) FROM snowflake_stats()"; }

# The client writes a statement's error to its file a moment after its
# backend goes idle: every check of an error polls for it (10 s, a bound
# only a hung machine reaches).
# One attempt of iteration I: 0 done, 2 the mark was met first (again).
holder_round() {
    local i="$1" h w t ev ms before
    h=$(start_burst "h$i") || die "holder burst $i did not start"
    ev=$(wait_event_of "$h" '^SyncRep$') || { wait; met_the_mark "h$i" && return 2; cat "$BASE/h$i.out" >&2; die "burst $i is not waiting for the standby (wait event: $ev)"; }
    # While it waits, no other caller can publish a reservation or issue an ID.
    before=$(stat_now)
    w=$(start_burst "w$i") || die "waiter burst $i did not start"
    ev=$(wait_event_of "$w" "$WAITING") || { q -At -c "SELECT pg_cancel_backend($h)" >/dev/null; wait; met_the_mark "w$i" && return 2; cat "$BASE/w$i.out" >&2; die "a second burst is not waiting for the renewal (wait event: $ev)"; }
    waiter_ms+=("$(time_until_idle "$w" "PERFORM pg_cancel_backend($w)" "clock_timestamp()")")
    poll_until 10 grep -q "canceling statement due to user request" "$BASE/w$i.out" || { cat "$BASE/w$i.out" >&2; die "no 57014 for the waiting caller"; }
    t=$(start_burst "t$i" "SET statement_timeout = '300ms'") || die "timed burst $i did not start"
    ms=$(time_until_idle "$t" "PERFORM 1" "qs")
    timeout_over+=("$(overrun "$ms" 300)")
    poll_until 10 grep -q "canceling statement due to statement timeout" "$BASE/t$i.out" || { cat "$BASE/t$i.out" >&2; die "no 57014 after statement_timeout while waiting for the renewal"; }
    holder_ms+=("$(time_until_idle "$h" "PERFORM pg_cancel_backend($h)" "clock_timestamp()")")
    poll_until 10 grep -q "ERROR:  canceling statement due to user request" "$BASE/h$i.out" || { cat "$BASE/h$i.out" >&2; die "the renewing caller did not fail with 57014"; }
    wait
    [ "$(stat_now)" = "$before" ] || die "a reservation the standby never confirmed was published, or IDs were issued ($before -> $(stat_now))"
    return 0
}

holder_ms=(); waiter_ms=(); timeout_over=(); attempts=0
for i in 1 2 3 4 5; do
    for ((try = 1; ; try++)); do
        [ "$try" -le 10 ] || die "iteration $i: 10 attempts all met the high-water mark before the callers were in place"
        attempts=$((attempts + 1))
        arm
        rc=0; holder_round "$i" || rc=$?
        [ "$rc" = 0 ] && break
    done
done
med_w=$(printf '%s\n' "${waiter_ms[@]}" | median)
med_t=$(printf '%s\n' "${timeout_over[@]}" | median)
med_h=$(printf '%s\n' "${holder_ms[@]}" | median)
log "waiting for another caller's renewal (each seen waiting): 57014; pg_cancel_backend ended it after ms: ${waiter_ms[*]} (median $med_w); statement_timeout = 300ms overran by ms: ${timeout_over[*]} (median $med_t) (reported, not asserted)"
log "renewing, waiting for a standby that never answers (each seen in SyncRep): pg_cancel_backend ended it with 57014 after ms: ${holder_ms[*]} (median $med_h, reported); nothing published, no ID issued (reserved_until and last_id unchanged); 5 iterations in $attempts attempt(s)"

# pg_terminate_backend of the renewing caller: a waiting caller takes over.
takeover() {
    local h w ev
    h=$(start_burst hx) || die "holder burst did not start"
    ev=$(wait_event_of "$h" '^SyncRep$') || { wait; met_the_mark hx && return 2; die "the burst is not waiting for the standby ($ev)"; }
    w=$(start_burst wx) || die "waiter burst did not start"
    ev=$(wait_event_of "$w" "$WAITING") || { q -At -c "SELECT pg_cancel_backend($h)" >/dev/null; wait; met_the_mark wx && return 2; die "the second burst is not waiting for the renewal ($ev)"; }
    [ "$(q -At -c "SELECT pg_terminate_backend($h)")" = t ] || die "could not terminate the renewing caller"
    ev=$(wait_event_of "$w" '^SyncRep$') || { wait; met_the_mark wx && return 2; die "the waiting caller did not take over the renewal after the renewing one was terminated (wait event: $ev)"; }
    q -c "ALTER SYSTEM RESET synchronous_standby_names" -c "SELECT pg_reload_conf()" >/dev/null
    ids_flow() { [ "$(q -At -c "SELECT last_id > $last0 FROM snowflake_stats()")" = t ]; }
    poll_until 60 ids_flow || die "no IDs issued within 60 s once the standby requirement was lifted"
    q -At -c "SELECT pg_cancel_backend($w)" >/dev/null
    wait || true
    return 0
}
for ((try = 1; ; try++)); do
    [ "$try" -le 10 ] || die "the takeover: 10 attempts all met the high-water mark before the callers were in place"
    arm
    rc=0; takeover || rc=$?
    [ "$rc" = 0 ] && break
done
next=$(q -At -c "SELECT snowflake_nextval()")
[ "$next" -gt "$last0" ] || die "an ID ($next) not above those issued before the stall ($last0)"
log "pg_terminate_backend of the renewing caller: a waiting caller took over the renewal ($try attempt(s)); with the requirement lifted IDs flow again, above every earlier one"

# Fast shutdown while the reservation worker waits for the standby.
q -c "ALTER SYSTEM SET synchronous_standby_names = 'nobody'" -c "SELECT pg_reload_conf()" >/dev/null
poll_until 60 requires_nobody || die "synchronous_standby_names not in effect 60 s after the reload"
# The reservation worker has no pg_stat_activity row (it connects to no
# database): it is the one renewing when the only caller waits for the
# lock, and no client backend waits for the standby. (The high-water
# writers, background workers, commit their marks like any commit, so
# they wait for the standby too.)
b=$(start_burst bw) || die "burst did not start"
wait_event_of "$b" "$WAITING" >/dev/null || die "the burst never waited for the reservation worker's renewal"
[ "$(q -At -c "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND backend_type = 'client backend'")" = 0 ] \
    || die "a backend, not the reservation worker, is renewing"
t0=$(date +%s.%N)
as_pg "$(pgbin)/pg_ctl" -D "$DIR/data" -m fast -w -t 120 stop >/dev/null 2>&1 \
    || die "a fast shutdown did not complete in 120 s while the reservation worker waited for the standby"
wait || true
log "fast shutdown with the reservation worker waiting for the standby: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}') s"

cluster_up "$DIR"
q -c "ALTER SYSTEM RESET synchronous_standby_names" -c "SELECT pg_reload_conf()" >/dev/null

# --- 4. pg_terminate_backend of a bulk burst that renews the reservation ---------------
q -c "ALTER SYSTEM SET snowflake_id.max_lead = '1h'" -c "SELECT pg_reload_conf()" >/dev/null
# New sessions see the setting once the postmaster has handled the reload.
lead_is_1h() { [ "$(q -At -c "SHOW snowflake_id.max_lead")" = 1h ]; }
poll_until 60 lead_is_1h || die "max_lead = 1h not in effect 60 s after the reload"
q -c "CREATE TABLE keyed (id bigint PRIMARY KEY DEFAULT snowflake_nextval())"
printf 'INSERT INTO keyed DEFAULT VALUES;\n' > "$BASE/one.sql"
# pgbench in 3-second rounds until the terminations are over, however long
# a busy machine makes them.
rm -f "$BASE/stop" "$BASE/pgbench.failed" "$BASE"/pgbench.*.out
(
    round=0
    while [ ! -e "$BASE/stop" ]; do
        round=$((round + 1))
        timeout 120 "$(pgbin)/pgbench" -n -h "$DIR" -p "$PORT" -U postgres -c 4 -j 2 -T 3 -P 1 \
            -f "$BASE/one.sql" postgres >"$BASE/pgbench.$round.out" 2>&1 \
            || echo "round $round: pgbench exited $?" >> "$BASE/pgbench.failed"
    done
) &
bench=$!
written0=$(q -At -c "SELECT reservations_written FROM snowflake_stats()")
terminated=0; waited=()
for i in $(seq 1 10); do
    q -c "$(burst "bulk$i" 50000000)" >/dev/null 2>&1 &
    burst=$!
    pid=$(burst_pid "bulk$i") || die "burst $i did not start"
    sleep "0.$(( (i * 37) % 9 + 1 ))"   # a pseudo-random moment in the burst, not a wait for a state
    [ "$(q -At -c "SELECT pg_terminate_backend($pid)")" = t ] && terminated=$((terminated + 1))
    wait "$burst" || true
    # The clients make progress after the termination: a row of theirs
    # newer than every ID issued when the burst was gone (60 s at most).
    before=$(q -At -c "SELECT last_id FROM snowflake_stats()")
    progressed() { [ "$(q -At -c "SELECT EXISTS (SELECT FROM keyed WHERE id > $before)")" = t ]; }
    poll_until 60 progressed || die "no client inserted a row in 60 s after burst $i was terminated: the others are wedged"
    waited+=("$POLL_MS")
done
written1=$(q -At -c "SELECT reservations_written FROM snowflake_stats()")
touch "$BASE/stop"
wait "$bench"
[ ! -e "$BASE/pgbench.failed" ] || { cat "$BASE/pgbench.failed" "$BASE"/pgbench.*.out >&2; die "pgbench failed while bursts were terminated"; }
for f in "$BASE"/pgbench.*.out; do
    pgbench_ok "$f" "pgbench had failures"
done
slowest=$(sed -nE 's/^progress: .* ([0-9.]+) tps.*/\1/p' "$BASE"/pgbench.*.out | sort -g | head -1)
log "pg_terminate_backend of $terminated bulk bursts renewing the reservation ($((written1 - written0)) renewals meanwhile): 4 pgbench clients never failed and inserted again after every termination (after ms: ${waited[*]}); slowest second: $slowest tps (reported, not asserted)"
rows=$(q -At -c "SELECT count(*) FROM keyed")
log "the clients' $rows rows all have distinct keys (the primary key is the judge)"

log "cancels: ok"
trap - EXIT
cleanup
rm -rf "$BASE"   # self-cleaning on success; kept for inspection on failure
