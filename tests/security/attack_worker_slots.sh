#!/usr/bin/env bash
# Red-team attack on the high-water mark: a role with no privilege at all
# (eve: LOGIN, CONNECT to the postgres database) stops snowflake_nextval()
# server-wide by filling max_worker_processes with parallel workers.
#
# Every round of the high-water launcher registers one dynamic background
# worker per database (RegisterDynamicBackgroundWorker); when no slot is
# free the round fails, and after WAIT_MS (10 s) every snowflake_nextval()
# on the server fails with 55000. With the defaults (max_worker_processes
# = 8, max_parallel_workers = 8) three slots are taken (the reserver, the
# high-water launcher, the logical replication launcher) and any role can
# take the other five: SET debug_parallel_query = on (a USERSET setting)
# and a long parallel-safe query (pg_sleep is PARALLEL SAFE) in five
# sessions, one parallel worker each.
#
# Since issue 46 minting needs no worker slot. Only the start-up read of
# every database's mark (after a crash) starts readers; part 2 (from the
# red-team review of the per-database marks): eve keeps every slot taken
# while the server restarts after a crash. A reader that finds no slot
# leaves its database to read its own mark, so generation starts anyway
# (before the fix: 55000 everywhere for as long as eve held the slots).
#
# Passes (exit 0) when bob can still mint in his own database while eve's
# sessions run, and mints within 15 s of a crash restart while she takes
# every slot again; fails (exit 1) while the attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
# The defaults, spelled out.
attack_cluster slots "${SNOWFLAKE_ATTACK_PORT:-16211}" 22 "max_worker_processes = 8" "max_parallel_workers = 8"
as postgres postgres -c "CREATE ROLE eve LOGIN" -c "CREATE ROLE bob LOGIN" \
    -c "CREATE DATABASE bobdb OWNER bob" >/dev/null
bob_orders

# eve: one parallel worker per session, as many sessions as it takes.
for _ in $(seq 1 8); do
    as eve postgres -c "SET debug_parallel_query = on" -c "SELECT pg_sleep(120)" >/dev/null 2>&1 & holders+=($!)
done
sleep 2
busy=$(as postgres postgres -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker'")
log "attack (worker slots): eve's sessions hold $busy parallel workers"

bob_inserts "worker slots" 25
grep -E "could not write the high-water" "$DIR/server.log" | tail -2 >&2 || true
[ "$BOB_ERRS" = 0 ] || die "attack (worker slots) WORKS: eve (no privileges) stopped bob's INSERTs in his own database ($BOB_ERRS failures)"
log "attack (worker slots) refused: bob minted throughout"

# Part 2: a crash while every slot is taken. What eve can do only by
# winning a race as the server comes back (her sessions against the
# readers of the start-up read) is made certain here: no slot is free at
# all (max_worker_processes = 3: the reservation worker, the high-water
# launcher and the logical replication launcher).
for p in "${holders[@]}"; do kill "$p" 2>/dev/null || true; done
holders=()
as postgres postgres -c "ALTER SYSTEM SET max_worker_processes = 3" >/dev/null
cluster_stop "$DIR"; cluster_up "$DIR"
as bob bobdb -c "INSERT INTO orders (item) VALUES ('before the crash')" >/dev/null
as_pg "$(pgbin)/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null
cluster_up "$DIR"
bob_after() { as bob bobdb -c "INSERT INTO orders (item) VALUES ('after the crash')" >/dev/null 2>&1; }
poll_until 15 bob_after || die "attack (worker slots) WORKS: after a crash restart with no worker slot free, bob could not mint for 15 s: $(as bob bobdb -c "INSERT INTO orders (item) VALUES ('x')" 2>&1 | head -1)"
log "attack (worker slots) refused: after a crash restart with no worker slot free, bob minted in $POLL_MS ms"
# Since issue 55 a crash the WAL covers reads no marks at all. A start
# without the state file must read them, and with no slot free every
# database lags: bob still mints, reading his own mark first.
cluster_stop "$DIR"; rm -f "$DIR/data/snowflake_id.state"; cluster_up "$DIR"
poll_until 15 bob_after || die "attack (worker slots) WORKS: after a start without the state file with no worker slot free, bob could not mint for 15 s: $(as bob bobdb -c "INSERT INTO orders (item) VALUES ('x')" 2>&1 | head -1)"
grep -q 'could not read the high-water mark of database "bobdb"' "$DIR/server.log" \
    || die "attack (worker slots): bobdb did not lag with no worker slot free (the test no longer tests what it should)"
log "attack (worker slots) refused: after a start without the state file with no worker slot free, bob minted in $POLL_MS ms"
# The databases it could not read lag; a clean stop now must not mark the
# state file current, or the next start would skip their marks for good
# (the second red-team review of issue 46).
cluster_stop "$DIR"
if grep -q stopped_at_checkpoint "$DIR/data/snowflake_id.state"; then
    die "attack (worker slots) WORKS: a clean stop while databases lagged marked the state file current, and the next start would not read their marks"
fi
log "attack (worker slots) refused: a clean stop while databases lag leaves the next start to read their marks"
