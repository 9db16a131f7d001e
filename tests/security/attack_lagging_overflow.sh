#!/usr/bin/env bash
# Red-team attack on the high-water mark (issue 46): a role with CREATEDB
# (mallory) makes the writers of more databases fail than 0.8.0 had room
# to remember (64). Each of her 70 empty databases sets
# `transaction_timeout = '1ms'`, a setting the writer's session takes
# from the database before it can override anything, so its writer dies
# there. A database whose writer fails lags: no ID is handed out in it
# until its mark is written. 0.8.0 as first written remembered 64 such
# databases; the 65th failed every round, and every database of the
# server, bob's among them, got 55000 "high-water mark is not available".
#
# Passes (exit 0) when bob's INSERTs in his database (which mallory cannot
# connect to) all succeed for 40 s while her 70 databases lag; fails
# (exit 1) while the attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
attack_cluster lagging "${SNOWFLAKE_ATTACK_PORT:-56118}" 27
as postgres postgres -c "CREATE ROLE mallory LOGIN CREATEDB" -c "CREATE ROLE bob LOGIN" \
    -c "CREATE DATABASE bobdb OWNER bob" >/dev/null
bob_orders

for i in $(seq 1 70); do
    as mallory postgres -c "CREATE DATABASE lag$i TEMPLATE template0" \
        -c "ALTER DATABASE lag$i SET transaction_timeout = '1ms'" >/dev/null
done
log "attack (lagging overflow): mallory owns 70 databases whose writers die"

bob_inserts "lagging overflow" 40
failed_writes=$(grep -o 'could not write the high-water mark in database "lag[0-9]*"' "$DIR/server.log" | sort -u | wc -l)
[ "$failed_writes" -ge 65 ] \
    || die "attack (lagging overflow): only $failed_writes of mallory's databases lagged; the attack did not take place"
[ "$BOB_ERRS" = 0 ] || die "attack (lagging overflow) WORKS: mallory's 70 lagging databases stopped bob's INSERTs ($BOB_ERRS of $BOB_TRIES failed)"
log "attack (lagging overflow) refused: bob minted throughout ($BOB_TRIES INSERTs) while $failed_writes of her databases lagged"
