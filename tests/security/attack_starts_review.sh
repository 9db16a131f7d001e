#!/usr/bin/env bash
# The red-team review of issue 55's start paths: four attacks, each of
# which worked against the change as first written (0f8cbf1), each now a
# part of this script.
#  1. One database's mark far ahead hid every other database's mark: the
#     start-up read applied only the largest, held it back, and b minted
#     below its own IDs after a start without the state file.
#  2. A held mark was forgotten by a clean restart (no read) and by a
#     crash the WAL covered, and did not follow a database copied from
#     the held one (CREATE DATABASE ... TEMPLATE by its owner, a role with
#     CREATEDB): each minted below the mark with no superuser's decision.
#  3. In a database the start-up read could not reach, a first call
#     cancelled while it read its own mark (a statement timeout behind a
#     lock) left the session minting below that mark for good.
#  4. Eve, with CREATEDB, set default_transaction_isolation =
#     serializable, default_transaction_read_only and
#     default_transaction_deferrable on her databases; with a serializable
#     read-write transaction open (here a prepared one, so that it
#     outlives the restart), every reader there waited 2 s for a safe
#     snapshot and her databases lagged; with many of them the read took
#     minutes.
#  5. (The second review, of the fixes.) Mallory, with CREATEDB, copied
#     her held database 65 times and minted once in each: the 64 shared
#     slots of held marks filled, and every database of the server
#     stopped, for good, even once the copies were dropped and her mark
#     discarded (be97357).
# Passes when none of them works any more. ATTACK_PARTS="2 4" runs some
# of the parts only (each on its own shows which fail against 0f8cbf1,
# part 5 against be97357).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
attack_cluster starts "${SNOWFLAKE_ATTACK_PORT:-16260}" 31 "max_prepared_transactions = 5"
fake_clock "$DIR/../faketime"
restart() {  # restart [immediate|kill9|nofile]: stop, then start on the fake clock
    case ${1:-} in
        immediate) as_pg "$(pgbin)/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null ;;
        kill9) kill9 "$DIR" ;;
        *) cluster_stop "$DIR" ;;
    esac
    [ "${1:-}" = nofile ] && rm -f "$DIR/data/snowflake_id.state"
    fake_start "$DIR"
}
ext() { as postgres "$1" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" >/dev/null; }
want() { [[ " ${ATTACK_PARTS:-1 2 3 4 5} " == *" $1 "* ]]; }
setclock "+5m"; restart
as postgres postgres -c "CREATE ROLE mallory LOGIN CREATEDB" -c "CREATE ROLE eve LOGIN CREATEDB" \
    -c "CREATE ROLE alice LOGIN" -c "CREATE DATABASE a OWNER mallory" -c "CREATE DATABASE b" \
    -c "CREATE DATABASE x OWNER alice" >/dev/null
for db in a b x; do ext "$db"; done
as postgres b -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), v int)" \
    -c "INSERT INTO t (v) SELECT g FROM generate_series(1, 1000) g" >/dev/null
as alice x -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), v int)" \
    -c "INSERT INTO t (v) SELECT g FROM generate_series(1, 100) g" >/dev/null
# A superuser's restore writes a mark 30 days ahead into a.
as postgres a -c "INSERT INTO snowflake_id_internal.snowflake_high_water (worker_id, epoch_ms, worker_bits, sequence_bits, mark_ms)
    SELECT worker_id, epoch_ms, worker_bits, sequence_bits, mark_ms + 30 * 86400000::bigint
      FROM snowflake_id_internal.snowflake_high_water" >/dev/null 2>&1

# --- 1 ------------------------------------------------------------------------
if want 1; then
setclock "+0"; restart nofile
old=$(as postgres b -c "SELECT max(id) FROM t")
id=$(mint_when_ready "$DIR" "$PORT" b) || die "1: b does not mint"
[ "$id" -gt "$old" ] || die "attack (far mark hides the others) WORKS: b's first ID $id is below its own $old"
log "attack (far mark hides the others): b mints above its own IDs ($id > $old) while a is held"
out=$(as postgres a -c "SELECT snowflake_nextval()" 2>&1) && die "1: a minted below its far mark: $out"
fi

# --- 2 ------------------------------------------------------------------------
if want 2; then
setclock "+0"
for how in clean kill9; do
    restart "$([ "$how" = kill9 ] && echo kill9)"
    out=$(mint_when_ready "$DIR" "$PORT" a 2>&1) \
        && die "attack (a held mark forgotten) WORKS: after a $how restart a minted below its mark: $out"
    [[ "$out" == *"far ahead of the clock"* ]] || die "2: a refused for another reason after a $how restart: $out"
done
as mallory postgres -c "CREATE DATABASE acopy TEMPLATE a" >/dev/null
out=$(as mallory acopy -c "SELECT snowflake_nextval()" 2>&1) \
    && die "attack (a held mark forgotten) WORKS: a copy of the held database mints below its mark: $out"
[[ "$out" == *"far ahead of the clock"* ]] || die "2: the copy was refused for another reason: $out"
log "attack (a held mark forgotten): a stays held after a clean and a kill -9 restart, and so does mallory's copy"
for db in a acopy; do as postgres "$db" -c "SELECT snowflake_discard_high_water()" >/dev/null; done
as postgres postgres -c "DROP DATABASE acopy" >/dev/null
fi

# --- 3 ------------------------------------------------------------------------
# No worker slot for a reader: every database reads its own mark.
if want 3; then
setclock "+5m"
as alice x -c "INSERT INTO t (v) SELECT g FROM generate_series(1, 100) g" >/dev/null
old=$(as alice x -c "SELECT max(id) FROM t")
as postgres postgres -c "ALTER SYSTEM SET max_worker_processes = 2" -c "ALTER SYSTEM SET max_logical_replication_workers = 0" >/dev/null
setclock "+0"; restart nofile
lagging() { grep -q "could not read the high-water mark of database \"x\"" "$DIR/server.log"; }
poll_until 60 lagging || die "3: x did not lag"
# A superuser's lock on x's mark table, held for 3 s, and alice's first
# call cancelled while it waits for it.
as postgres x -c "BEGIN" -c "LOCK TABLE snowflake_id_internal.snowflake_high_water IN ACCESS EXCLUSIVE MODE" \
    -c "SELECT pg_sleep(3)" -c "COMMIT" >/dev/null & holders+=($!)
sleep 0.5
id=$("$(pgbin)/psql" -X -q -h "$DIR" -p "$PORT" -U alice -d x -At \
    -c "SET statement_timeout = '300ms'" -c "SELECT snowflake_nextval()" \
    -c "RESET statement_timeout" -c "SELECT pg_sleep(3.5)" -c "SELECT snowflake_nextval()" 2>/dev/null | grep -E '^[0-9]+$' | tail -1 || true)
wait "${holders[@]}" 2>/dev/null || true; holders=()
[ -n "$id" ] || die "3: alice's second call gave no ID"
[ "$id" -gt "$old" ] || die "attack (cancelled own read) WORKS: after a cancelled first call, alice's ID $id is below x's $old"
log "attack (cancelled own read): after a cancelled first call alice's next ID is above x's IDs ($id > $old)"
as postgres postgres -c "ALTER SYSTEM RESET max_worker_processes" -c "ALTER SYSTEM RESET max_logical_replication_workers" >/dev/null
fi

# --- 4 ------------------------------------------------------------------------
if want 4; then
for i in 1 2 3 4 5 6; do
    as eve postgres -c "CREATE DATABASE eve$i" >/dev/null
    as eve postgres -c "ALTER DATABASE eve$i SET default_transaction_isolation = 'serializable'" \
        -c "ALTER DATABASE eve$i SET default_transaction_read_only = on" \
        -c "ALTER DATABASE eve$i SET default_transaction_deferrable = on" >/dev/null
done
as eve eve1 -c "SET default_transaction_read_only = off" -c "CREATE TABLE s (v int)" >/dev/null
as eve eve1 -c "BEGIN ISOLATION LEVEL SERIALIZABLE READ WRITE" -c "INSERT INTO s VALUES (1)" \
    -c "PREPARE TRANSACTION 'eve'" >/dev/null
log_from=$(stat -c %s "$DIR/server.log")
restart nofile
mint_when_ready "$DIR" "$PORT" b >/dev/null || die "4: b does not mint"
since=$(tail -c +"$((log_from + 1))" "$DIR/server.log")
if grep -q "could not read the high-water mark of database \"eve" <<< "$since"; then
    die "attack (serializable readers) WORKS: $(grep -c "could not read the high-water mark of database \"eve" <<< "$since") of eve's databases made their readers wait: $(grep -o 'read the high-water marks of.*' <<< "$since" | tail -1)"
fi
log "attack (serializable readers): eve's settings and her prepared serializable transaction cost the read nothing: $(grep -o 'read the high-water marks of.*' <<< "$since" | tail -1)"
as postgres eve1 -c "ROLLBACK PREPARED 'eve'" >/dev/null
fi
# --- 5 ------------------------------------------------------------------------
if want 5; then
setclock "+0"
as postgres a -c "INSERT INTO snowflake_id_internal.snowflake_high_water (worker_id, epoch_ms, worker_bits, sequence_bits, mark_ms)
    SELECT worker_id, epoch_ms, worker_bits, sequence_bits, mark_ms + 30 * 86400000::bigint
      FROM snowflake_id_internal.snowflake_high_water WHERE mark_ms < 4102444800000" >/dev/null 2>&1
out=$(as mallory a -c "SELECT snowflake_nextval()" 2>&1) && die "5: a minted below its far mark: $out"
for i in $(seq 1 65); do
    as mallory postgres -c "CREATE DATABASE copy$i TEMPLATE a STRATEGY file_copy" >/dev/null
    as mallory "copy$i" -c "SELECT snowflake_nextval()" >/dev/null 2>&1 || true
done
out=$(as postgres b -c "SELECT snowflake_nextval()" 2>&1) \
    || die "attack (copies of a held database) WORKS: with 65 copies of a held database, b cannot mint: $out"
out=$(as mallory copy65 -c "SELECT snowflake_nextval()" 2>&1) \
    && die "attack (copies of a held database) WORKS: the 65th copy mints below its mark: $out"
log "attack (copies of a held database): 65 copies, each held, and b mints on"
# A held database cannot be dropped until a superuser decides (issue 62):
# the copies' marks are discarded first.
for i in $(seq 1 65); do
    as postgres "copy$i" -c "SELECT snowflake_discard_high_water()" >/dev/null
    as mallory postgres -c "DROP DATABASE copy$i" >/dev/null
done
as postgres a -c "SELECT snowflake_discard_high_water()" >/dev/null
as postgres b -c "SELECT snowflake_nextval()" >/dev/null || die "5: b does not mint after the copies were dropped"
fi
log "attack (starts review): none of the five works"
