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
as postgres bobdb -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
    -c "REVOKE CONNECT ON DATABASE bobdb FROM PUBLIC" >/dev/null
as bob bobdb -c "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text)" >/dev/null
as bob bobdb -c "INSERT INTO orders (item) VALUES ('warm-up')" >/dev/null

for i in $(seq 1 70); do
    as mallory postgres -c "CREATE DATABASE lag$i TEMPLATE template0" \
        -c "ALTER DATABASE lag$i SET transaction_timeout = '1ms'" >/dev/null
done
log "attack (lagging overflow): mallory owns 70 databases whose writers die"

errs=0 n=0 last=""
end=$((SECONDS + 40))
while [ $SECONDS -lt $end ]; do
    if ! last=$(as bob bobdb -c "SET statement_timeout = '15s'" \
                  -c "INSERT INTO orders (item) VALUES ('book') RETURNING id" 2>&1); then
        errs=$((errs + 1)); log "attack (lagging overflow): bob's INSERT failed: $(echo "$last" | head -1)"
    fi
    n=$((n + 1))
    sleep 0.5
done
failed_writes=$(grep -o 'could not write the high-water mark in database "lag[0-9]*"' "$DIR/server.log" | sort -u | wc -l)
[ "$failed_writes" -ge 65 ] \
    || die "attack (lagging overflow): only $failed_writes of mallory's databases lagged; the attack did not take place"
[ "$errs" = 0 ] || die "attack (lagging overflow) WORKS: mallory's 70 lagging databases stopped bob's INSERTs ($errs of $n failed)"
log "attack (lagging overflow) refused: bob minted throughout ($n INSERTs) while $failed_writes of her databases lagged"
