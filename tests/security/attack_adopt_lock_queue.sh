#!/usr/bin/env bash
# Red-team attack on adopted sequences (issue 63, part 5): a plain role
# stalls every other role's statements through a lock she queues.
#
# Each backend read the list of adopted sequences itself (once, and again
# after every change), checking that the list is the extension's in
# pg_extension and pg_depend. mallory (LOGIN; CONNECT and CREATE on public,
# as every role has on a default database) can
#   1. change the list: her CREATE TABLE with a bigserial is adopted (the
#      switch is on), so every backend must read it again;
#   2. hold ACCESS SHARE on pg_depend in an open transaction, and
#   3. queue ACCESS EXCLUSIVE on it behind (2) with CREATE RULE, which
#      locks the rule's table before it checks anything.
# Then, on 97fb84c: every statement of a new backend waited 1 s for the
# lock and failed (55P03), an INSERT into a plain serial table too, also
# in a database with nothing adopted; and an existing backend's nextval()
# of an adopted sequence fell through to the sequence itself.
# Round 2: a superuser's migration holds the list in an open transaction
# while its VACUUM FULL of it waits: new sessions failed the same way.
#
# Now the server's adopted sequences live in shared memory, loaded once
# per database and kept current by the transactions that change them, and
# the extension's objects are found through the syscache alone. Passes
# when, while each queue stands, alice's statements in new and existing
# backends all succeed, every key of the adopted table is a Snowflake ID
# of this server, and her new sessions do not take a second each (the
# median of their times is reported and must stay under 500 ms; they take
# tens of milliseconds). Fails (exit 1) while the attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
attack_cluster adoptq "${SNOWFLAKE_ATTACK_PORT:-16250}" 22
as postgres postgres -c "CREATE ROLE alice LOGIN" -c "CREATE ROLE mallory LOGIN" \
    -c "CREATE DATABASE app" -c "CREATE DATABASE bare" >/dev/null
for db in app bare; do
    as postgres "$db" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
        -c "GRANT CREATE ON SCHEMA public TO alice, mallory" >/dev/null
done
as postgres app -c "SELECT snowflake_adopt_sequences()" >/dev/null
as alice app -c "SET client_min_messages = warning" -c "CREATE TABLE t (id bigserial PRIMARY KEY, v int)" \
    -c "CREATE TABLE plain (id serial PRIMARY KEY, v int)" -c "INSERT INTO t (v) VALUES (0)" >/dev/null
as alice bare -c "CREATE TABLE plain (id serial PRIMARY KEY, v int)" -c "INSERT INTO plain (v) VALUES (0)" >/dev/null

fails=0
base=$(dirname "$DIR")
# new_sessions DB LABEL STATEMENTS...: 8 new sessions of alice, each running
# the statements; counts failures and records each session's time.
times=()
new_sessions() {
    local db="$1" label="$2"; shift 2
    local args=() s t0 out i
    for s in "$@"; do args+=(-c "$s"); done
    for i in $(seq 8); do
        t0=$(date +%s%N)
        if ! out=$(as alice "$db" "${args[@]}" 2>&1); then
            fails=$((fails + 1)); log "attack ($label): alice's new session $i in $db failed: $(echo "$out" | grep -m1 ERROR)"
        fi
        times+=($(( ($(date +%s%N) - t0) / 1000000 )))
        echo "$out" >> "$base/ids"
    done
}
queued() {  # queued REL: an ACCESS EXCLUSIVE request on REL waits
    [ "$(as postgres app -c "SELECT count(*) FROM pg_locks WHERE relation = '$1'::regclass
                              AND mode = 'AccessExclusiveLock' AND NOT granted")" -ge 1 ]
}
: > "$base/ids"

# An existing session of alice: it read the list before the attack.
as alice app -c "INSERT INTO t (v) VALUES (1)" -c "SELECT pg_sleep(6)" \
    -c "INSERT INTO t (v) VALUES (1) RETURNING id" -c "SELECT nextval('t_id_seq')" \
    -c "INSERT INTO t (v) VALUES (1) RETURNING id" > "$base/existing" 2>&1 &
existing=$!
sleep 1

# Round 1: mallory changes the list, then queues on pg_depend.
as mallory app -c "SET client_min_messages = warning" -c "CREATE TABLE m (id bigserial)" >/dev/null
as mallory app -c "BEGIN" -c "SELECT count(*) FROM pg_depend" -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
holders+=($!)
sleep 1
as mallory app -c "CREATE RULE r AS ON UPDATE TO pg_catalog.pg_depend DO INSTEAD NOTHING" >/dev/null 2>&1 &
holders+=($!)
poll_until 20 queued pg_depend || { log "attack: mallory's CREATE RULE never queued on pg_depend"; exit 1; }
new_sessions app "pg_depend" "INSERT INTO t (v) VALUES (2) RETURNING id" "SELECT nextval('t_id_seq')" \
    "INSERT INTO plain (v) VALUES (2)" "SELECT 'ok'"
new_sessions bare "pg_depend" "INSERT INTO plain (v) VALUES (2)" "SELECT 'ok'"
if ! wait "$existing"; then
    fails=$((fails + 1)); log "attack (pg_depend): alice's existing session failed: $(grep -m1 ERROR "$base/existing")"
fi
cat "$base/existing" >> "$base/ids"
for p in "${holders[@]}"; do kill "$p" 2>/dev/null || true; done
as postgres app -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'mallory'" >/dev/null
holders=()

# Round 2: a superuser's migration holds the list open while its VACUUM
# FULL of it waits.
as postgres app -c "BEGIN" -c "SELECT count(*) FROM snowflake_id_internal.snowflake_adopted" \
    -c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
holders+=($!)
sleep 1
as postgres app -c "VACUUM FULL snowflake_id_internal.snowflake_adopted" >/dev/null 2>&1 &
holders+=($!)
poll_until 20 queued snowflake_id_internal.snowflake_adopted \
    || { log "attack: the VACUUM FULL never queued on the list"; exit 1; }
new_sessions app "VACUUM FULL" "INSERT INTO t (v) VALUES (3) RETURNING id" "SELECT nextval('t_id_seq')" "SELECT 'ok'"
# Dropping a sequence that is not adopted (a serial's) touches no row of
# the list: on 3462e24 the event trigger's DELETE queued behind the VACUUM
# FULL (here 55P03 after the lock timeout).
new_sessions app "VACUUM FULL, DROP" "SET lock_timeout = '2s'" "CREATE TEMP TABLE d (id serial, v int)" "DROP TABLE d" "SELECT 'ok'"
for p in "${holders[@]}"; do kill "$p" 2>/dev/null || true; done
as postgres app -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                    WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()" >/dev/null
holders=()

# Every number alice got for t (RETURNING and nextval) is a Snowflake ID of
# worker 22: a raw sequence value (1, 2, ...) is not (nothing else they
# run prints a number).
raw=$(grep -E '^[0-9]+$' "$base/ids" | awk '$1 < 4194304' | wc -l)
ids=$(grep -cE '^[0-9]{10,}$' "$base/ids" || true)
foreign=$(as postgres app -c "SELECT count(*) FROM t WHERE snowflake_worker_id(id) <> 22")
median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}')
slowest=$(printf '%s\n' "${times[@]}" | sort -n | tail -1)
log "attack: alice's ${#times[@]} new sessions took $median ms (median), $slowest ms at most; $ids Snowflake IDs," \
    "$raw values of the raw sequence, $fails failure(s)"
[ "$foreign" = 0 ] || { log "attack: FAILED: $foreign key(s) of t are not IDs of worker 22"; fails=$((fails + 1)); }
if [ "$raw" != 0 ]; then
    log "attack: FAILED: alice drew $raw value(s) from the raw sequence: $(grep -E '^[0-9]{1,6}$' "$base/ids" | tr '\n' ' ')"
    fails=$((fails + 1))
fi
[ "$median" -lt 500 ] || { log "attack: FAILED: alice's new sessions took $median ms each (median)"; fails=$((fails + 1)); }
[ "$fails" = 0 ] || exit 1
log "attack: no queued lock held up or failed alice's statements"
