#!/usr/bin/env bash
# Red-team attack on the high-water mark: a role with CREATEDB that owns a
# few (empty) databases (mallory) stalls every round of the high-water
# launcher, so that snowflake_nextval() hangs or fails server-wide.
#
# The launcher writes one database at a time, and its writer's connection
# takes RowExclusiveLock on the database object in InitPostgres, before
# WRITER_SETTINGS (lock_timeout) applies, with no timeout at all. CREATE
# DATABASE x TEMPLATE d takes ShareLock on d, then waits up to 5 s in
# CountOtherDBBackends for d's other sessions to leave, then fails; mallory
# keeps one session in d and repeats. Each of her databases delays the
# round by up to 5 s, and the rounds of a busy server must finish within
# WAIT_MS (10 s). The extension need not be installed in her databases:
# the launcher starts a writer in every database that allows connections.
# Without CREATEDB, the owner of databases gets the same stall from a
# DROP DATABASE loop (AccessExclusiveLock, then the same 5 s wait): 3
# databases held every INSERT of the server 4-17 s in our runs.
#
# Passes (exit 0) when bob's INSERTs in his database all finish within
# 15 s; fails (exit 1) while the attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
attack_cluster dblock "${SNOWFLAKE_ATTACK_PORT:-16214}" 25
as postgres postgres -c "CREATE ROLE mallory LOGIN CREATEDB" -c "CREATE ROLE bob LOGIN" \
    -c "CREATE DATABASE bobdb OWNER bob" >/dev/null
bob_orders

# mallory: six empty databases of her own, a session in each, and a
# CREATE DATABASE ... TEMPLATE loop on each.
for i in 1 2 3 4 5 6; do
    as mallory postgres -c "CREATE DATABASE m$i TEMPLATE template0" >/dev/null
    as mallory "m$i" -c "SELECT pg_sleep(120)" >/dev/null 2>&1 & holders+=($!)
    ( while :; do as mallory postgres -c "CREATE DATABASE x$i TEMPLATE m$i" >/dev/null 2>&1 || true; done ) &
    holders+=($!)
done
sleep 2

bob_inserts "database lock" 40
[ "$BOB_ERRS" = 0 ] || die "attack (database lock) WORKS: mallory's CREATE DATABASE ... TEMPLATE loops stopped bob's INSERTs ($BOB_ERRS failures)"
log "attack (database lock) refused: bob minted throughout"
