#!/usr/bin/env bash
# What the high-water mark costs and how long it makes minting wait, by
# the number of databases that have the extension (issue 46, items 2-4).
# Not a test: it reports, and asserts nothing.
#
# For each N in DBS_COUNTS, one fresh cluster with PostgreSQL's defaults
# (max_worker_processes = 8), N databases with the extension, and 3 of
# them minting: a client INSERTs into each once a second, each INSERT on
# a new connection (what a web application without a pool does). Over
# DBS_SECONDS it measures
#   - the server's CPU beyond the same INSERTs keyed by a plain sequence
#     (% of one core: every process of the cluster, exited ones included,
#     from /proc; the sequence's window runs right after, as long),
#   - the WAL written per minute (and, beside it, in the sequence's
#     window: what the server writes anyway, autovacuum's first visits
#     to new databases included), and commits per second beyond the
#     INSERTs' own (pg_stat_database),
#   - the INSERTs' latency (median and slowest) and failures;
# then, one after the other,
#   - the first INSERT after a 60 s pause (latency),
#   - parallel queries holding every free worker slot while the INSERTs
#     go on (failures, slowest),
#   - a database created and one dropped every second while they go on,
#   - five clean restarts in a row: how long from "pg_ctl start" to the
#     first ID, and how far the last ID then leads the clock;
#   - ten crash restarts in a row (pg_ctl stop -m immediate), and ten
#     starts without the state file (what pg_upgrade and a lost file
#     give), each followed by INSERTs at 20/s into the first and into the
#     last database, each on a new connection (issue 55): the time from
#     "accepting connections" to the first ID in the first and in the
#     last database (the slowest of ten), the slowest INSERT and the
#     failures (55000 at once during the start-up read, by design), and
#     how far the last ID leads the clock after the ten.
# The INSERT latency includes the connection; compare rows, not absolutes
# across machines. A plain sequence's INSERT on a new connection is
# measured in the same cluster as the floor.
#
#   bash bench/databases.sh              1, 200 and 1,000 databases
#   bash bench/databases.sh --smoke      2 databases, short windows
#
# It builds and installs the extension first, unless BENCH_NO_INSTALL=1
# (the test suite's smoke run, which installed it already).
#
#   DBS_COUNTS ("1 200 1000"), DBS_SECONDS (60), DBS_PORT (17250),
#   DBS_OUT (.run/bench/databases.md), DBS_PARTS ("steady starts": the
#   steady-state windows with the pause, the parallel queries, the churn
#   and the clean restarts; the crash restarts and the starts without a
#   state file)
set -euo pipefail
SMOKE=0; [ "${1:-}" = "--smoke" ] && SMOKE=1
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
[ -n "${SNOWFLAKE_PREREQS_DONE:-}" ] || bash "$ROOT/scripts/prereqs.sh" 18
select_pg 18
[ -n "${BENCH_NO_INSTALL:-}" ] || install_extension
PORT=${DBS_PORT:-17250}
if [ $SMOKE = 1 ]; then
    COUNTS="2"; SECS=5; PAUSE=2
else
    COUNTS=${DBS_COUNTS:-"1 200 1000"}; SECS=${DBS_SECONDS:-60}; PAUSE=60
fi
OUT=${DBS_OUT:-$ROOT/.run/bench/databases.md}
PARTS=${DBS_PARTS:-"steady starts"}
part() { [[ " $PARTS " == *" $1 "* ]]; }
STARTS=10; [ $SMOKE = 1 ] && STARTS=2
mkdir -p "$(dirname "$OUT")"
DIR=$(state_dir "$ROOT/.run/bench-databases" bench-databases)
trap 'kill $(jobs -p) 2>/dev/null || true; cluster_stop "$DIR"' EXIT
q() { local db="$1"; shift; pq "$DIR" "$PORT" -d "$db" -At "$@"; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# CPU ticks (utime + stime) of the whole cluster so far: the postmaster,
# its live children, and the children it has reaped (cutime + cstime:
# short-lived connections and workers count too).
server_cpu() {
    local pm pid total
    pm=$(head -1 "$DIR/data/postmaster.pid")
    total=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$pm/stat")
    for pid in $(pgrep -P "$pm" || true); do
        [ -r "/proc/$pid/stat" ] || continue
        total=$(( total + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0) ))
    done
    echo "$total"
}

# inserter DB SECONDS FILE: one INSERT a second on a new connection;
# each line of FILE is "ms ok|err".
inserter() {
    local db="$1" end=$((SECONDS + $2)) file="$3" t0 t1
    : > "$file"
    while [ $SECONDS -lt "$end" ]; do
        t0=$(now_ms)
        if q "$db" -c "INSERT INTO orders (item) VALUES ('book')" >/dev/null 2>&1; then
            t1=$(now_ms); echo "$((t1 - t0)) ok" >> "$file"
        else
            t1=$(now_ms); echo "$((t1 - t0)) err" >> "$file"
        fi
        sleep "$(awk -v d=$((t1 - t0)) 'BEGIN { s = 1 - d / 1000; print (s > 0 ? s : 0) }')"
    done
}

# stats FILE...: "median ms / slowest ms / failures"
stats() {
    cat "$@" | awk '{ print $1 }' | sort -n > "$DIR/lat"
    local n med max errs
    n=$(wc -l < "$DIR/lat"); med=$(sed -n "$(( (n + 1) / 2 ))p" "$DIR/lat"); max=$(tail -1 "$DIR/lat")
    errs=$(cat "$@" | grep -c " err" || true)
    echo "${med:-?} / ${max:-?} / $errs"
}

three() {  # three SECONDS TAG: the three inserters, waited for (only
    # they: a bare `wait` also waited for the parallel scans and the
    # churner, and reaped the churner before its own wait named it)
    local i pids=()
    for i in 1 2 3; do inserter "m$i" "$1" "$DIR/$2.$i" & pids+=($!); done
    wait "${pids[@]}"
}

# after_start DB1 DB2 TAG: right after a start, INSERTs at 20/s into DB1
# and into DB2, each on a new connection, 40 of them and on until one
# succeeded (at most 60 s); each line of $DIR/TAG.DB is "ms_since_start
# ms ok|err" (ms_since_start: when it ended).
after_start() {
    local t0 db pids=()
    t0=$(now_ms)
    for db in "$1" "$2"; do
        ( : > "$DIR/$3.$db"; n=0; ok=0
          while [ $n -lt 40 ] || { [ $ok = 0 ] && [ $(( $(now_ms) - t0 )) -lt 60000 ]; }; do
              n=$((n + 1)); a=$(now_ms)
              if q "$db" -c "INSERT INTO orders (item) VALUES ('after a start')" >/dev/null 2>&1; then r=ok; ok=1; else r=err; fi
              b=$(now_ms); echo "$((b - t0)) $((b - a)) $r" >> "$DIR/$3.$db"
              sleep "$(awk -v d=$((b - a)) 'BEGIN { s = 0.05 - d / 1000; print (s > 0 ? s : 0) }')"
          done ) & pids+=($!)
    done
    wait "${pids[@]}"
}

# starts KIND N LAST: STARTS starts of KIND (crash: pg_ctl stop -m
# immediate; nofile: a clean stop and the state file removed), each
# followed by after_start into m1 and LAST. Prints "first ID in m1 /
# in LAST, ms (slowest of STARTS) | slowest INSERT ms / failures | lead
# after STARTS, ms".
starts() {
    local kind="$1" last="$3" k f1=0 f2=0 v
    rm -f "$DIR"/st[0-9]*.*
    for k in $(seq 1 "$STARTS"); do
        q m1 -c "INSERT INTO orders (item) VALUES ('before a start')" >/dev/null
        if [ "$kind" = crash ]; then
            as_pg "$(pgbin)/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null
        else
            as_pg "$(pgbin)/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null
            rm -f "$DIR/data/snowflake_id.state"
        fi
        cluster_up "$DIR"
        after_start m1 "$last" "st$k"
        v=$(awk '$3 == "ok" { print $1; exit }' "$DIR/st$k.m1"); [ "${v:-99999}" -gt "$f1" ] && f1=${v:-99999}
        v=$(awk '$3 == "ok" { print $1; exit }' "$DIR/st$k.$last"); [ "${v:-99999}" -gt "$f2" ] && f2=${v:-99999}
    done
    local lead slow errs
    lead=$(q m1 -c "SELECT round(extract(epoch FROM snowflake_timestamp(max(id)) - clock_timestamp()) * 1000) FROM orders")
    slow=$(cat "$DIR"/st*.* | awk '{ print $2 }' | sort -n | tail -1)
    errs=$(cat "$DIR"/st*.* | grep -c " err" || true)
    echo "$f1 / $f2 | $slow / $errs | $lead"
}

{
echo "# bench/databases.sh: the high-water mark by number of databases"
echo
echo "PostgreSQL 18, defaults (max_worker_processes = 8), 3 databases minting 1 INSERT/s each on new connections, ${SECS} s windows; $(nproc) cores; $(date -u +%F)."
echo
echo "| databases | CPU over a sequence, % of a core | WAL kB/min (sequence window) | extra commits/s | INSERT median / slowest ms / failures | sequence INSERT median / slowest ms | first INSERT after ${PAUSE} s pause, ms | worker slots held by parallel queries: median / slowest ms / failures | a database created and one dropped every second: median / slowest ms / failures | clean restart to first ID, ms (slowest of 5) | lead after 5 restarts, ms |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
} > "$OUT"
STARTS_OUT="$OUT.starts"
{
echo
echo "Starts (issue 55): $STARTS crash restarts (pg_ctl stop -m immediate) in a row, then $STARTS starts without the state file, each followed by INSERTs at 20/s into the first and the last database on new connections; times from \"accepting connections\"."
echo
echo "| databases | crash: first ID in the first / last database, ms (slowest of $STARTS) | crash: slowest INSERT ms / failures | crash: lead after $STARTS, ms | no state file: first ID in the first / last database, ms | no state file: slowest INSERT ms / failures | no state file: lead after $STARTS, ms |"
echo "|---|---|---|---|---|---|---|"
} > "$STARTS_OUT"

for N in $COUNTS; do
    log "databases: N = $N"
    cluster_stop "$DIR"
    cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 44" \
        "max_connections = 200"
    cluster_up "$DIR"
    q template1 -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
        -c "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text)" \
        -c "CREATE SEQUENCE s" -c "CREATE TABLE seq_orders (id bigint PRIMARY KEY DEFAULT nextval('s'), item text)" >/dev/null
    for i in 1 2 3; do q postgres -c "CREATE DATABASE m$i STRATEGY FILE_COPY" >/dev/null; done
    for i in $(seq 4 "$N"); do q postgres -c "CREATE DATABASE idle$i STRATEGY FILE_COPY" >/dev/null; done
    q postgres -c "CHECKPOINT" >/dev/null
    three 5 warm >/dev/null 2>&1 || true
    last=m3; [ "$N" -ge 4 ] && last=idle$N
    if part starts; then
        crash=$(starts crash "$N" "$last")
        nofile=$(starts nofile "$N" "$last")
        echo "| $N | ${crash%% | *} | $(cut -d'|' -f2 <<< "$crash" | xargs) | ${crash##* | } | ${nofile%% | *} | $(cut -d'|' -f2 <<< "$nofile" | xargs) | ${nofile##* | } |" >> "$STARTS_OUT"
        log "databases: N = $N starts: $(tail -1 "$STARTS_OUT")"
    fi
    part steady || continue

    # Steady state.
    lsn0=$(q postgres -c "SELECT pg_current_wal_lsn()")
    c0=$(q postgres -c "SELECT sum(xact_commit) FROM pg_stat_database")
    cpu0=$(server_cpu); t0=$(now_ms)
    three "$SECS" steady
    t1=$(now_ms); cpu1=$(server_cpu)
    c1=$(q postgres -c "SELECT sum(xact_commit) FROM pg_stat_database")
    wal=$(q postgres -c "SELECT round(pg_wal_lsn_diff(pg_current_wal_lsn(), '$lsn0') / 1024.0 * 60000 / $((t1 - t0)), 1)")
    inserts=$(cat "$DIR"/steady.* | wc -l)
    # Each psql INSERT is one commit; the two stats reads, two more.
    extra=$(awk -v c=$((c1 - c0 - inserts - 2)) -v ms=$((t1 - t0)) 'BEGIN { printf "%.1f", (c < 0 ? 0 : c) * 1000 / ms }')
    steady=$(stats "$DIR"/steady.*)
    # The floor: the same INSERTs keyed by a sequence, as long, same cluster.
    lsn2=$(q postgres -c "SELECT pg_current_wal_lsn()")
    cpu2=$(server_cpu); t2=$(now_ms)
    for i in 1 2 3; do
        ( end=$((SECONDS + SECS)); : > "$DIR/seq.$i"
          while [ $SECONDS -lt $end ]; do
              a=$(now_ms); q "m$i" -c "INSERT INTO seq_orders (item) VALUES ('book')" >/dev/null 2>&1; b=$(now_ms)
              echo "$((b - a)) ok" >> "$DIR/seq.$i"
              sleep "$(awk -v d=$((b - a)) 'BEGIN { s = 1 - d / 1000; print (s > 0 ? s : 0) }')"
          done ) &
    done
    wait
    t3=$(now_ms); cpu3=$(server_cpu)
    seqwal=$(q postgres -c "SELECT round(pg_wal_lsn_diff(pg_current_wal_lsn(), '$lsn2') / 1024.0 * 60000 / $((t3 - t2)), 1)")
    seq=$(stats "$DIR"/seq.* | cut -d/ -f1-2)
    cpu=$(awk -v a=$((cpu1 - cpu0)) -v am=$((t1 - t0)) -v b=$((cpu3 - cpu2)) -v bm=$((t3 - t2)) -v hz="$(getconf CLK_TCK)" \
        'BEGIN { printf "%.1f", (a / am - b / bm) / hz * 100000 }')

    # A pause, then the first INSERT.
    sleep "$PAUSE"
    a=$(now_ms); q m1 -c "INSERT INTO orders (item) VALUES ('after a pause')" >/dev/null; pause=$(( $(now_ms) - a ))

    # Parallel queries hold every free worker slot.
    scans=()
    for _ in $(seq 1 8); do
        q postgres -c "SET debug_parallel_query = on" -c "SELECT pg_sleep($((SECS + 5)))" >/dev/null 2>&1 & scans+=($!)
    done
    sleep 2
    three "$SECS" par
    kill "${scans[@]}" 2>/dev/null || true; wait "${scans[@]}" 2>/dev/null || true
    par=$(stats "$DIR"/par.*)

    # Churn: a database created and one dropped every second.
    ( k=0; end=$((SECONDS + SECS))
      while [ $SECONDS -lt $end ]; do
          k=$((k + 1)); q postgres -c "CREATE DATABASE churn$k STRATEGY FILE_COPY" >/dev/null 2>&1 || true
          [ $k -le 1 ] || q postgres -c "DROP DATABASE churn$((k - 1))" >/dev/null 2>&1 || true
          sleep 1
      done ) & churner=$!
    three "$SECS" churn
    wait $churner || true
    churn=$(stats "$DIR"/churn.*)

    # Five clean restarts in a row.
    slowest=0
    for _ in 1 2 3 4 5; do
        q m1 -c "INSERT INTO orders (item) VALUES ('before a restart')" >/dev/null
        as_pg "$(pgbin)/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null
        cluster_up "$DIR"
        a=$(now_ms)
        until q m1 -c "INSERT INTO orders (item) VALUES ('after a restart')" >/dev/null 2>&1; do sleep 0.01; done
        d=$(( $(now_ms) - a )); [ "$d" -gt "$slowest" ] && slowest=$d
    done
    lead=$(q m1 -c "SELECT round(extract(epoch FROM snowflake_timestamp(max(id)) - clock_timestamp()) * 1000) FROM orders")

    echo "| $N | $cpu | $wal ($seqwal) | $extra | $steady | $seq | $pause | $par | $churn | $slowest | $lead |" >> "$OUT"
    log "databases: N = $N done: $(tail -1 "$OUT")"
done
cluster_stop "$DIR"
cat "$STARTS_OUT" >> "$OUT"
cat "$OUT"
