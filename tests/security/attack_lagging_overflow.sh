#!/usr/bin/env bash
# Red-team attack on the high-water mark (issue 46): a role with CREATEDB
# (mallory) makes the high-water processes fail in more databases than
# 0.8.0 had room to remember (64). Each of her 70 databases has the
# extension and sets `transaction_timeout = '1ms'` (where the major has
# it) and `statement_timeout = '1ms'`, settings a process connecting there
# takes from the database before it can override anything. 0.8.0 as first
# written remembered 64 failing databases; the 65th failed every round,
# and every database of the server, bob's among them, got 55000
# "high-water mark is not available".
#
# Since each database raises its own mark, nothing connects to her
# databases while bob mints. After a crash the start-up read of every
# mark visits them; it may hold generation up for at most its budget
# (src/high_water/scan.rs, READ_BUDGET), whatever her databases do.
#
# Passes (exit 0) when bob's INSERTs in his database (which mallory cannot
# connect to) all succeed for 30 s, and his first INSERT after a crash
# restart succeeds within 15 s; fails (exit 1) while the attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
attack_cluster lagging "${SNOWFLAKE_ATTACK_PORT:-16218}" 27
as postgres postgres -c "CREATE ROLE mallory LOGIN CREATEDB" -c "CREATE ROLE bob LOGIN" \
    -c "CREATE DATABASE bobdb OWNER bob" >/dev/null
bob_orders

as postgres postgres -c "CREATE DATABASE maltemplate OWNER mallory" >/dev/null
as postgres maltemplate -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" >/dev/null
has_tt=$(as postgres postgres -c "SELECT count(*) FROM pg_settings WHERE name = 'transaction_timeout'")
for i in $(seq 1 70); do
    as mallory postgres -c "CREATE DATABASE lag$i TEMPLATE maltemplate" >/dev/null
    as mallory postgres -c "ALTER DATABASE lag$i SET statement_timeout = '1ms'" >/dev/null
    if [ "$has_tt" = 1 ]; then
        as mallory postgres -c "ALTER DATABASE lag$i SET transaction_timeout = '1ms'" >/dev/null
    fi
done
log "attack (lagging overflow): mallory owns 70 databases with the extension and hostile settings"

bob_inserts "lagging overflow" 30
[ "$BOB_ERRS" = 0 ] || die "attack (lagging overflow) WORKS: mallory's 70 databases stopped bob's INSERTs ($BOB_ERRS of $BOB_TRIES failed)"
log "attack (lagging overflow): bob minted throughout ($BOB_TRIES INSERTs)"

# A crash: the start-up read of every database's mark runs before the
# first ID.
as_pg "$(pgbin)/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null
cluster_up "$DIR"
start=$SECONDS
bob_first() { as bob bobdb -c "INSERT INTO orders (item) VALUES ('after the crash')" >/dev/null 2>&1; }
poll_until 15 bob_first \
    || die "attack (lagging overflow) WORKS: after a crash restart, bob's INSERT failed for 15 s: $(as bob bobdb -c "INSERT INTO orders (item) VALUES ('x')" 2>&1 | head -1)"
log "attack (lagging overflow) refused: after a crash restart bob's first INSERT came after $POLL_MS ms ($((SECONDS - start)) s)"
