#!/usr/bin/env bash
# Red-team attack on the worker-id registry (issue 56, item 2): one
# member locks the whole pool. Inside one open transaction, mallory (a
# member of snowflake_lease, limit one live lease) claims an id with a
# fresh token and releases it, again and again. A released row no longer
# counted against her limit, but her transaction kept it row-locked, and
# every claim skips locked rows: new, moved or cloned servers got no id,
# and their error said, wrongly, that every worker id was held.
#
# The registry here hands out 8 worker ids (worker_bits 3), and allows
# prepared transactions.
#  1. Mallory runs the loop in three sessions at once (her connection
#     limit), each transaction kept open. Promise: she locks at most her
#     limit's worth of rows, and server 1 (lease_m1) gets an id.
#  2. The review of the fix (issue 56): in one transaction she claims
#     with a 1 s TTL, lets the lease run out, and claims again; then she
#     prepares the transaction and disconnects (no timeout or
#     termination ends it). Promise: it locks at most one row, and
#     lease_m2 claims an id.
#  3. The same review: she claims with a 1 s TTL and commits, then in
#     each of her three sessions renews it in a transaction she keeps
#     open, letting it run out. Promise: at most one row locked.
#  5. The second review: she claims and releases each free id in its own
#     transaction, keeping the tokens, then releases and renews all
#     those dead leases in one prepared transaction. Promise: at most one
#     row locked (none: dead leases are neither released nor renewed).
#  6. The second review: a claim in REPEATABLE READ (an older snapshot,
#     exported from a session opened before her leases, counted none of
#     them) is refused.
#  4. A superuser raises her limit to 8: the rows she may lock are hers
#     to hold. Promise: server 2 (lease_m2), finding every free id
#     locked, reports that other transactions hold their rows, not that
#     every id is held.
# Passes (exit 0) when every promise holds; fails (exit 1) while the
# attack works (fcdfa36 failed part 1: mallory locked all 8 ids and
# server 1 got none; on d2d6203 the review's scripts for parts 2 and 3
# locked 8 of 8 rows and 3 rows; the second review found parts 5 and 6
# on 9460b7d by reading its code).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/registry_lib.sh"
registry_scaffold poollock "${SNOWFLAKE_ATTACK_PORT:-16350}"   # the registry; minting server N on the port + N
# ------------------------------------------------------------------------
REG_INIT="worker_bits => 3" registry_up_documented "max_prepared_transactions = 4"
rs postgres registry -c "CREATE ROLE lease_m2 LOGIN CONNECTION LIMIT 3 IN ROLE snowflake_lease" >/dev/null

# loop_open: mallory claims and releases ids, fresh tokens, in one
# transaction she keeps open, as a new holder each time (a refusal ends
# only its own attempt).
loop_open() {
    rs mallory registry >"$BASE/loop.$1.log" 2>&1 <<'SQL' & holders+=($!)
BEGIN;
DO $$
DECLARE w integer; e bigint; t uuid; n integer := 0; refused integer := 0;
BEGIN
    -- 3 s of rounds, so that an id whose lease is about to run out is
    -- hers too; five refusals in a row end it.
    FOR i IN 1..60 LOOP
        t := pg_catalog.gen_random_uuid();
        BEGIN
            SELECT c.worker_id, c.lease_epoch INTO w, e
              FROM snowflake.snowflake_registry_claim(t, 'x', 1, 'x', '/x' || i, -1, 3, 12, 1704067200000, 600000,
                   (extract(epoch FROM clock_timestamp()) * 1000)::bigint) c;
            IF w IS NULL THEN RAISE NOTICE 'no id after % rounds', n; EXIT; END IF;
            PERFORM snowflake.snowflake_registry_release(w, t, e);
            n := n + 1; refused := 0;
        EXCEPTION WHEN OTHERS THEN
            RAISE NOTICE 'refused: % (%)', SQLERRM, SQLSTATE;
            refused := refused + 1;
        END;
        EXIT WHEN refused >= 5;
        PERFORM pg_catalog.pg_sleep(0.05);
    END LOOP;
    RAISE NOTICE 'mallory done after % claims', n;
END $$;
SELECT pg_sleep(120);
SQL
}
mallory_busy() {
    [ "$(rs postgres registry -c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'mallory'
                                   AND (wait_event = 'PgSleep' OR wait_event_type = 'Lock')")" = "$1" ]
}
# end_mallory: terminate her sessions, and wait until they are gone (and
# their locks with them).
end_mallory() {
    rs postgres registry -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'mallory'" >/dev/null
    poll_until 10 mallory_busy 0 && poll_until 10 no_mallory || die "mallory's sessions outlived their termination by 10 s"
}
no_mallory() { [ "$(rs postgres registry -c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'mallory'")" = 0 ]; }
# Rows no claim may take now: not held by a live lease, yet locked.
locked_rows() {
    rs postgres registry -c "SELECT count(*) FROM snowflake.snowflake_registry_holders h
                              JOIN snowflake_id_internal.snowflake_registry r USING (worker_id)
                             WHERE h.state IN ('free', 'expired') AND r.ctid NOT IN
                                   (SELECT ctid FROM snowflake_id_internal.snowflake_registry FOR UPDATE SKIP LOCKED)"
}

# --- 1. three open transactions, limit one --------------------------------
for i in 1 2 3; do loop_open "$i"; done
poll_until 30 mallory_busy 3 || die "mallory's three sessions did not settle within 30 s"
n=$(locked_rows)
log "attack (registry pool lock): mallory's three open transactions lock $n of 8 ids"
minter_up 1 "snowflake_id.worker_bits = 3"
if ! poll_until 15 has_lease 1; then
    die "attack (registry pool lock) WORKS: with $n ids locked by mallory's open transactions, server 1 got no id within 15 s ($(last_error 1))"
fi
[ "$n" -le 1 ] || die "attack (registry pool lock) WORKS: mallory locks $n ids, beyond her limit of 1"
mints 1 || die "server 1 holds worker id $(lease_of 1) but does not mint"
log "attack (registry pool lock) refused: mallory locks $n id, server 1 holds worker id $(lease_of 1)"

# --- 2. claims left to run out in one transaction, then prepared ---------
end_mallory
rs mallory registry >/dev/null 2>&1 <<'SQL' || true
BEGIN;
DO $$
DECLARE w integer; t uuid;
BEGIN
    FOR i IN 1..8 LOOP
        t := pg_catalog.gen_random_uuid();
        BEGIN
            SELECT c.worker_id INTO w
              FROM snowflake.snowflake_registry_claim(t, 'y', 1, 'y', '/y' || i, -1, 3, 12, 1704067200000, 1000,
                   (extract(epoch FROM clock_timestamp()) * 1000)::bigint) c;
        EXCEPTION WHEN OTHERS THEN NULL;
        END;
        PERFORM pg_catalog.pg_sleep(1.05);
    END LOOP;
END $$;
PREPARE TRANSACTION 'mallory_pool';
SQL
[ "$(rs postgres registry -c "SELECT count(*) FROM pg_prepared_xacts WHERE owner = 'mallory'")" = 1 ] \
    || die "mallory's transaction was not prepared"
n=$(locked_rows)
claim_m2=$(rs lease_m2 registry -c "SELECT worker_id FROM snowflake.snowflake_registry_claim(
               '22222222-2222-4222-8222-222222222222', 'm2', 2, 'm2', '/m2', -1, 3, 12, 1704067200000, 60000,
               (extract(epoch FROM clock_timestamp()) * 1000)::bigint)" 2>&1 || true)
[ "$n" -le 1 ] || die "attack (registry pool lock, runs out) WORKS: mallory's prepared transaction locks $n ids, beyond her limit of 1"
[[ "$claim_m2" =~ ^[0-9]+$ ]] || die "attack (registry pool lock, runs out) WORKS: lease_m2's claim said '$claim_m2'"
log "attack (registry pool lock, leases left to run out, prepared) refused: $n id locked, lease_m2 got $claim_m2"
rs postgres registry -c "ROLLBACK PREPARED 'mallory_pool'" \
    -c "SELECT snowflake.snowflake_registry_release($claim_m2, '22222222-2222-4222-8222-222222222222', lease_epoch)
          FROM snowflake_id_internal.snowflake_registry WHERE worker_id = $claim_m2" >/dev/null

# --- 3. renewals held open in three sessions, each lease left to run out --
read -r W EP < <(rs mallory registry -F ' ' -c "SELECT worker_id, lease_epoch FROM snowflake.snowflake_registry_claim(
    '44444444-4444-4444-8444-444444444444', 'z', 1, 'z', '/z', -1, 3, 12, 1704067200000, 1000,
    (extract(epoch FROM clock_timestamp()) * 1000)::bigint)")
[[ "$W" =~ ^[0-9]+$ ]] || die "mallory's claim for part 3 failed: '$W'"
renew_open() {
    rs mallory registry >/dev/null 2>&1 <<SQL & holders+=($!)
BEGIN;
SELECT * FROM snowflake.snowflake_registry_renew($W, '44444444-4444-4444-8444-444444444444', $EP, 1000,
    (extract(epoch FROM clock_timestamp()) * 1000)::bigint);
SELECT pg_sleep(1.1);
DO \$\$ BEGIN
    PERFORM snowflake.snowflake_registry_claim(pg_catalog.gen_random_uuid(), 'z', 1, 'z', '/z$1', -1, 3, 12,
        1704067200000, 1000, (extract(epoch FROM clock_timestamp()) * 1000)::bigint);
EXCEPTION WHEN OTHERS THEN NULL;
END \$\$;
SELECT pg_sleep(120);
SQL
}
for i in 1 2 3; do renew_open "$i"; done
# Settled: one session past its claim, asleep for good, her lease run out
# in it; the two others waiting.
renewers_settled() {
    [ "$(rs postgres registry -c "SELECT count(*) FILTER (WHERE query LIKE '%pg_sleep(120)%' AND wait_event = 'PgSleep')
                                          || ' ' || count(*) FILTER (WHERE wait_event_type = 'Lock')
                                     FROM pg_stat_activity WHERE usename = 'mallory'")" = "1 2" ]
}
poll_until 30 renewers_settled || die "mallory's three renewing sessions did not settle within 30 s"
n=$(locked_rows)
[ "$n" -le 1 ] || die "attack (registry pool lock, renewals held open) WORKS: mallory locks $n ids, beyond her limit of 1"
log "attack (registry pool lock, renewals held open) refused: $n id locked"
end_mallory

# --- 5. dead leases harvested, then released and renewed in one prepared transaction
harvest=()
for i in 1 2 3 4 5 6 7; do
    t=$(printf '55555555-5555-4555-8555-%012d' "$i")
    read -r w e < <(rs mallory registry -F ' ' -c "SELECT worker_id, lease_epoch FROM snowflake.snowflake_registry_claim(
        '$t', 'h', 1, 'h', '/h$i', -1, 3, 12, 1704067200000, 60000, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)" 2>&1) || true
    [[ "$w" =~ ^[0-9]+$ ]] || die "mallory's harvesting claim $i failed: $w $e"
    rs mallory registry -c "SELECT snowflake.snowflake_registry_release($w, '$t', $e)" >/dev/null
    harvest+=("($w, '$t'::uuid, $e)")
done
[ ${#harvest[@]} -ge 2 ] || die "mallory harvested ${#harvest[@]} dead leases, expected several"
vals=$(IFS=,; echo "${harvest[*]}")
rs mallory registry >/dev/null <<SQL
BEGIN;
SELECT snowflake.snowflake_registry_release(v.w, v.t, v.e) FROM (VALUES $vals) v(w, t, e);
SELECT r.* FROM (VALUES $vals) v(w, t, e),
       LATERAL snowflake.snowflake_registry_renew(v.w, v.t, v.e, 1000, 0) r;
PREPARE TRANSACTION 'mallory_harvest';
SQL
n=$(locked_rows)
[ "$n" -le 1 ] || die "attack (registry pool lock, dead leases released) WORKS: her prepared transaction locks $n ids, beyond her limit of 1"
log "attack (registry pool lock, ${#harvest[@]} dead leases released and renewed in a prepared transaction) refused: $n id locked"
rs postgres registry -c "ROLLBACK PREPARED 'mallory_harvest'" >/dev/null

# --- 6. an older snapshot: REPEATABLE READ is refused ---------------------
out=$(rs mallory registry -c "BEGIN ISOLATION LEVEL REPEATABLE READ" -c "SELECT worker_id FROM snowflake.snowflake_registry_claim(
          '66666666-6666-4666-8666-666666666666', 'r', 1, 'r', '/r', -1, 3, 12, 1704067200000, 60000,
          (extract(epoch FROM clock_timestamp()) * 1000)::bigint)" 2>&1 || true)
[[ "$out" == *"READ COMMITTED transactions only"* ]] \
    || die "attack (registry pool lock, old snapshot) WORKS: a claim in REPEATABLE READ said '$out'"
log "attack (registry pool lock, old snapshot) refused: $(grep -m1 ERROR <<<"$out")"

# --- 4. her limit raised: every free id locked, and the error says so -----
rs postgres registry -c "SELECT snowflake.snowflake_registry_role_limit('mallory', 8)" >/dev/null
loop_open 4
loop_done() { grep -q "mallory done" "$BASE/loop.4.log"; }
poll_until 30 loop_done || die "mallory's loop did not end within 30 s: $(tail -3 "$BASE/loop.4.log")"
minter_up 2 "snowflake_id.worker_bits = 3"
says_locked() { [[ "$(last_error 2)" == *"other transactions hold their rows"* ]]; }
poll_until 15 says_locked || die "server 2, with every free id locked ($(locked_rows) locked), said: '$(last_error 2)' and holds '$(lease_of 2)' (expected that other transactions hold their rows); mallory's loop: $(tail -3 "$BASE/loop.4.log")"
no_lease 2 || die "server 2 holds an id mallory's transaction had locked"
log "server 2 with every free id locked says: $(last_error 2)"
