#!/usr/bin/env bash
# Logical replication on real clusters.
#  1. Merge (合服): three sources (worker ids 1, 2, 3), each with a parent
#     and a child table under live pgbench write load, subscribed into one
#     merged server (worker id 100) with copy_data = true while the writes
#     continue (tests/integration/merge_subscribe.sql, the documented
#     recipe). Before anything moves, snowflake_fleet_check() on the merged
#     server finds no problem. After catch-up (merge_verify.sql): row counts
#     add up, pg_stat_subscription_stats shows no apply or sync error, no
#     order lacks its customer, rows per worker id equal each source's, and
#     rows written after the subscription started arrived too. After the
#     cut-over the merged server mints with its own worker id, above every
#     merged ID.
#  2. Negative control: a fourth source with source 1's worker id, minting
#     at the same moments. The fleet check names both before any data
#     moves; subscribed anyway, the merged server's copy stops on a
#     duplicate key and the error counters rise.
#  3. Active-active (PostgreSQL 16+, origin = none): two nodes (worker ids
#     11 and 12) subscribe to each other and both take writes. They converge
#     to identical contents (ordered checksums) with no apply error and no
#     conflict counted.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
BASE=$(state_dir "$ROOT/.run/it-logical" it-logical)
PORT0=${SNOWFLAKE_IT_LOGICAL_PORT:-15500}   # merged; sources +1..+3, dup +4, active-active +5, +6
DURATION=${SNOWFLAKE_IT_SECONDS:-8}
HERE="$ROOT/tests/integration"

NAMES=(merged src1 src2 src3 dup aa1 aa2)
WORKER=(100 1 2 3 1 11 12)   # dup deliberately repeats src1's worker id
NODES=(0 1 2 3 4); [ "$PG_MAJOR" -ge 16 ] && NODES+=(5 6)
dir_of() { printf '%s/%s' "$BASE" "${NAMES[$1]}"; }
port_of() { echo $((PORT0 + $1)); }
conninfo() { echo "host=$(dir_of "$1") port=$(port_of "$1") user=postgres dbname=${2:-postgres}"; }
q() {  # q INDEX [psql args...]
    local i="$1"; shift
    PGOPTIONS="-c client_min_messages=warning" timeout 120 "$(pgbin)/psql" -X -q -h "$(dir_of "$i")" -p "$(port_of "$i")" -U postgres -v ON_ERROR_STOP=1 "$@"
}
cleanup() { for i in "${NODES[@]}"; do cluster_stop "$(dir_of "$i")"; done; }
trap cleanup EXIT

for i in "${NODES[@]}"; do
    d=$(state_dir "$(dir_of "$i")" "it-logical/${NAMES[$i]}")
    cluster_stop "$d"
    cluster_init "$d" "$(port_of "$i")" "shared_preload_libraries = 'snowflake_id'" \
        "snowflake_id.worker_id = ${WORKER[$i]}" "wal_level = logical" "wal_retrieve_retry_interval = '1s'"
    cluster_up "$d"
done

# Wait up to $2 seconds until the SQL $3 on node $1 prints t.
wait_for() {
    local i="$1" secs="$2" sql="$3" n
    for ((n = 0; n < secs * 5; n++)); do
        [ "$(q "$i" -At -c "$sql")" = t ] && return 0
        sleep 0.2
    done
    return 1
}

# --- 1. merge --------------------------------------------------------------------
schema="SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
CREATE TABLE customers (id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
                        source text NOT NULL, name text NOT NULL);
CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
                     customer_id bigint NOT NULL REFERENCES customers, amount int NOT NULL);"
for i in 0 1 2 3; do q "$i" -c "$schema"; done
for i in 1 2 3; do
    q "$i" -c "CREATE PUBLICATION merge FOR TABLE customers, orders" -c "
        INSERT INTO customers (source, name) SELECT '${NAMES[$i]}', 'c' || g FROM generate_series(1, 2000) g;
        INSERT INTO orders (customer_id, amount) SELECT id, 1 FROM customers, generate_series(1, 5);"
done

# Before anything moves: the fleet, read through postgres_fdw, is sound.
{
    echo "SET client_min_messages = warning; CREATE EXTENSION postgres_fdw;"
    for i in 1 2 3; do
        echo "CREATE SERVER ${NAMES[$i]} FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$(dir_of "$i")', port '$(port_of "$i")', dbname 'postgres');"
        echo "CREATE USER MAPPING FOR postgres SERVER ${NAMES[$i]} OPTIONS (user 'postgres');"
    done
} | q 0
fleet=$(q 0 -At -F ' ' -c "SELECT node, worker_id, coalesce(problem, 'ok') FROM snowflake_fleet_check()")
log "fleet check before the merge: $(paste -sd';' <<< "$fleet")"
[ "$fleet" = "local 100 ok
src1 1 ok
src2 2 ok
src3 3 ok" ] || die "the fleet check of the sources is not clean"

printf '%s\n' "WITH c AS (INSERT INTO customers (source, name) VALUES (:src, 'live') RETURNING id)" \
    "INSERT INTO orders (customer_id, amount) SELECT id, g FROM c, generate_series(1, 3) g;" > "$BASE/load.sql"
log "merge: pgbench on 3 sources for ${DURATION}s, subscribing the merged server meanwhile"
pids=()
for i in 1 2 3; do
    timeout $((DURATION + 60)) "$(pgbin)/pgbench" -n -h "$(dir_of "$i")" -p "$(port_of "$i")" -U postgres \
        -c 2 -j 1 -T "$DURATION" -D src="'${NAMES[$i]}'" -f "$BASE/load.sql" postgres >"$BASE/load$i.out" 2>&1 &
    pids+=($!)
done
# Subscribe once every source is being written (polled, not slept on).
writing() { [ "$(q "$1" -At -c "SELECT count(*) > 0 FROM customers WHERE name = 'live'")" = t ]; }
for i in 1 2 3; do poll_until 120 writing "$i" || die "no load on ${NAMES[$i]} in 120 s"; done
declare -A AT_SUBSCRIBE=()
for i in 1 2 3; do
    AT_SUBSCRIBE[$i]=$(q "$i" -At -c "SELECT max(id) FROM customers")
    q 0 -v source="${NAMES[$i]}" -v conninfo="$(conninfo "$i")" -f "$HERE/merge_subscribe.sql"
done
rc=0; for p in "${pids[@]}"; do wait "$p" || rc=$?; done
for i in 1 2 3; do pgbench_clean "$BASE/load$i.out" || rc=1; done
[ $rc = 0 ] || { cat "$BASE"/load*.out >&2; die "pgbench on the sources failed"; }

# Catch-up: every table ready, and the merged counts equal the sources' sums.
sum() { local t=0 i; for i in 1 2 3; do t=$((t + $(q "$i" -At -c "SELECT count(*) FROM $1"))); done; echo $t; }
want_c=$(sum customers); want_o=$(sum orders)
wait_for 0 120 "SELECT (SELECT count(*) FROM pg_subscription_rel WHERE srsubstate <> 'r') = 0
                   AND (SELECT count(*) FROM customers) = $want_c AND (SELECT count(*) FROM orders) = $want_o" \
    || die "the merged server did not catch up: $(q 0 -At -c "SELECT count(*) FROM customers") of $want_c customers, $(q 0 -At -c "SELECT count(*) FROM orders") of $want_o orders"
verify=$(q 0 -At -f "$HERE/merge_verify.sql")
log "merge: $want_c customers and $want_o orders from 3 sources; merge_verify.sql says:"
sed 's/^/    /' <<< "$verify" >&2
! grep -q FAIL <<< "$verify" || die "merge_verify.sql reports a failure"
for i in 1 2 3; do
    n_src=$(q "$i" -At -c "SELECT count(*) FROM customers")
    grep -qx "worker ${WORKER[$i]}: $n_src customers" <<< "$verify" \
        || die "the merged rows of worker ${WORKER[$i]} are not ${NAMES[$i]}'s $n_src"
    late=$(q 0 -At -c "SELECT count(*) FROM customers WHERE snowflake_worker_id(id) = ${WORKER[$i]} AND id > ${AT_SUBSCRIBE[$i]}")
    [ "$late" -gt 0 ] || die "no row written on ${NAMES[$i]} after the subscription started was merged"
done

# Cut-over: the sources stopped writing and everything arrived; drop the
# subscriptions and mint on the merged server.
for i in 1 2 3; do q 0 -c "DROP SUBSCRIPTION merge_${NAMES[$i]}"; done
out=$(q 0 -At -F ' ' -c "INSERT INTO customers (source, name) VALUES ('merged', 'new')
                        RETURNING id > (SELECT max(id) FROM customers), snowflake_worker_id(id)")
[ "$out" = "t 100" ] || die "after the cut-over the merged server's first ID is not above the merged ones on worker 100: $out"
log "cut-over: subscriptions dropped; the merged server mints on worker 100 above every merged ID"

# --- 2. negative control: two sources with one worker id ----------------------
for i in 1 4; do
    q "$i" -c "CREATE DATABASE neg"
    q "$i" -d neg -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
        -c "CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), src text NOT NULL)" \
        -c "CREATE PUBLICATION neg FOR TABLE events"
done
collisions=0
for _ in 1 2 3; do
    for i in 1 4; do
        q "$i" -d neg -c "TRUNCATE events" -c "INSERT INTO events (src) SELECT '${NAMES[$i]}' FROM generate_series(1, 300000)" &
    done
    wait
    q 1 -d neg -At -c "SELECT id FROM events ORDER BY id" > "$BASE/ids1"
    q 4 -d neg -At -c "SELECT id FROM events ORDER BY id" > "$BASE/ids4"
    collisions=$(comm -12 "$BASE/ids1" "$BASE/ids4" | wc -l)
    [ "$collisions" -gt 0 ] && break
done
[ "$collisions" -gt 0 ] || die "expected identical IDs from two sources sharing worker id 1"
q 0 -c "CREATE DATABASE neg"
{
    echo "SET client_min_messages = warning; CREATE EXTENSION snowflake_id; CREATE EXTENSION postgres_fdw;"
    echo "CREATE TABLE events (id bigint PRIMARY KEY, src text NOT NULL);"
    for i in 1 4; do
        echo "CREATE SERVER ${NAMES[$i]} FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$(dir_of "$i")', port '$(port_of "$i")', dbname 'neg');"
        echo "CREATE USER MAPPING FOR postgres SERVER ${NAMES[$i]} OPTIONS (user 'postgres');"
    done
} | q 0 -d neg
caught=$(q 0 -d neg -At -F ' | ' -c "SELECT node, problem FROM snowflake_fleet_check() WHERE problem IS NOT NULL ORDER BY node")
log "negative control: src1 and dup share worker id 1 and minted $collisions identical IDs; the fleet check, before any data moves: $(paste -sd';' <<< "$caught")"
[ "$caught" = "dup | worker_id 1 is also used by src1
src1 | worker_id 1 is also used by dup" ] || die "the fleet check did not name both sources: '$caught'"
for i in 1 4; do
    q 0 -d neg -c "CREATE SUBSCRIPTION neg_${NAMES[$i]} CONNECTION '$(conninfo "$i" neg)' PUBLICATION neg WITH (copy_data = true)"
done
wait_for 0 60 "SELECT coalesce(sum(apply_error_count + sync_error_count), 0) > 0 FROM pg_stat_subscription_stats" \
    || die "subscribing two sources with one worker id raised no replication error"
errors=$(q 0 -d neg -At -c "SELECT string_agg(subname || ': ' || apply_error_count || ' apply, ' || sync_error_count || ' sync errors', '; ' ORDER BY subname) FROM pg_stat_subscription_stats")
grep -q 'duplicate key value violates unique constraint "events_pkey"' "$(dir_of 0)/server.log" \
    || die "the merged server's log does not show the duplicate key"
stuck=$(q 0 -d neg -At -c "SELECT count(*) FROM pg_subscription_rel WHERE srsubstate <> 'r'")
log "subscribed anyway: $errors; $stuck table copy stuck on 'duplicate key value violates unique constraint \"events_pkey\"'"
[ "$stuck" -gt 0 ] || die "expected the second copy of events to be stuck"
for i in 1 4; do q 0 -d neg -c "DROP SUBSCRIPTION neg_${NAMES[$i]}"; done

# --- 3. active-active --------------------------------------------------------
if [ "$PG_MAJOR" -ge 16 ]; then
    for i in 5 6; do
        q "$i" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
            -c "CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), node text NOT NULL, n int NOT NULL)" \
            -c "CREATE PUBLICATION aa FOR TABLE events"
    done
    q 5 -c "CREATE SUBSCRIPTION aa_from_aa2 CONNECTION '$(conninfo 6)' PUBLICATION aa WITH (origin = none, copy_data = false)"
    q 6 -c "CREATE SUBSCRIPTION aa_from_aa1 CONNECTION '$(conninfo 5)' PUBLICATION aa WITH (origin = none, copy_data = false)"
    for i in 5 6; do
        wait_for "$i" 30 "SELECT count(*) = 1 FROM pg_stat_subscription WHERE relid IS NULL AND pid IS NOT NULL" \
            || die "the subscription on ${NAMES[$i]} did not start"
    done
    printf '%s\n' "INSERT INTO events (node, n) VALUES (:node, :client_id);" > "$BASE/aa.sql"
    log "active-active: pgbench on aa1 and aa2 for ${DURATION}s, each replicating to the other"
    pids=()
    for i in 5 6; do
        timeout $((DURATION + 60)) "$(pgbin)/pgbench" -n -h "$(dir_of "$i")" -p "$(port_of "$i")" -U postgres \
            -c 2 -j 1 -T "$DURATION" -D node="'${NAMES[$i]}'" -f "$BASE/aa.sql" postgres >"$BASE/aa$i.out" 2>&1 &
        pids+=($!)
    done
    rc=0; for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    for i in 5 6; do pgbench_clean "$BASE/aa$i.out" || rc=1; done
    [ $rc = 0 ] || { cat "$BASE"/aa*.out >&2; die "pgbench on the active-active nodes failed"; }
    checksum="SELECT count(*) || ' ' || md5(string_agg(id || ':' || node || ':' || n, ',' ORDER BY id)) FROM events"
    for ((n = 0; n < 300; n++)); do
        a=$(q 5 -At -c "$checksum"); b=$(q 6 -At -c "$checksum")
        [ "$a" = "$b" ] && break
        sleep 0.2
    done
    [ "$a" = "$b" ] || die "the active-active nodes did not converge: aa1 $a, aa2 $b"
    for i in 5 6; do
        bad=$(q "$i" -At -c "SELECT coalesce(sum(v::bigint), 0) FROM pg_stat_subscription_stats s, jsonb_each_text(to_jsonb(s)) e(k, v)
                             WHERE k IN ('apply_error_count', 'sync_error_count') OR k LIKE 'confl\_%'")
        [ "$bad" = 0 ] || die "${NAMES[$i]} counted $bad replication errors or conflicts"
        mine=$(q "$i" -At -c "SELECT bool_and(snowflake_worker_id(id) = ${WORKER[$i]}) FROM events WHERE node = '${NAMES[$i]}'")
        [ "$mine" = t ] || die "rows written on ${NAMES[$i]} do not carry its worker id"
    done
    log "active-active: both nodes hold the same ${a%% *} rows (checksum ${a##* }), 0 errors, 0 conflicts"
else
    log "active-active: skipped, origin = none needs PostgreSQL 16 or later"
fi

log "logical: ok"
trap - EXIT
cleanup
rm -rf "$BASE"   # self-cleaning on success; kept for inspection on failure
