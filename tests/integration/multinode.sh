#!/usr/bin/env bash
# Sharded deployment on real clusters: three shards (worker ids 1, 2, 3)
# whose clocks are skewed with libfaketime (+0 s, -2 s, +0.5 s), and a
# coordinator (worker id 100) that sees them through postgres_fdw.
#
#   1. Concurrent insert load: 4 pgbench connections per shard, all shards
#      at once.
#   2. Merge (合服): copy every shard into one PRIMARY KEY table on the
#      coordinator: zero conflicts, every row's worker id is its shard's,
#      and the merged table keeps minting on the coordinator's worker id.
#   3. Query across shards: a partitioned table whose partitions are
#      foreign tables. ORDER BY id is time order to within the injected
#      skew; the explicit-layout (IMMUTABLE) snowflake_min_id/max_id bounds
#      are pushed down to the shards (EXPLAIN VERBOSE), the STABLE
#      server-layout ones are not.
#   4. Legacy migration: two shards hold legacy serial tables whose keys
#      overlap; each is converted and re-keyed by created_at with its own
#      import worker id (the README recipe), then both merge with zero
#      conflicts and every foreign key intact.
#   5. Misconfiguration: a fourth server with shard 1's worker id. A merge
#      of the two does collide, and snowflake_fleet_check() on the
#      coordinator names both servers (after it reported the healthy shards
#      clean, apart from the clock 2 s behind); restarted with another
#      epoch, the server is reported for its layout and its refusal to mint.
# Every loop is bounded in count and time; all clusters are stopped on exit.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
BASE=$(state_dir "$ROOT/.run/it-multinode" it-multinode)
PORT0=${SNOWFLAKE_IT_MULTINODE_PORT:-25540}   # coordinator; shards +1..+3, duplicate +4
DURATION=${SNOWFLAKE_IT_SECONDS:-8}
FAKETIME_LIB=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1
[ -f "$FAKETIME_LIB" ] || die "libfaketime not found at $FAKETIME_LIB (apt install libfaketime)"
EPOCH="'2024-01-01 00:00:00+00'"   # the default snowflake_id.epoch, spelled out for pushdown

NAMES=(coord s1 s2 s3 dup)
SKEW=(0 0 -2 +0.5 0)        # seconds, as libfaketime offsets
WORKER=(100 1 2 3 1)        # dup deliberately repeats s1's worker id
dir_of() { printf '%s/%s' "$BASE" "$1"; }
port_of() { echo $((PORT0 + $1)); }
cleanup() { for i in 0 1 2 3 4; do cluster_stop "$(dir_of "${NAMES[$i]}")"; done; }
trap cleanup EXIT

for i in 0 1 2 3 4; do
    d=$(state_dir "$(dir_of "${NAMES[$i]}")" "it-multinode/${NAMES[$i]}")
    cluster_stop "$d"
    cluster_init "$d" "$(port_of $i)" "shared_preload_libraries = 'snowflake_id'" \
        "snowflake_id.worker_id = ${WORKER[$i]}" "listen_addresses = '127.0.0.1'"
    if [ "${SKEW[$i]}" = 0 ]; then
        cluster_up "$d"
    else
        cluster_start "$d" LD_PRELOAD="$FAKETIME_LIB" FAKETIME="${SKEW[$i]}" FAKETIME_DONT_FAKE_MONOTONIC=1 \
            || { cat "$d/server.log" >&2; die "${NAMES[$i]} did not start"; }
    fi
done
q() {  # q INDEX [psql args...]
    local i="$1"; shift
    timeout 120 "$(pgbin)/psql" -X -q -h 127.0.0.1 -p "$(port_of "$i")" -U postgres -v ON_ERROR_STOP=1 "$@"
}
C=0

# The shards' clocks really are skewed.
for i in 1 2 3; do
    off=$(q $i -At -c "SELECT round(extract(epoch FROM now()) - $(date +%s.%N), 1)")
    log "${NAMES[$i]}: worker ${WORKER[$i]}, clock offset ${off}s (injected ${SKEW[$i]}s)"
done

for i in 1 2 3 4; do
    q $i <<SQL
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
CREATE TABLE orders (
    id         bigint PRIMARY KEY DEFAULT snowflake_nextval(),
    shard      int NOT NULL DEFAULT $i,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    payload    text NOT NULL DEFAULT md5(random()::text));
SQL
done

# --- 1. load ------------------------------------------------------------------
printf 'INSERT INTO orders DEFAULT VALUES;\n' > "$BASE/one.sql"
log "load: 4 pgbench clients on each of the 3 shards for ${DURATION}s"
pids=()
for i in 1 2 3; do
    timeout $((DURATION + 60)) "$(pgbin)/pgbench" -n -h 127.0.0.1 -p "$(port_of $i)" -U postgres \
        -c 4 -j 1 -T "$DURATION" -f "$BASE/one.sql" postgres >"$BASE/bench$i.out" 2>&1 &
    pids+=($!)
done
rc=0; for p in "${pids[@]}"; do wait "$p" || rc=$?; done
for i in 1 2 3; do
    grep -E "processed" "$BASE/bench$i.out" | sed "s/^/  ${NAMES[$i]}: /" >&2
    pgbench_clean "$BASE/bench$i.out" || rc=1
done
[ $rc = 0 ] || { cat "$BASE"/bench*.out >&2; die "pgbench failed"; }

# --- coordinator: postgres_fdw, one partition per shard -------------------------
{
    echo "SET client_min_messages = warning;"
    echo "CREATE EXTENSION snowflake_id; CREATE EXTENSION postgres_fdw;"
    echo "CREATE TABLE all_orders (id bigint NOT NULL, shard int NOT NULL, created_at timestamptz NOT NULL, payload text NOT NULL) PARTITION BY LIST (shard);"
    for i in 1 2 3 4; do
        n=${NAMES[$i]}
        echo "CREATE SERVER $n FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', port '$(port_of $i)', dbname 'postgres', extensions 'snowflake_id', fetch_size '10000');"
        echo "CREATE USER MAPPING FOR postgres SERVER $n OPTIONS (user 'postgres');"
        if [ "$i" -le 3 ]; then
            echo "CREATE FOREIGN TABLE orders_$n PARTITION OF all_orders FOR VALUES IN ($i) SERVER $n OPTIONS (table_name 'orders');"
        fi
    done
    echo "CREATE FOREIGN TABLE orders_dup (id bigint, shard int, created_at timestamptz, payload text) SERVER dup OPTIONS (table_name 'orders');"
} | q $C
# The fleet check over the healthy shards: distinct worker ids and one
# layout; only s2's clock, 2 s behind, is more than the default 1 s apart.
fleet=$(q $C -At -F ' ' -c "SELECT node, worker_id, coalesce(problem, 'ok')
                              FROM snowflake_fleet_check(servers => ARRAY['s1', 's2', 's3']::name[])")
log "fleet check of the healthy shards:"; sed 's/^/    /' <<< "$fleet" >&2
[ "$(awk '$3 == "ok" {print $1 "/" $2}' <<< "$fleet" | paste -sd' ')" = "local/100 s1/1 s3/3" ] \
    || die "the fleet check flags a healthy server"
grep -qE '^s2 2 clock is [0-9]+ ms behind local \(more than 00:00:01 apart\)$' <<< "$fleet" \
    || die "the fleet check does not report s2's clock, 2 s behind"
n=$(q $C -At -c "SELECT count(*) FROM snowflake_fleet_check('5 seconds', ARRAY['s1', 's2', 's3']::name[]) WHERE problem IS NOT NULL")
[ "$n" = 0 ] || die "with a 5 s tolerance the fleet check still reports $n problem(s)"

# --- 2. merge (合服) -------------------------------------------------------------
out=$(q $C -At -F ' ' <<'SQL'
CREATE TABLE merged (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), shard int NOT NULL,
                     created_at timestamptz NOT NULL, payload text NOT NULL);
CREATE TEMP TABLE src AS SELECT * FROM all_orders;
WITH ins AS (INSERT INTO merged SELECT * FROM src ON CONFLICT (id) DO NOTHING RETURNING 1)
SELECT (SELECT count(*) FROM src), (SELECT count(*) FROM ins),
       (SELECT count(*) FROM src) - (SELECT count(*) FROM ins);
-- A separate statement: a data-modifying CTE's rows are invisible to its own query.
SELECT (SELECT count(*) FROM merged WHERE snowflake_worker_id(id) <> shard),
       (SELECT string_agg(shard || ':' || n, ',' ORDER BY shard)
          FROM (SELECT shard, count(*) n FROM merged GROUP BY shard) s);
SQL
)
read -r total merged conflicts wrong_worker per_shard <<< "$(echo $out)"
log "merge: $total shard rows -> $merged merged ($per_shard), $conflicts conflicts, $wrong_worker rows whose worker id is not their shard's"
[ "$total" -gt 3000 ] || die "too little load: $total rows"
[ "$conflicts" = 0 ] || die "merge had $conflicts primary-key conflicts"
[ "$wrong_worker" = 0 ] || die "$wrong_worker rows carry another shard's worker id"
[ "$(echo "$per_shard" | tr ',' '\n' | wc -l)" = 3 ] || die "not every shard contributed: $per_shard"
# The merged table keeps growing on the coordinator's own worker id.
read -r new_rows new_worker above < <(q $C -At -F ' ' -c "
    WITH m AS (SELECT max(id) AS mx FROM merged),
         ins AS (INSERT INTO merged (shard, created_at, payload)
                 SELECT 0, clock_timestamp(), 'new' FROM generate_series(1, 1000) RETURNING id)
    SELECT count(*), min(snowflake_worker_id(id)), bool_and(id > (SELECT mx FROM m)) FROM ins")
log "merged table: $new_rows new rows on worker $new_worker, all above the merged maximum: $above"
[ "$new_rows" = 1000 ] && [ "$new_worker" = 100 ] && [ "$above" = t ] || die "new rows in the merged table are wrong"

# --- 3. query across shards ---------------------------------------------------------
# Real time of a row = its shard's clock minus the injected skew. Walking the
# rows in ID order, real time may go backwards only by the skew spread
# (2.5 s) plus scheduling noise.
read -r rows worst inversions stamp_gap < <(q $C -At -F ' ' <<'SQL'
WITH skew(shard, s) AS (VALUES (1, 0.0), (2, -2.0), (3, 0.5)),
ordered AS (
    SELECT id, o.created_at - make_interval(secs => skew.s) AS real_ts
      FROM all_orders o JOIN skew USING (shard) ORDER BY id),
steps AS (SELECT real_ts, lag(real_ts) OVER (ORDER BY id) AS prev FROM ordered)
SELECT (SELECT count(*) FROM ordered),
       round(extract(epoch FROM max(prev - real_ts))::numeric, 3),
       count(*) FILTER (WHERE prev - real_ts > interval '2.6 s'),
       (SELECT round(max(abs(extract(epoch FROM snowflake_timestamp(id) - created_at)))::numeric, 3)
          FROM all_orders)
  FROM steps;
SQL
)
log "ORDER BY id over $rows rows: largest step back in real time ${worst}s (skew spread 2.5s), $inversions beyond 2.6s; ID time vs row time at most ${stamp_gap}s"
[ "$inversions" = 0 ] || die "$inversions rows are out of time order by more than the skew"
awk -v g="$stamp_gap" 'BEGIN { exit !(g < 1.0) }' || die "decoded ID times drift ${stamp_gap}s from the shards' clocks"
# Without the skew, the -2 s shard's rows do interleave out of real-time order:
# the check above is not vacuous.
awk -v w="$worst" 'BEGIN { exit !(w > 1.0) }' || die "expected the -2s shard to show up as a >1s inversion, got ${worst}s"

explain() { q $C -At -c "SET plan_cache_mode = force_generic_plan" -c "$1" -c "$2"; }
RANGE_TS="now() - interval '1 hour'"
PREP="PREPARE hour(timestamptz, timestamptz) AS
  SELECT count(*) FROM all_orders
   WHERE id BETWEEN snowflake_min_id(\$1, $EPOCH, 41, 10, 12) AND snowflake_max_id(\$2, $EPOCH, 41, 10, 12)"
plan=$(explain "$PREP" "EXPLAIN (VERBOSE, COSTS OFF) EXECUTE hour($RANGE_TS, now())")
printf '%s\n' "$plan" | grep "Remote SQL" | head -3 | sed 's/^/  /' >&2
pushed=$(printf '%s\n' "$plan" | grep -c "Remote SQL: .*snowflake_min_id(\$1.*snowflake_max_id(\$2" || true)
[ "$pushed" = 3 ] || { printf '%s\n' "$plan" >&2; die "explicit-layout bounds were not pushed to all 3 shards ($pushed)"; }
local_filter=$(printf '%s\n' "$plan" | grep -c "Filter:" || true)
[ "$local_filter" = 0 ] || die "explicit-layout bounds left a local filter on the coordinator"
# Constant bounds are folded on the coordinator and shipped as constants.
plan=$(q $C -At -c "EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM all_orders
    WHERE id >= snowflake_min_id('2026-01-01 00:00+00', $EPOCH, 41, 10, 12) ORDER BY id")
[ "$(printf '%s\n' "$plan" | grep -c "Remote SQL: .*WHERE ((id >= [0-9]*::bigint)) ORDER BY id ASC")" = 3 ] \
    || { printf '%s\n' "$plan" >&2; die "constant bounds and ORDER BY were not pushed down"; }
# The STABLE server-layout form is evaluated on the coordinator instead.
plan=$(q $C -At -c "EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*) FROM all_orders WHERE id >= snowflake_min_id($RANGE_TS)")
[ "$(printf '%s\n' "$plan" | grep -c "Filter: (.*snowflake_min_id")" -ge 1 ] \
    || { printf '%s\n' "$plan" >&2; die "expected the STABLE bound to stay on the coordinator"; }
# Pushed-down and local answers agree.
# A two-second window inside the load, counted through the shards (pushed
# down) and in the merged copy (local).
IFS='|' read -r w_from w_to <<< "$(q $C -At -F '|' -c "SELECT quote_literal(t + interval '2 s'), quote_literal(t + interval '4 s')
    FROM (SELECT min(snowflake_timestamp(id)) AS t FROM merged WHERE shard > 0) s")"
remote_n=$(q $C -At -c "SELECT count(*) FROM all_orders WHERE id BETWEEN
    snowflake_min_id($w_from, $EPOCH, 41, 10, 12) AND snowflake_max_id($w_to, $EPOCH, 41, 10, 12)")
local_n=$(q $C -At -c "SELECT count(*) FROM merged WHERE shard > 0
    AND snowflake_timestamp(id) BETWEEN timestamptz $w_from AND timestamptz $w_to")
total_n=$(q $C -At -c "SELECT count(*) FROM merged WHERE shard > 0")
log "pushdown: bounds shipped to 3/3 shards; a 2 s window counts $remote_n rows through the shards, $local_n in the merged copy (of $total_n)"
[ "$remote_n" = "$local_n" ] && [ "$remote_n" -gt 0 ] && [ "$remote_n" -lt "$total_n" ] \
    || die "pushed-down count $remote_n differs from local count $local_n (or the window is not selective)"

# --- 4. legacy shards with overlapping serial keys: convert, re-key, merge ----------
for i in 1 2; do
    q $i <<'SQL'
CREATE TABLE legacy_users (id serial PRIMARY KEY, name text NOT NULL, created_at timestamptz NOT NULL);
CREATE TABLE legacy_orders (id serial PRIMARY KEY, user_id int NOT NULL REFERENCES legacy_users,
                            created_at timestamptz NOT NULL, total numeric NOT NULL);
INSERT INTO legacy_users (name, created_at)
    SELECT current_setting('port') || '-user-' || g,
           -- the first 5001 users share one millisecond (more than its 4096
           -- sequence numbers), then 5 users per millisecond
           timestamptz '2025-03-01 00:00+00' + (greatest(g - 5000, 0) / 5) * interval '1 ms'
      FROM generate_series(1, 20000) g;
INSERT INTO legacy_orders (user_id, created_at, total)
    SELECT 1 + (g * 7919) % 20000, timestamptz '2025-03-01 00:00+00' + g * interval '37 ms', g % 1000
      FROM generate_series(1, 50000) g;
-- A fingerprint of who ordered what and when, independent of the keys.
CREATE TABLE fingerprint AS
    SELECT md5(string_agg(u.name || '|' || o.created_at || '|' || o.total, ',' ORDER BY o.created_at, u.name)) AS fp,
           count(*) AS n
      FROM legacy_orders o JOIN legacy_users u ON u.id = o.user_id;
SQL
done
for i in 1 2; do
    # The recipe from the README, with this shard's import worker id.
    q $i -v import_worker=$((1000 + i)) -f "$ROOT/tests/integration/rekey.sql" >/dev/null
done
q $C <<'SQL'
CREATE FOREIGN TABLE users_s1 (id bigint, name text, created_at timestamptz) SERVER s1 OPTIONS (table_name 'legacy_users');
CREATE FOREIGN TABLE users_s2 (id bigint, name text, created_at timestamptz) SERVER s2 OPTIONS (table_name 'legacy_users');
CREATE FOREIGN TABLE lorders_s1 (id bigint, user_id bigint, created_at timestamptz, total numeric) SERVER s1 OPTIONS (table_name 'legacy_orders');
CREATE FOREIGN TABLE lorders_s2 (id bigint, user_id bigint, created_at timestamptz, total numeric) SERVER s2 OPTIONS (table_name 'legacy_orders');
CREATE TABLE users (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), name text NOT NULL, created_at timestamptz NOT NULL);
CREATE TABLE user_orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), user_id bigint NOT NULL REFERENCES users,
                          created_at timestamptz NOT NULL, total numeric NOT NULL);
SQL
read -r u_in u_ok < <(q $C -At -F ' ' -c "
    WITH a AS (INSERT INTO users SELECT * FROM users_s1 UNION ALL SELECT * FROM users_s2
               ON CONFLICT (id) DO NOTHING RETURNING 1)
    SELECT (SELECT count(*) FROM users_s1) + (SELECT count(*) FROM users_s2), (SELECT count(*) FROM a)")
out=$(q $C -At -F ' ' -c "
    WITH b AS (INSERT INTO user_orders SELECT * FROM lorders_s1 UNION ALL SELECT * FROM lorders_s2
               ON CONFLICT (id) DO NOTHING RETURNING 1)
    SELECT (SELECT count(*) FROM lorders_s1) + (SELECT count(*) FROM lorders_s2), (SELECT count(*) FROM b)" \
    -c "SELECT count(*) FROM user_orders o LEFT JOIN users u ON u.id = o.user_id WHERE u.id IS NULL")
read -r o_in o_ok fk_bad <<< "$(echo $out)"
log "legacy merge: users $u_ok of $u_in, orders $o_ok of $o_in inserted; $fk_bad orders without their user"
[ "$u_in" = "$u_ok" ] && [ "$o_in" = "$o_ok" ] && [ "$u_in" = 40000 ] && [ "$o_in" = 100000 ] \
    || die "legacy merge lost rows to key conflicts"
[ "$fk_bad" = 0 ] || die "$fk_bad merged orders lost their user"
for i in 1 2; do
    fp_before=$(q $i -At -c "SELECT fp || ' ' || n FROM fingerprint")
    fp_after=$(q $C -At -c "SELECT md5(string_agg(u.name || '|' || o.created_at || '|' || o.total, ',' ORDER BY o.created_at, u.name)) || ' ' || count(*)
        FROM user_orders o JOIN users u ON u.id = o.user_id
       WHERE snowflake_worker_id(o.id) = $((1000 + i))")
    [ "$fp_before" = "$fp_after" ] || die "shard ${NAMES[$i]}: orders and users no longer match after re-keying ($fp_before vs $fp_after)"
done
ts_ok=$(q $C -At -c "
    SELECT bool_and(snowflake_timestamp(id) >= date_trunc('milliseconds', created_at))
       AND bool_and(snowflake_timestamp(id) < created_at + interval '2 ms') FROM users")
log "legacy merge: fingerprints of both shards match; every user ID decodes to its created_at (+ at most 1 ms of carry): $ts_ok"
[ "$ts_ok" = t ] || die "re-keyed IDs do not follow created_at"

# --- 5. duplicate worker id: collisions are possible, and detectable ----------------
dup_found=0
for _ in 1 2 3; do
    q 1 -c "TRUNCATE orders" ; q 4 -c "TRUNCATE orders"
    for i in 1 4; do
        q $i -c "INSERT INTO orders (id) SELECT snowflake_nextval() FROM generate_series(1, 300000)" &
    done
    wait
    dup_found=$(q $C -At -c "SELECT count(*) FROM orders_s1 a JOIN orders_dup b USING (id)")
    [ "$dup_found" -gt 0 ] && break
done
log "duplicate worker id: servers s1 and dup (both worker 1) minted $dup_found identical IDs; a merge would collide"
[ "$dup_found" -gt 0 ] || die "expected colliding IDs from two servers sharing worker id 1"
detected=$(q $C -At -F ' | ' -c "SELECT node, problem FROM snowflake_fleet_check('5 seconds')
                                 WHERE problem IS NOT NULL ORDER BY node")
log "fleet check with the misconfigured server: $(paste -sd';' <<< "$detected")"
[ "$detected" = "dup | worker_id 1 is also used by s1
s1 | worker_id 1 is also used by dup" ] || die "the fleet check did not name both servers: '$detected'"
# The misconfigured server restarted with another epoch: it refuses to mint
# (the change could repeat IDs) and its layout differs from the fleet's.
q 4 -c "ALTER SYSTEM SET snowflake_id.epoch = '2025-01-01 00:00:00+00'"
cluster_stop "$(dir_of dup)"
cluster_up "$(dir_of dup)"
detected=$(q $C -At -c "SELECT problem FROM snowflake_fleet_check('5 seconds', ARRAY['dup']::name[]) WHERE node = 'dup'")
log "fleet check after dup's epoch change: $detected"
[[ "$detected" == *"layout differs from local: epoch 2025-01-01 00:00:00+00, 41/10/12 bits instead of 2024-01-01 00:00:00+00, 41/10/12"*"cannot mint: disabled: "* ]] \
    || die "the fleet check did not report dup's layout and state: '$detected'"
log "multinode: ok"
trap - EXIT
cleanup
rm -rf "$BASE"   # self-cleaning on success; kept for inspection on failure
