#!/usr/bin/env bash
# Red-team attack on the high-water mark (issue 46, found in review): a
# role with CREATEDB (mallory) renames 20 databases of her own in one
# transaction and leaves it open. RENAME DATABASE holds an ACCESS
# EXCLUSIVE lock on each database until the transaction ends, and every
# new connection to it waits, the high-water writer's included: each of
# her databases cost every round its writer's 2 s time-out, rounds took
# 40 s, and bob's INSERTs in his database (which she cannot connect to)
# failed with 55000 "high-water mark is not available"; slow rounds also
# pushed the mark ahead without bound (3 times the last round). The
# launcher now asks for that lock without waiting and skips such a
# database at once (it lags: nobody can be connected to a database being
# renamed), and the mark runs at most 5 minutes ahead.
#
# Passes (exit 0) when bob's INSERTs all succeed for 40 s while her
# transaction holds the locks, and no mark is more than 5 minutes ahead
# of the clock; fails (exit 1) while the attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
attack_cluster renamelock "${SNOWFLAKE_ATTACK_PORT:-16219}" 28
as postgres postgres -c "CREATE ROLE mallory LOGIN CREATEDB" -c "CREATE ROLE bob LOGIN" \
    -c "CREATE DATABASE bobdb OWNER bob" >/dev/null
bob_orders

renames="BEGIN;"
for i in $(seq 1 20); do
    as mallory postgres -c "CREATE DATABASE rn$i TEMPLATE template0" >/dev/null
    renames+=" ALTER DATABASE rn$i RENAME TO rn${i}x;"
done
renames+=" SELECT pg_sleep(120);"
as mallory postgres -c "$renames" >/dev/null 2>&1 & holders+=($!)
held() { [ "$(as postgres postgres -c "SELECT count(*) FROM pg_locks WHERE locktype = 'object' AND mode = 'AccessExclusiveLock' AND classid = 'pg_database'::regclass AND granted")" -ge 20 ]; }
poll_until 30 held || die "attack (rename lock): mallory's transaction does not hold the 20 locks"
log "attack (rename lock): mallory holds RENAME locks on 20 databases in an open transaction"

bob_inserts "rename lock" 40
ahead=$(as postgres bobdb -c "SELECT round(extract(epoch FROM snowflake_high_water() - now()))")
[ "$BOB_ERRS" = 0 ] || die "attack (rename lock) WORKS: mallory's locked databases stopped bob's INSERTs ($BOB_ERRS of $BOB_TRIES failed)"
[ "$ahead" -le 300 ] || die "attack (rename lock) WORKS: the mark runs $ahead s ahead of the clock"
log "attack (rename lock) refused: bob minted throughout ($BOB_TRIES INSERTs); the mark is $ahead s ahead"
