#!/usr/bin/env bash
# The online conversion (snowflake_convert_online) of a table of
# SNOWFLAKE_CONVERT_ROWS rows (10M on PostgreSQL 18, 300,000 on the other
# majors) referenced by two tables
# (one tenth of that each), while pgbench inserts (an order with an item
# and a payment), updates, deletes and reads the whole time; first, on a
# small pair of tables, a first step that must retry for a lock:
#  - the procedure is killed (pg_terminate_backend) in the middle of the
#    back-fill, and the next run resumes from the recorded page;
#  - the rest is the documented recipe, tests/integration/convert_online.sql;
#  - zero failed transactions in the load, the longest transaction is
#    reported (it contains any wait for the conversion's locks), and so is
#    the longest lock wait; no lock wait is half as long as the conversion
#    (which would mean a lock held across the back-fill: a ratio, so that
#    a busy machine, slowing both, cannot fail it);
#  - no row lost or changed: order-independent checksums of the rows the
#    load never touches, sum(n) equal to the updates the load made, every
#    order inserted by the load with its item and payment;
#  - keys, foreign keys, indexes, constraint names and defaults as after the
#    offline conversion, every foreign key validated, nothing left behind.
# (snowflake_convert_plan()'s estimate against the real offline
# conversion's time is convert_estimate.sh's, which runs alone.)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
BASE=$(state_dir "$ROOT/.run/it-convert-online" it-convert-online)
PORT=${SNOWFLAKE_IT_CONVERT_PORT:-15650}
DIR=$(state_dir "$BASE/cluster" it-convert-online/cluster)
# The full size on PostgreSQL 18; other majors check the same behaviour on
# 300,000 rows (about 15 s instead of about 4 minutes).
if [ "$PG_MAJOR" = 18 ]; then ROWS=${SNOWFLAKE_CONVERT_ROWS:-10000000}; else ROWS=${SNOWFLAKE_CONVERT_ROWS:-300000}; fi
BAND=$((ROWS / 50))   # orders 1..BAND may be deleted by the load
q() { PGOPTIONS="-c client_min_messages=warning" timeout 1800 "$(pgbin)/psql" -X -q -h "$DIR" -p "$PORT" -U postgres -v ON_ERROR_STOP=1 "$@"; }
cleanup() { touch "$BASE/stop"; cluster_stop "$DIR"; }
trap cleanup EXIT
cluster_stop "$DIR"
rm -f "$BASE/stop" "$BASE"/load.*
cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 9" \
    "shared_buffers = '512MB'" "max_wal_size = '1GB'" "maintenance_work_mem = '256MB'" \
    "log_lock_waits = on" "deadlock_timeout = '200ms'" "autovacuum_naptime = '5s'"
cluster_up "$DIR"

log "loading $ROWS orders and $((ROWS / 10)) items and payments"
t0=$(date +%s)
q <<SQL
CREATE EXTENSION snowflake_id;
CREATE TABLE orders (id serial PRIMARY KEY, customer int NOT NULL, amount int NOT NULL, n int NOT NULL DEFAULT 0);
COMMENT ON COLUMN orders.id IS 'the order number';
CREATE TABLE order_items (id bigserial PRIMARY KEY, order_id int NOT NULL REFERENCES orders, qty int NOT NULL);
CREATE TABLE payments (id bigserial PRIMARY KEY, order_id int REFERENCES orders ON DELETE CASCADE, amount int NOT NULL);
ALTER TABLE orders SET (autovacuum_enabled = off);
INSERT INTO orders (customer, amount) SELECT g % 1000, g % 997 FROM generate_series(1, $ROWS) g;
INSERT INTO order_items (order_id, qty)
SELECT $BAND + 1 + (g::bigint * 7919) % ($ROWS - $BAND), g % 5 + 1 FROM generate_series(1, $ROWS / 10) g;
INSERT INTO payments (order_id, amount) SELECT 1 + (g::bigint * 104729) % $ROWS, g % 100 FROM generate_series(1, $ROWS / 10) g;
CREATE INDEX order_items_order_id_idx ON order_items (order_id);
CREATE INDEX payments_order_id_idx ON payments (order_id);
CREATE TABLE upd_log (order_id int NOT NULL);
ALTER TABLE orders RESET (autovacuum_enabled);
VACUUM ANALYZE orders, order_items, payments;
SQL
log "loaded in $(( $(date +%s) - t0 )) s: $(q -At -c "SELECT pg_size_pretty(pg_total_relation_size('orders'))") of orders"
# --- 0. a lock that makes the first step wait, on a small pair of tables ----------------
# The prepare step adds a column to each table; another session's lock on
# the referencing one makes it time out after the key's column is added
# (rolled back) and retry: the retry must prepare again from scratch.
q -c "CREATE TABLE lk (id serial PRIMARY KEY)" \
  -c "CREATE TABLE lk_ref (id serial PRIMARY KEY, r int NOT NULL REFERENCES lk)" \
  -c "INSERT INTO lk SELECT FROM generate_series(1, 1000)" -c "INSERT INTO lk_ref (r) SELECT id FROM lk"
# The lock is held until the conversion has run for a second (well over a
# hundred 10 ms lock waits), however late a busy machine starts it.
q -c "BEGIN" -c "LOCK TABLE lk_ref IN ACCESS SHARE MODE" -c "
    DO \$\$ DECLARE t0 timestamptz := clock_timestamp(); BEGIN
        WHILE NOT EXISTS (SELECT FROM pg_stat_activity WHERE query LIKE 'CALL snowflake_convert_online(''lk''%')
              AND clock_timestamp() < t0 + interval '300 seconds' LOOP
            PERFORM pg_sleep(0.01); PERFORM pg_stat_clear_snapshot();
        END LOOP;
        PERFORM pg_sleep(1);
    END \$\$" -c "COMMIT" >/dev/null &
locker=$!
locked() { [ "$(q -At -c "SELECT count(*) FROM pg_locks WHERE relation = 'lk_ref'::regclass AND granted")" -gt 0 ]; }
poll_until 60 locked || die "the locker did not get its lock on lk_ref in 60 s"
q -c "CALL snowflake_convert_online('lk', 'id', lock_wait => '10ms', max_retries => 100000)" > "$BASE/lock.out" 2>&1 \
    || { cat "$BASE/lock.out" >&2; die "the conversion of lk failed while lk_ref was locked"; }
wait "$locker"
q > "$BASE/lock2.out" 2>&1 <<'SQL' || { cat "$BASE/lock2.out" >&2; die "the conversion of lk did not finish after its retries"; }
SELECT snowflake_convert_online_indexes('lk', 'id') \gexec
CALL snowflake_convert_online('lk', 'id');
SQL
[ "$(q -At -c "SELECT string_agg(format_type(atttypid, atttypmod), ',' ORDER BY attrelid::regclass::text)
               FROM pg_attribute WHERE (attrelid, attname) IN (('lk'::regclass, 'id'), ('lk_ref'::regclass, 'r'))")" = "bigint,bigint" ] \
    && [ "$(q -At -c "SELECT count(*) FROM lk_ref JOIN lk ON lk.id = lk_ref.r")" = 1000 ] \
    || die "lk and lk_ref were not converted intact after the prepare step retried"
log "a lock held during the first step: it retried, and the conversion of lk is intact"

MAXITEM=$(q -At -c "SELECT max(id) FROM order_items")
MAXPAY=$(q -At -c "SELECT max(id) FROM payments")
sums() {
    q -At -c "
    SELECT (SELECT count(*) || ':' || sum(hashtextextended(id || '/' || customer || '/' || amount, 0)::numeric)
              FROM orders WHERE id > $BAND AND id <= $ROWS),
           (SELECT count(*) || ':' || sum(hashtextextended(id || '/' || order_id || '/' || qty, 0)::numeric)
              FROM order_items WHERE id <= $MAXITEM),
           (SELECT count(*) || ':' || sum(hashtextextended(id || '/' || order_id || '/' || amount, 0)::numeric)
              FROM payments WHERE id <= $MAXPAY AND order_id > $BAND)"
}
before=$(sums)

# --- the load: pgbench in 5-second rounds until the conversion is over ---------------
cat > "$BASE/ins.sql" <<'SQL'
\set c random(1, 1000)
BEGIN;
INSERT INTO orders (customer, amount) VALUES (:c, 1) RETURNING id AS new_id \gset
INSERT INTO order_items (order_id, qty) VALUES (:new_id, 1);
INSERT INTO payments (order_id, amount) VALUES (:new_id, 1);
END;
SQL
printf '\\set r random(%s, %s)\nBEGIN;\nUPDATE orders SET n = n + 1 WHERE id = :r;\nINSERT INTO upd_log VALUES (:r);\nEND;\n' $((BAND + 1)) "$ROWS" > "$BASE/upd.sql"
printf '\\set r random(1, %s)\nDELETE FROM orders WHERE id = :r;\n' "$BAND" > "$BASE/del.sql"
printf '\\set r random(1, %s)\nSELECT o.id, count(i.id) FROM orders o LEFT JOIN order_items i ON i.order_id = o.id WHERE o.id = :r GROUP BY o.id;\n' "$ROWS" > "$BASE/read.sql"
(
    cd "$BASE"
    round=0
    while [ ! -e "$BASE/stop" ]; do
        round=$((round + 1))
        timeout 120 "$(pgbin)/pgbench" -n -h "$DIR" -p "$PORT" -U postgres -c 4 -j 2 -T 5 \
            -l --log-prefix="load.$round" \
            -f "$BASE/ins.sql@4" -f "$BASE/upd.sql@4" -f "$BASE/del.sql@1" -f "$BASE/read.sql@2" \
            postgres > "$BASE/load.$round.out" 2>&1 || echo "round $round: pgbench exited $?" >> "$BASE/load.failed"
    done
) &
loader=$!
# The load is running (its first transactions logged) before the conversion starts.
load_runs() { [ -n "$(cat "$BASE"/load.1.[0-9]* 2>/dev/null | head -1)" ]; }
poll_until 120 load_runs || die "the load logged no transaction in 120 s"

# --- 1. start, and kill the procedure in the middle of the back-fill -------------------
t_conv=$(date +%s%3N)
q -c "CALL snowflake_convert_online('orders', 'id', batch_pages => 500)" > "$BASE/call1.out" 2>&1 &
call=$!
pages_total=0
for ((i = 0; i < 3000; i++)); do
    read -r done_pages pages_total < <(q -At -F ' ' -c "SELECT pages_done, pages_total FROM snowflake_convert_status WHERE relation = 'orders'::regclass") || true
    [ -n "${done_pages:-}" ] && [ "$pages_total" -gt 0 ] && [ $((done_pages * 3)) -ge "$pages_total" ] && break
    sleep 0.2
done
[ $((${done_pages:-0} * 3)) -ge "$pages_total" ] || die "the back-fill never reached a third of the table"
pid=$(q -At -c "SELECT pid FROM pg_stat_activity WHERE query LIKE 'CALL snowflake_convert_online%' AND pid <> pg_backend_pid()")
[ "$(q -At -c "SELECT pg_terminate_backend($pid)")" = t ] || die "could not terminate the conversion"
wait "$call" && die "the killed conversion reported success"
read -r p1 b1 phase < <(q -At -F ' ' -c "SELECT pages_done, batches, phase FROM snowflake_convert_status WHERE relation = 'orders'::regclass")
[ "$phase" = backfill ] || die "phase after the kill is $phase, not backfill"
log "killed the conversion during the back-fill of orders at page $p1 of $pages_total ($b1 batches)"

# --- 2. the documented recipe, which resumes -----------------------------------------
t1=$(date +%s)
q -f "$ROOT/tests/integration/convert_online.sql" > "$BASE/recipe.out" 2>&1 &
recipe=$!
first=""
for ((i = 0; i < 3000; i++)); do
    read -r pn bn < <(q -At -F ' ' -c "SELECT pages_done, batches FROM snowflake_convert_status WHERE relation = 'orders'::regclass") || true
    if [ "${bn:-0}" -gt "$b1" ]; then first=$pn; break; fi
    sleep 0.05
done
[ -n "$first" ] || die "the resumed conversion never advanced"
[ "$first" -gt "$p1" ] && [ "$first" -le $((p1 + 1000)) ] \
    || die "the resumed back-fill did not continue from page $p1 (its first batch ended at page $first)"
log "resumed: the first batch after the kill ended at page $first"
wait "$recipe" || { cat "$BASE/recipe.out" >&2; die "the recipe failed"; }
conv_ms=$(( $(date +%s%3N) - t_conv ))
log "the recipe finished in $(( $(date +%s) - t1 )) s; the conversion took $conv_ms ms in all"
touch "$BASE/stop"
wait "$loader"
[ ! -e "$BASE/load.failed" ] || { cat "$BASE/load.failed" >&2; die "pgbench failed during the conversion"; }
rounds=0; failed=0
for f in "$BASE"/load.*.out; do
    rounds=$((rounds + 1))
    pgbench_clean "$f" || { cat "$f" >&2; failed=$((failed + 1)); }
done
[ "$failed" = 0 ] || die "$failed pgbench rounds had failed transactions"
count_of() {  # transactions of script $1 over all rounds
    awk -v s="$1" '$0 ~ "^SQL script [0-9]+: .*" s {hit = 1; next} hit && / transactions \(/ {sub(/^ *- */, ""); n += $1; hit = 0} END {print n + 0}' "$BASE"/load.*.out
}
ins=$(count_of ins.sql); upd=$(count_of upd.sql); del=$(count_of del.sql); rd=$(count_of read.sql)
longest_ms=$(cat "$BASE"/load.*.[0-9]* 2>/dev/null | awk '{if ($3 > m) m = $3} END {printf "%.0f", m / 1000}')
log "the load ran $rounds rounds of 5 s: $ins inserts, $upd updates, $del deletes, $rd reads, 0 failed; longest transaction $longest_ms ms"

# --- 3. the result --------------------------------------------------------------------
after=$(sums)
[ "$before" = "$after" ] || die "rows the load never touched changed: $before -> $after"
# pgbench does not count a transaction still running when its time is up,
# so the database's own records are the judge, and pgbench's counts a floor.
read -r sum_n logged < <(q -At -F ' ' -c "SELECT (SELECT sum(n) FROM orders), (SELECT count(*) FROM upd_log)")
[ "$sum_n" = "$logged" ] && [ "$logged" -ge "$upd" ] || die "sum(n) is $sum_n, but $logged updates were logged (pgbench counted $upd)"
read -r new_orders new_items new_pays orphans < <(q -At -F ' ' -c "
    SELECT count(*), (SELECT count(*) FROM order_items WHERE id > $MAXITEM), (SELECT count(*) FROM payments WHERE id > $MAXPAY),
           count(*) FILTER (WHERE NOT EXISTS (SELECT FROM order_items i WHERE i.order_id = o.id)
                               OR NOT EXISTS (SELECT FROM payments p WHERE p.order_id = o.id))
      FROM orders o WHERE o.id > $ROWS")
[ "$new_orders" = "$new_items" ] && [ "$new_orders" = "$new_pays" ] && [ "$orphans" = 0 ] && [ "$new_orders" -ge "$ins" ] \
    || die "$new_orders new orders, $new_items new items, $new_pays new payments, $orphans orders without their item or payment (pgbench counted $ins)"
shape=$(q -At -c "
    SELECT string_agg(format('%s.%s %s %s %s', c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
                             CASE WHEN a.attnotnull THEN 'not null' ELSE 'null' END,
                             coalesce(pg_get_expr(d.adbin, d.adrelid), '-')), '; ' ORDER BY c.relname, a.attname)
      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE c.relname IN ('orders', 'order_items', 'payments') AND a.attname IN ('id', 'order_id') AND a.attnum > 0 AND NOT a.attisdropped")
want="order_items.id bigint not null nextval('order_items_id_seq'::regclass); order_items.order_id bigint not null -; orders.id bigint not null nextval('orders_id_seq'::regclass); payments.id bigint not null nextval('payments_id_seq'::regclass); payments.order_id bigint null -"
[ "$shape" = "$want" ] || die "columns after the conversion: $shape"
cons=$(q -At -c "
    SELECT string_agg(format('%s %s %s %s', conrelid::regclass, conname, convalidated, pg_get_constraintdef(oid)), '; ' ORDER BY conrelid::regclass::text, conname)
      FROM pg_constraint WHERE conrelid IN ('orders'::regclass, 'order_items'::regclass, 'payments'::regclass) AND contype IN ('p', 'f', 'c', 'u')")
want="order_items order_items_order_id_fkey t FOREIGN KEY (order_id) REFERENCES orders(id); order_items order_items_pkey t PRIMARY KEY (id); orders orders_pkey t PRIMARY KEY (id); payments payments_order_id_fkey t FOREIGN KEY (order_id) REFERENCES orders(id) ON DELETE CASCADE; payments payments_pkey t PRIMARY KEY (id)"
[ "$cons" = "$want" ] || die "constraints after the conversion: $cons"
idx=$(q -At -c "SELECT string_agg(indexrelid::regclass::text || ' ' || indisvalid, ', ' ORDER BY indexrelid::regclass::text) FROM pg_index WHERE indrelid IN ('orders'::regclass, 'order_items'::regclass, 'payments'::regclass)")
[ "$idx" = "order_items_order_id_idx true, order_items_pkey true, orders_pkey true, payments_order_id_idx true, payments_pkey true" ] || die "indexes after the conversion: $idx"
left=$(q -At -c "SELECT (SELECT count(*) FROM pg_trigger WHERE tgname = 'snowflake_convert_sync')
                      + (SELECT count(*) FROM pg_class WHERE relname LIKE 'snowflake_new%')
                      + (SELECT count(*) FROM pg_attribute WHERE attname LIKE '%snowflake_new' AND NOT attisdropped)")
[ "$left" = 0 ] || die "$left objects of the conversion are left behind"
[ "$(q -At -c "SELECT col_description('orders'::regclass, (SELECT attnum FROM pg_attribute WHERE attrelid = 'orders'::regclass AND attname = 'id'))")" = "the order number" ] \
    || die "the column comment was lost"
read -r fresh oldmax < <(q -At -F ' ' -c "INSERT INTO orders (customer, amount) VALUES (1, 1) RETURNING id, (SELECT max(id) FROM orders)")
[ "$fresh" -ge "$oldmax" ] || die "a new ID $fresh is not above the existing ones ($oldmax)"
log "after the conversion: $shape"
log "every foreign key validated, names kept, nothing left behind; checksums of untouched rows equal; sum(n) = $logged updates; $new_orders new orders, each with its item and payment"
# log_lock_waits logs every lock granted after more than deadlock_timeout,
# with the time waited: the longest, whoever waited, is the figure to report.
longest_wait=$(sed -nE 's/.*acquired ([A-Za-z]+) on relation ([0-9]+) .* after ([0-9.]+) ms.*/\3 \1 \2/p' "$DIR/server.log" | sort -g | tail -1)
if [ -n "$longest_wait" ]; then
    read -r wait_ms wait_mode wait_rel <<< "$longest_wait"
    log "longest lock wait (log_lock_waits logs those over deadlock_timeout = 200 ms): $wait_ms ms for $wait_mode on $(q -At -c "SELECT $wait_rel::regclass") (reported), of a conversion of $conv_ms ms"
    awk -v m="$wait_ms" -v c="$conv_ms" 'BEGIN {exit !(m * 2 < c)}' \
        || die "a session waited $wait_ms ms for a lock, half the conversion's $conv_ms ms: a lock held across the back-fill"
else
    log "longest lock wait: none over deadlock_timeout (200 ms)"
fi

log "convert_online: ok"
trap - EXIT
cleanup
rm -rf "$BASE"   # self-cleaning on success; kept for inspection on failure
