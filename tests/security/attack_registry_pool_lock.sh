#!/usr/bin/env bash
# Red-team attack on the worker-id registry (issue 56, item 2): one
# member locks the whole pool. Inside one open transaction, mallory (a
# member of snowflake_lease, limit one live lease) claims an id with a
# fresh token and releases it, again and again. A released row no longer
# counted against her limit, but her transaction kept it row-locked, and
# every claim skips locked rows: new, moved or cloned servers got no id,
# and their error said, wrongly, that every worker id was held.
#
# The registry here hands out 8 worker ids (worker_bits 3).
#  1. Mallory runs the loop in three sessions at once (her connection
#     limit), each transaction kept open. Promise: she locks at most her
#     limit's worth of rows, and server 1 (lease_m1) gets an id.
#  2. A superuser raises her limit to 8: the rows she may lock are hers
#     to hold. Promise: server 2 (lease_m2), finding every free id
#     locked, reports that other transactions hold their rows, not that
#     every id is held.
# Passes (exit 0) when both promises hold; fails (exit 1) while the
# attack works (fcdfa36 failed part 1: mallory locked all 8 ids and
# server 1 got none).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/registry_lib.sh"
registry_scaffold poollock "${SNOWFLAKE_ATTACK_PORT:-56250}"   # the registry; minting server N on the port + N
# ------------------------------------------------------------------------
REG_INIT="worker_bits => 3" registry_up_documented
rs postgres registry -c "CREATE ROLE lease_m2 LOGIN CONNECTION LIMIT 3 IN ROLE snowflake_lease" >/dev/null

# loop_open: mallory claims and releases ids, fresh tokens, in one
# transaction she keeps open, as a new holder each time (a refusal ends
# only its own attempt).
loop_open() {
    rs mallory registry >/dev/null 2>&1 <<'SQL' & holders+=($!)
BEGIN;
DO $$
DECLARE w integer; e bigint; t uuid; n integer := 0;
BEGIN
    FOR i IN 1..20 LOOP
        t := pg_catalog.gen_random_uuid();
        BEGIN
            SELECT c.worker_id, c.lease_epoch INTO w, e
              FROM snowflake.snowflake_registry_claim(t, 'x', 1, 'x', '/x' || i, -1, 3, 12, 1704067200000, 600000,
                   (extract(epoch FROM clock_timestamp()) * 1000)::bigint) c;
            EXIT WHEN w IS NULL;
            PERFORM snowflake.snowflake_registry_release(w, t, e);
            n := n + 1;
        EXCEPTION WHEN OTHERS THEN NULL;
        END;
    END LOOP;
END $$;
SELECT pg_sleep(120);
SQL
}
mallory_busy() {
    [ "$(rs postgres registry -c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'mallory'
                                   AND (wait_event = 'PgSleep' OR wait_event_type = 'Lock')")" = "$1" ]
}
# Rows no claim may take now: not held by a live lease, yet locked.
locked_rows() {
    rs postgres registry -c "SELECT count(*) FROM snowflake.snowflake_registry_holders h
                              JOIN snowflake_id_internal.snowflake_registry r USING (worker_id)
                             WHERE h.state IN ('free', 'expired') AND r.ctid NOT IN
                                   (SELECT ctid FROM snowflake_id_internal.snowflake_registry FOR UPDATE SKIP LOCKED)"
}

# --- 1. three open transactions, limit one --------------------------------
for _ in 1 2 3; do loop_open; done
poll_until 20 mallory_busy 3 || die "mallory's three sessions did not settle within 20 s"
n=$(locked_rows)
log "attack (registry pool lock): mallory's three open transactions lock $n of 8 ids"
minter_up 1 "snowflake_id.worker_bits = 3"
if ! poll_until 15 has_lease 1; then
    die "attack (registry pool lock) WORKS: with $n ids locked by mallory's open transactions, server 1 got no id within 15 s ($(last_error 1))"
fi
[ "$n" -le 1 ] || die "attack (registry pool lock) WORKS: mallory locks $n ids, beyond her limit of 1"
mints 1 || die "server 1 holds worker id $(lease_of 1) but does not mint"
log "attack (registry pool lock) refused: mallory locks $n id, server 1 holds worker id $(lease_of 1)"
rs postgres registry -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'mallory'" >/dev/null

# --- 2. her limit raised: every free id locked, and the error says so -----
rs postgres registry -c "SELECT snowflake.snowflake_registry_role_limit('mallory', 8)" >/dev/null
loop_open
poll_until 20 mallory_busy 1 || die "mallory's session did not settle within 20 s"
minter_up 2 "snowflake_id.worker_bits = 3"
says_locked() { [[ "$(last_error 2)" == *"other transactions hold their rows"* ]]; }
poll_until 15 says_locked || die "server 2, with every free id locked ($(locked_rows) locked), said: '$(last_error 2)' and holds '$(lease_of 2)' (expected that other transactions hold their rows)"
no_lease 2 || die "server 2 holds an id mallory's transaction had locked"
log "server 2 with every free id locked says: $(last_error 2)"
