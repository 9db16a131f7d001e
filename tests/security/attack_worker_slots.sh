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
# Passes (exit 0) when bob can still mint in his own database while eve's
# sessions run; fails (exit 1) while the attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
# The defaults, spelled out.
attack_cluster slots "${SNOWFLAKE_ATTACK_PORT:-56111}" 22 "max_worker_processes = 8" "max_parallel_workers = 8"
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
