#!/usr/bin/env bash
# Red-team attack on the high-water mark (it got through 850adf9, where
# the table was in the extension's schema, readable by PUBLIC, and any
# failing writer stopped the whole server): a role with no privilege at all
# (eve: LOGIN, and CONNECT, which PUBLIC has on every database) stops
# snowflake_nextval() server-wide, in databases she cannot even read.
#
# The high-water writer needs ROW EXCLUSIVE on snowflake_high_water in
# every database with the extension, and any database whose writer fails
# stops minting everywhere (55000) after WAIT_MS. PUBLIC has USAGE on the
# extension's schema and SELECT on the table, so eve can
#   1. hold ACCESS SHARE on it in an open transaction (a plain SELECT), and
#   2. queue an ACCESS EXCLUSIVE request behind it with CREATE RULE: the
#      parser locks the rule's table (transformRuleStmt) BEFORE the
#      ownership check, so the request waits in the lock queue for as
#      long as (1) is open.
# The writer's ROW EXCLUSIVE request queues behind (2), hits its
# lock_timeout (5 s), and every round fails for as long as eve wants.
# (A database owner has a second queued lock: VACUUM FULL of the table,
# which PG 16 allows the database owner.)
# Part 2: the same queue on the catalog pg_extension (CREATE RULE locks
# it before "is a system catalog"), in a database WITHOUT the extension:
# the launcher starts a writer in every database, and its catalog query
# waits there too. So hiding the table (no USAGE on its schema) is not
# enough: one database's lock must not stop minting on the whole server.
#
# Part 3 (the red-team review of issue 46's per-database marks): the same
# queue on pg_depend, in a database that has the extension and where eve
# may connect. A backend's first ID there looks its database's table up
# in the catalog; it must not wait behind her queue for longer than the
# table lock's own second (then 55P03 there), never until a statement
# timeout. (Before the fix it waited for as long as eve's transaction.)
#
# Passes (exit 0) when bob can still mint in his own database while eve
# holds her two sessions, and the database she queues in answers within
# seconds; fails (exit 1) while the attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
attack_cluster lockq "${SNOWFLAKE_ATTACK_PORT:-16210}" 21
as postgres postgres -c "CREATE ROLE eve LOGIN" -c "CREATE ROLE bob LOGIN" \
    -c "CREATE DATABASE bobdb OWNER bob" -c "SET client_min_messages = warning" \
    -c "CREATE EXTENSION snowflake_id" >/dev/null
as postgres bobdb -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
    -c "REVOKE CONNECT ON DATABASE bobdb FROM PUBLIC" >/dev/null
as bob bobdb -c "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text)" >/dev/null
as bob bobdb -c "INSERT INTO orders (item) VALUES ('warm-up')" >/dev/null

as postgres postgres -c "CREATE DATABASE plain" >/dev/null   # no extension there

# attack_with DB TABLE: eve, in DB, (1) an open transaction that read
# TABLE, (2) a CREATE RULE on TABLE that waits behind it; then bob
# inserts in his own database for 25 s (the mark runs 5 s ahead, a caller
# waits 10 s for a round). Prints the number of bob's failed INSERTs.
attack_with() {
    local db="$1" tbl="$2" n errs=0 last=""
    as eve "$db" -c "BEGIN" -c "SELECT count(*) FROM $tbl" -c "SELECT pg_sleep(40)" >/dev/null 2>&1 &
    holders+=($!)
    sleep 1
    as eve "$db" -c "CREATE RULE r AS ON UPDATE TO $tbl DO INSTEAD NOTHING" >/dev/null 2>&1 & holders+=($!)
    for _ in $(seq 1 50); do
        n=$(as postgres postgres -c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'eve' AND wait_event_type = 'Lock'")
        [ "$n" = 1 ] && break; sleep 0.1
    done
    [ "$n" = 1 ] || die "eve's CREATE RULE on $tbl is not waiting for its lock"
    log "attack (lock queue): in $db, eve's CREATE RULE waits for ACCESS EXCLUSIVE on $tbl"
    local end=$((SECONDS + 25))
    while [ $SECONDS -lt $end ]; do
        if ! last=$(as bob bobdb -c "SET statement_timeout = '15s'" \
                      -c "INSERT INTO orders (item) VALUES ('book') RETURNING id" 2>&1); then
            errs=$((errs + 1)); log "attack (lock queue): bob's INSERT failed: $(echo "$last" | head -1)"
        fi
        sleep 0.5
    done
    for p in "${holders[@]}"; do kill "$p" 2>/dev/null || true; done
    holders=()
    sleep 2
    echo "$errs"
}
# end_eve: stop eve's sessions, on the server too (a backend waiting for
# a lock does not notice that its client went away), and wait until
# none is left.
end_eve() {
    local p
    for p in "${holders[@]}"; do kill "$p" 2>/dev/null || true; done
    holders=()
    as postgres postgres -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = 'eve'" >/dev/null
    gone() { [ "$(as postgres postgres -c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'eve'")" = 0 ]; }
    poll_until 30 gone || die "eve's sessions did not end"
}
# The table itself: eve cannot name it (its schema is the database
# owner's and the superuser's only), so she cannot queue a lock on it.
out=$(as eve postgres -c "CREATE RULE r AS ON UPDATE TO snowflake_id_internal.snowflake_high_water DO INSTEAD NOTHING" 2>&1) \
    && die "eve created a rule on the high-water table"
[[ "$out" == *"permission denied for schema snowflake_id_internal"* ]] \
    || die "eve's CREATE RULE on the high-water table was not refused before it locked: $out"
log "attack (lock queue): eve cannot name the high-water table"
e1=0
# A catalog the writer reads, in a database where eve may connect: her
# lock queue holds up that database's writer, never bob's minting.
e2=$(attack_with plain pg_catalog.pg_extension)
grep -E "lock timeout|could not write the high-water" "$DIR/server.log" | tail -3 >&2 || true
[ "$e1" = 0 ] && [ "$e2" = 0 ] \
    || die "attack (lock queue) WORKS: eve (no privileges) stopped bob's INSERTs in his own database ($e1 failures with snowflake_high_water, $e2 with pg_extension in a database without the extension)"
log "attack (lock queue) refused: bob minted throughout"

# Part 3: eve's queue on pg_depend in a database with the extension.
as eve postgres -c "BEGIN" -c "SELECT count(*) FROM pg_catalog.pg_depend" -c "SELECT pg_sleep(40)" >/dev/null 2>&1 &
holders+=($!)
sleep 1
as eve postgres -c "CREATE RULE r AS ON UPDATE TO pg_catalog.pg_depend DO INSTEAD NOTHING" >/dev/null 2>&1 & holders+=($!)
sleep 1
t0=$(date +%s%N)
out=$(as postgres postgres -c "SET statement_timeout = '15s'" -c "SELECT snowflake_nextval()" 2>&1 || true)
took=$(( ($(date +%s%N) - t0) / 1000000 ))
end_eve
[ "$took" -lt 10000 ] \
    || die "attack (lock queue, pg_depend) WORKS: a first ID in the database where eve queued waited $took ms: $(head -1 <<< "$out")"
log "attack (lock queue, pg_depend) refused: the first ID there answered in $took ms: $(head -1 <<< "$out")"

# Part 4 (the second red-team review): the table's cache entry is
# invalidated (an ANALYZE), and eve queues on pg_trigger, which
# rebuilding that entry reads. A session that minted before asks again
# once its mark's margin is used up (6 s later): it must answer within
# seconds, never at the statement timeout.
as postgres postgres -c "SELECT snowflake_nextval()" >/dev/null
# (No ON_ERROR_STOP: a refusal, 55P03, is an answer too.)
( "$(pgbin)/psql" -X -q -h "$DIR" -p "$PORT" -U postgres -d postgres -At -c "SET statement_timeout = '20s'" \
      -c "SELECT snowflake_nextval()" -c "SELECT pg_sleep(6)" -c "SELECT clock_timestamp()" \
      -c "SELECT snowflake_nextval()" -c "SELECT clock_timestamp()" > "$DIR/part4.out" 2>&1 || true ) &
victim=$!
sleep 1
as postgres postgres -c "ANALYZE snowflake_id_internal.snowflake_high_water" >/dev/null
as eve postgres -c "BEGIN" -c "SELECT count(*) FROM pg_catalog.pg_trigger" -c "SELECT pg_sleep(40)" >/dev/null 2>&1 &
holders+=($!)
sleep 0.5
as eve postgres -c "CREATE RULE r AS ON SELECT TO pg_catalog.pg_trigger DO INSTEAD NOTHING" >/dev/null 2>&1 & holders+=($!)
wait $victim
end_eve
mapfile -t stamps < <(grep -E '^[0-9]{4}-' "$DIR/part4.out")
[ "${#stamps[@]}" = 2 ] || die "attack (lock queue, pg_trigger): the victim's session did not get to its second ID: $(cat "$DIR/part4.out")"
waited=$(as postgres postgres -c "SELECT round(extract(epoch FROM '${stamps[1]}'::timestamptz - '${stamps[0]}'::timestamptz) * 1000)")
[ "$waited" -lt 10000 ] \
    || die "attack (lock queue, pg_trigger) WORKS: after an ANALYZE, an ID waited $waited ms behind eve's queue on pg_trigger"
log "attack (lock queue, pg_trigger) refused: the ID after an ANALYZE answered in $waited ms: $(grep -E 'ERROR|^[0-9]{15,}$' "$DIR/part4.out" | tail -1)"
