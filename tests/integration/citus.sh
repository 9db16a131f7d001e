#!/usr/bin/env bash
# Citus 14 on real clusters (PostgreSQL 18 only: Citus is built once from
# its source and cached; other majors skip this script). Where no source
# can be had (scripts/lib.sh, citus_tarball) the script says so in one
# line and skips, except under CI=true, where that fails. A
# coordinator (worker id 100) and two workers (1 and 2), metadata synced so
# that the workers accept writes too.
#  1. A distributed table keyed by DEFAULT snowflake_nextval() and
#     distributed on that key, a co-located child with a foreign key to it,
#     and a reference table.
#  2. Concurrent pgbench writes through the coordinator and through each
#     worker at once, in every statement form: single-row VALUES,
#     multi-row VALUES, INSERT ... SELECT, prepared statements run more than
#     5 times (Citus switches plans), and COPY, into the table and into its
#     child, whose default is not the distribution key. No failures, no
#     duplicates, foreign keys hold, and the worker id of every row is the
#     node that evaluated the default: recorded per statement form and
#     table, and asserted (the receiving node, or for the repartitioned
#     INSERT ... SELECT the target shard's node).
#  3. A shard move (citus_move_shard_placement) under write load (every
#     form but the repartitioned INSERT ... SELECT, see pulled.sql) leaves
#     every ID unchanged.
#  4. A time range through snowflake_min_id/snowflake_max_id counts the same
#     rows as a scan; EXPLAIN shows where the bounds are evaluated: Citus
#     ships the STABLE calls to each shard's node, which evaluates them and
#     scans the shard's primary key.
#  5. snowflake_fleet_check() on the coordinator checks every node: clean;
#     then, with worker 2 given worker 1's worker id, it names both; a
#     plain role is refused it, and run_command_on_all_nodes reads no
#     node's snowflake_node for it.
#  6. snowflake_raise_floor_from_data() leaves Citus tables out (a query
#     on one is distributed) and covers the node's plain tables; the
#     first INSERT into a distributed table works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
if [ "$PG_MAJOR" != 18 ]; then
    skip_test "runs on 18"
fi
if ! ensure_citus; then
    skip_test "$CITUS_WHY"
fi
BASE=$(state_dir "$ROOT/.run/it-citus" it-citus)
PORT0=${SNOWFLAKE_IT_CITUS_PORT:-25790}   # coordinator; workers +1, +2
DURATION=${SNOWFLAKE_IT_SECONDS:-8}
NAMES=(coord w1 w2)
WORKER=(100 1 2)
dir_of() { printf '%s/%s' "$BASE" "${NAMES[$1]}"; }
port_of() { echo $((PORT0 + $1)); }
q() {  # q INDEX [psql args...]
    local i="$1"; shift
    PGOPTIONS="-c client_min_messages=warning" timeout 300 "$(pgbin)/psql" -X -q -h 127.0.0.1 \
        -p "$(port_of "$i")" -U postgres -v ON_ERROR_STOP=1 "$@"
}
cleanup() { for i in 0 1 2; do cluster_stop "$(dir_of "$i")"; done; }
trap cleanup EXIT

for i in 0 1 2; do
    d=$(state_dir "$(dir_of "$i")" "it-citus/${NAMES[$i]}")
    cluster_stop "$d"
    cluster_init "$d" "$(port_of "$i")" "shared_preload_libraries = 'citus,snowflake_id'" \
        "snowflake_id.worker_id = ${WORKER[$i]}" "listen_addresses = '127.0.0.1'" \
        "wal_level = logical" "max_connections = 200"
    cluster_up "$d"
    q "$i" -c "CREATE EXTENSION citus" -c "CREATE EXTENSION snowflake_id"
done
q 0 -c "SELECT citus_set_coordinator_host('127.0.0.1', $(port_of 0))" \
    -c "SELECT citus_add_node('127.0.0.1', $(port_of 1))" -c "SELECT citus_add_node('127.0.0.1', $(port_of 2))" >/dev/null
synced=$(q 0 -At -c "SELECT count(*) FROM pg_dist_node WHERE hasmetadata AND metadatasynced")
[ "$synced" = 3 ] || die "metadata is synced to $synced of 3 nodes"

# --- 1. schema -------------------------------------------------------------------
q 0 >/dev/null <<'SQL'
CREATE TABLE countries (code text PRIMARY KEY, name text NOT NULL);
SELECT create_reference_table('countries');
INSERT INTO countries VALUES ('fr', 'France'), ('jp', 'Japan'), ('br', 'Brazil');
-- via: the node that received the statement; form: the statement form.
CREATE TABLE accounts (
    id      bigint PRIMARY KEY DEFAULT snowflake_nextval(),
    country text NOT NULL REFERENCES countries,
    via     text NOT NULL,
    form    text NOT NULL);
SELECT create_distributed_table('accounts', 'id', shard_count => 8);
CREATE TABLE account_events (
    account_id bigint NOT NULL REFERENCES accounts,
    id         bigint NOT NULL DEFAULT snowflake_nextval(),
    via        text NOT NULL,
    form       text NOT NULL,
    PRIMARY KEY (account_id, id));
SELECT create_distributed_table('account_events', 'account_id', colocate_with => 'accounts');
SQL

# --- 2. concurrent writes through every node, in every statement form -------------
# pgbench substitutes :via as raw text, so it is passed quoted.
cat > "$BASE/values.sql" <<'SQL'
INSERT INTO accounts (country, via, form) VALUES ('fr', :via, 'values');
SQL
# Each form also writes child rows, whose default (account_events.id) is not
# the distribution key; multi-row VALUES names two accounts, which may sit
# on different shards.
cat > "$BASE/multi.sql" <<'SQL'
INSERT INTO accounts (country, via, form) VALUES ('fr', :via, 'multi-row'), ('jp', :via, 'multi-row'), ('br', :via, 'multi-row');
SELECT max(id) AS account, min(id) AS other FROM accounts WHERE via = :via AND form = 'values' \gset
INSERT INTO account_events (account_id, via, form) VALUES (:account, :via, 'multi-row'), (:other, :via, 'multi-row');
SQL
cat > "$BASE/prepared.sql" <<'SQL'
INSERT INTO accounts (country, via, form) VALUES ('jp', :via, 'prepared');
SELECT max(id) AS account FROM accounts WHERE via = :via AND form = 'values' \gset
INSERT INTO account_events (account_id, via, form) VALUES (:account, :via, 'prepared');
SQL
cat > "$BASE/select.sql" <<'SQL'
INSERT INTO accounts (country, via, form) SELECT 'br', :via, 'insert-select' FROM generate_series(1, 5);
INSERT INTO account_events (account_id, via, form)
    SELECT id, :via, 'insert-select' FROM accounts WHERE id = (SELECT max(id) FROM accounts WHERE via = :via AND form = 'values');
SQL
# The same write for one account, which Citus pulls to the coordinator and
# copies into the shard. Section 3 runs this one across the shard move, not
# the repartitioned form above: a repartitioned INSERT ... SELECT that
# overlaps the move's cut-over can fail with Citus' own SQLSTATE CIINF
# ("Query could not find the intermediate result file"), a race in Citus
# (seen in 1 of about 8 CI runs, and 3 times in 10 moves back and forth).
cat > "$BASE/pulled.sql" <<'SQL'
SELECT max(id) AS account FROM accounts WHERE via = :via AND form = 'values' \gset
INSERT INTO accounts (country, via, form) SELECT 'br', :via, 'insert-select' FROM generate_series(1, 5);
INSERT INTO account_events (account_id, via, form)
    SELECT id, :via, 'insert-select' FROM accounts WHERE id = :account;
SQL
cat > "$BASE/child.sql" <<'SQL'
SELECT max(id) AS account FROM accounts WHERE via = :via AND form = 'values' \gset
INSERT INTO account_events (account_id, via, form) VALUES (:account, :via, 'values');
SQL
load() {  # load SECONDS FORMS...: each form through every node, and COPY beside
    local secs="$1" i f mode pids=() outs=() copies=(); shift
    rm -f "$BASE/load.why" "$BASE"/load-*.out "$BASE"/load-*-copy.err   # an earlier run's
    for i in 0 1 2; do
        for f in "$@"; do
            # Prepared statements take :via as a parameter, the others as text.
            mode=simple via="'${NAMES[$i]}'"
            [ "$f" = prepared ] && mode=prepared via=${NAMES[$i]}
            timeout $((secs + 120)) "$(pgbin)/pgbench" -n -h 127.0.0.1 -p "$(port_of "$i")" -U postgres \
                -c 1 -j 1 -T "$secs" -M "$mode" -D via="$via" -f "$BASE/$f.sql" \
                --failures-detailed --verbose-errors postgres \
                >"$BASE/load-$i-$f.out" 2>&1 &
            pids+=($!) outs+=("$BASE/load-$i-$f.out")
        done
        (   end=$((SECONDS + secs)); n=${NAMES[$i]}
            read -ra accts < <(q "$i" -At -c "SELECT string_agg(id::text, ' ') FROM (SELECT id FROM accounts
                                               WHERE via = '$n' AND form = 'values' ORDER BY id DESC LIMIT 10) a")
            while [ $SECONDS -lt "$end" ]; do
                for _ in $(seq 1 200); do printf 'jp\t%s\tcopy\n' "$n"; done \
                    | q "$i" -c "COPY accounts (country, via, form) FROM STDIN" || exit 1
                for a in "${accts[@]}"; do printf '%s\t%s\tcopy\n' "$a" "$n"; done \
                    | q "$i" -c "COPY account_events (account_id, via, form) FROM STDIN" || exit 1
            done ) 2> "$BASE/load-$i-copy.err" &
        copies+=($!)
    done
    # Why, for the die: the first unclean pgbench run's error, or the
    # first failed COPY loop's (its stderr may hold a WARNING of a clean one).
    local rc=0 p why=""
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    for f in "${outs[@]}"; do
        pgbench_clean "$f" && continue
        cat "$f" >&2; rc=1
        [ -n "$why" ] || why="$(basename "$f" .out): $(pgbench_why "$f")"
    done
    for i in 0 1 2; do
        p=0; wait "${copies[$i]}" || p=$?
        [ "$p" != 0 ] || continue
        f="$BASE/load-$i-copy.err"; cat "$f" >&2; rc=$p
        [ -n "$why" ] || why="load-$i-copy: $(grep -m1 . "$f" || echo "exit $p, nothing on stderr")"
    done
    printf '%s\n' "$why" > "$BASE/load.why"
    return $rc
}
load_why() { head -1 "$BASE/load.why" 2>/dev/null || true; }
for i in 0 1 2; do q "$i" -c "INSERT INTO accounts (country, via, form) VALUES ('fr', '${NAMES[$i]}', 'values')"; done
log "writes through the coordinator and both workers for ${DURATION}s: VALUES, multi-row, prepared, INSERT ... SELECT, COPY"
load "$DURATION" values multi prepared select child || die "writes failed: $(load_why)"
# Where each form evaluated the default: the worker ids seen per table,
# statement form and receiving node.
where=$(q 0 -At -F ' ' -c "
    SELECT t, form, via, string_agg(DISTINCT worker::text, ',' ORDER BY worker::text), count(*)
      FROM (SELECT 'accounts' t, form, via, snowflake_worker_id(id) worker FROM accounts
            UNION ALL SELECT 'account_events', form, via, snowflake_worker_id(id) FROM account_events) x
     GROUP BY 1, 2, 3 ORDER BY 1, 2, 3")
log "where the default ran (table, form, receiving node, worker ids of the rows, rows):"
sed 's/^/    /' <<< "$where" >&2
[ "$(wc -l <<< "$where")" = 30 ] || die "expected every form through every node in both tables"
awk '$2 == "prepared" && $5 <= 5 {bad = 1} END {exit bad}' <<< "$where" \
    || die "a prepared statement ran 5 times or fewer on some node (Citus switches plans after 5)"
node_worker="CASE via WHEN 'coord' THEN 100 WHEN 'w1' THEN 1 WHEN 'w2' THEN 2 END"
shard_worker="CASE (SELECT nodeport FROM citus_shards s WHERE s.shardid = get_shard_id_for_distribution_column('account_events', e.account_id))
              WHEN $(port_of 1) THEN 1 WHEN $(port_of 2) THEN 2 END"
# Citus never pushes down an INSERT ... SELECT with a volatile function in
# it, and the default of account_events.id is one. It repartitions
# select.sql's: the SELECT runs on the source shards, the INSERT, with its
# default, on the target shard's node.
explain_insert_events() {  # explain_insert_events WHERE: the INSERT/SELECT method, or none
    q 0 -At -c "EXPLAIN (COSTS OFF) INSERT INTO account_events (account_id, via, form)
                SELECT id, 'coord', 'insert-select' FROM accounts WHERE $1" \
        | sed -n 's/^ *INSERT\/SELECT method: //p' | grep . || echo none
}
method=$(explain_insert_events "id = (SELECT max(id) FROM accounts WHERE via = 'coord' AND form = 'values')")
[ "$method" = repartition ] || die "select.sql's INSERT ... SELECT is planned as '$method', not repartitioned"
read -r bad_receiving bad_shard pushed dups orphans < <(q 0 -At -F ' ' -c "
    SELECT (SELECT count(*) FROM accounts WHERE snowflake_worker_id(id) <> $node_worker)
         + (SELECT count(*) FROM account_events WHERE form <> 'insert-select' AND snowflake_worker_id(id) <> $node_worker),
           (SELECT count(*) FROM account_events e WHERE form = 'insert-select' AND snowflake_worker_id(id) <> $shard_worker),
           (SELECT count(*) FROM account_events WHERE form = 'insert-select'),
           (SELECT count(*) - count(DISTINCT id) FROM (SELECT id FROM accounts UNION ALL SELECT id FROM account_events) a),
           (SELECT count(*) FROM account_events e WHERE NOT EXISTS (SELECT FROM accounts a WHERE a.id = e.account_id))")
[ "$bad_receiving" = 0 ] || die "$bad_receiving rows do not carry the worker id of the node that received their statement"
[ "$pushed" -gt 0 ] && [ "$bad_shard" = 0 ] \
    || die "repartitioned INSERT ... SELECT rows: $bad_shard of $pushed do not carry the worker id of their shard's node"
[ "$dups" = 0 ] || die "$dups duplicate IDs across the cluster"
[ "$orphans" = 0 ] || die "$orphans child rows without their account"
log "every row's worker id is the node that evaluated its default: the receiving node, or the shard's node for the $pushed repartitioned INSERT ... SELECT rows; 0 duplicates, 0 orphans"

# --- 3. a shard move under write load --------------------------------------------
# fingerprint TABLE ROW: the count and md5 of ROW over TABLE's rows whose
# ids were saved in TABLE_before_move, before the move.
fingerprint() {
    q 0 -At -c "WITH b AS MATERIALIZED (SELECT id FROM $1_before_move)
                SELECT count(*) || ' ' || md5(string_agg($2, ',' ORDER BY id)) FROM $1 WHERE id IN (SELECT id FROM b)"
}
declare -A ROW=([accounts]="id || via || form" [account_events]="account_id || ':' || id || via || form")
declare -A BEFORE=()
for t in accounts account_events; do
    q 0 -c "CREATE TABLE ${t}_before_move AS SELECT id FROM $t"
    BEFORE[$t]=$(fingerprint "$t" "${ROW[$t]}")
done
read -r shard from_port < <(q 0 -At -F ' ' -c "
    SELECT shardid, nodeport FROM citus_shards WHERE table_name = 'accounts'::regclass AND nodeport = $(port_of 1)
     ORDER BY shard_size DESC, shardid LIMIT 1")
to_port=$(port_of 2)
some_id=$(q 0 -At -c "SELECT min(id) FROM accounts")
method=$(explain_insert_events "id = $some_id")
[ "$method" = "pull to coordinator" ] || die "pulled.sql's INSERT ... SELECT is planned as '$method', not pulled to the coordinator"
log "moving shard $shard of accounts (and its co-located shard) from w1 to w2 under write load"
moved_from=$(q 0 -At -c "SELECT count(*) FROM accounts")
load "$DURATION" values multi prepared pulled child & loader=$!
# The move starts once the load writes (polled: a busy machine may start it late).
writing() { [ "$(q 0 -At -c "SELECT count(*) > $moved_from FROM accounts")" = t ]; }
poll_until 120 writing || die "the load wrote no row in 120 s"
q 0 -c "SELECT citus_move_shard_placement($shard, '127.0.0.1', $from_port, '127.0.0.1', $to_port, shard_transfer_mode => 'force_logical')" >/dev/null
wait "$loader" || die "writes failed during the shard move: $(load_why)"
now_port=$(q 0 -At -c "SELECT nodeport FROM citus_shards WHERE shardid = $shard")
[ "$now_port" = "$to_port" ] || die "shard $shard is on port $now_port, not $to_port"
for t in accounts account_events; do
    after=$(fingerprint "$t" "${ROW[$t]}")
    [ "$after" = "${BEFORE[$t]}" ] || die "$t: rows changed or vanished in the shard move: before ${BEFORE[$t]}, after $after"
done
log "shard move: the ${BEFORE[accounts]%% *} earlier accounts and ${BEFORE[account_events]%% *} child rows are unchanged (fingerprints ${BEFORE[accounts]##* }, ${BEFORE[account_events]##* }), and writes went on through every node"

# --- 4. a time range through the bounds -------------------------------------------
IFS='|' read -r t1 t2 < <(q 0 -At -F '|' -c "
    SELECT snowflake_timestamp(min(id)) + interval '1 second', snowflake_timestamp(min(id)) + interval '3 seconds' FROM accounts")
read -r by_bounds by_scan < <(q 0 -At -F ' ' -c "
    SELECT (SELECT count(*) FROM accounts WHERE id >= snowflake_min_id('$t1') AND id < snowflake_min_id('$t2')),
           (SELECT count(*) FROM accounts WHERE snowflake_timestamp(id) >= '$t1' AND snowflake_timestamp(id) < '$t2')")
[ "$by_bounds" = "$by_scan" ] && [ "$by_bounds" -gt 0 ] || die "the range through the bounds counts $by_bounds rows, the scan $by_scan"
plan=$(q 0 -At -c "EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*) FROM accounts WHERE id >= snowflake_min_id('$t1') AND id < snowflake_min_id('$t2')")
grep -E "Query:|Index Cond" <<< "$plan" | head -2 | sed 's/^ */    /' >&2
# The bounds are STABLE: Citus ships the calls to every shard's node, which
# evaluates them with its own layout and uses the shard's primary key.
grep -qE "Query: .*WHERE \(\(id OPERATOR\(pg_catalog\.>=\) public\.snowflake_min_id\(" <<< "$plan" \
    && grep -qE "Index Cond: \(\(accounts\.id >= snowflake_min_id\(" <<< "$plan" \
    || { echo "$plan" >&2; die "the plan does not evaluate the bounds on the shards' nodes through their primary keys"; }
log "time range: $by_bounds rows through the bounds, the same through a scan; each shard's node evaluates the bounds and scans its primary key"

# --- 5. the fleet check -------------------------------------------------------------
fleet=$(q 0 -At -F ' ' -c "SELECT node, source, worker_id, coalesce(problem, 'ok') FROM snowflake_fleet_check()")
log "fleet check on the coordinator: $(paste -sd';' <<< "$fleet")"
[ "$fleet" = "local local 100 ok
127.0.0.1:$(port_of 1) citus 1 ok
127.0.0.1:$(port_of 2) citus 2 ok" ] || die "the fleet check of the healthy Citus cluster is not clean"
q 2 -c "ALTER SYSTEM SET snowflake_id.worker_id = 1" -c "SELECT pg_reload_conf()" >/dev/null
w2_is_1() { [ "$(q 2 -At -c "SHOW snowflake_id.worker_id")" = 1 ]; }
poll_until 60 w2_is_1 || die "worker_id = 1 not in effect on w2 60 s after the reload"
caught=$(q 0 -At -F ' | ' -c "SELECT node, problem FROM snowflake_fleet_check() WHERE problem IS NOT NULL")
log "with w2 given w1's worker id: $(paste -sd';' <<< "$caught")"
[ "$caught" = "127.0.0.1:$(port_of 1) | worker_id 1 is also used by 127.0.0.1:$(port_of 2)
127.0.0.1:$(port_of 2) | worker_id 1 is also used by 127.0.0.1:$(port_of 1)" ] \
    || die "the fleet check did not name both Citus workers: '$caught'"
# A plain role reaches no node's snowflake_node, neither through the fleet
# check nor through Citus' run_command_on_all_nodes (docs/security.md):
# pg_control_system() is not theirs on any node.
q 0 -c "CREATE ROLE fleet_plain LOGIN" >/dev/null
out=$(q 0 -c "SET ROLE fleet_plain" -c "SELECT * FROM snowflake_fleet_check()" 2>&1) \
    && die "a plain role ran the fleet check on the Citus coordinator"
grep -q "permission denied" <<< "$out" || die "the fleet check refused a plain role, but not with 42501: $out"
out=$(q 0 -At -c "SET ROLE fleet_plain" \
      -c "SELECT coalesce(bool_or(success), false) FROM run_command_on_all_nodes('SELECT row_to_json(n) FROM public.snowflake_node n')" 2>&1 || true)
[[ "$out" == f || "$out" == *"permission denied"* ]] \
    || die "a plain role read snowflake_node through run_command_on_all_nodes: $out"
log "a plain role is refused the fleet check and every node's snowflake_node"

# --- 6. the floor from the data (by hand) --------------------------------------------------
# Section 1's first INSERT on each node made its first call already.
for i in 0 1; do
    floor=$(q "$i" -At -c "CREATE TABLE local_keys (id bigint PRIMARY KEY DEFAULT snowflake_nextval())" \
        -c "INSERT INTO local_keys DEFAULT VALUES" \
        -c "SELECT string_agg(relation || '.' || column_name, ' ' ORDER BY relation) FROM snowflake_raise_floor_from_data()")
    [ "$floor" = "public.local_keys.id" ] || die "the floor check on ${NAMES[$i]} covered '$floor', not the plain table local_keys alone"
done
log "floor from the data: the coordinator and a worker check their plain tables and leave Citus tables out"

log "citus: ok"
trap - EXIT
cleanup
rm -rf "$BASE"   # self-cleaning on success; kept for inspection on failure
