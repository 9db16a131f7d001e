#!/usr/bin/env bash
# Red-team attack on the worker-id registry's clock (issue 47): a member
# of snowflake_lease (mallory) costs every live server its lease right
# after a failover of the registry, for as long as she keeps one session
# open.
#
# Leases expire on the registry's monotonic clock; after a failover to
# another host (or a reboot) every live lease is timed on the old clock,
# and a claim first has to note that this clock sees it, so that it runs
# a full TTL from then. Noting it by updating the leases' own rows locks
# them until the claim's transaction ends; mallory calls the claim inside
# BEGIN ... and keeps the transaction open; every holder's next renewal
# finds its row locked, which a renewal takes for a lost lease (it must
# not wait: attack_registry_row_lock.sh), and stops minting.
#
# Here the failover is simulated: the holder's row is set to another
# clock, as the old primary left it. The holder's lease worker is held
# (SIGSTOP) for the second it takes mallory to open her claim, so that
# no renewal comes first.
#
# Passes (exit 0) when server 1 keeps its worker id and mints while she
# holds her transaction; fails (exit 1) while the attack works (commit
# cb07624, whose claims updated the rows they saw, failed).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/registry_lib.sh"
registry_scaffold adoptlock "${SNOWFLAKE_ATTACK_PORT:-16330}"   # the registry; minting server N on the port + N
# ------------------------------------------------------------------------
registry_up_documented
minter_up 1
leased 1
W=$(lease_of 1)
log "attack (registry adoption lock): server 1 holds worker id $W"

LW=$(ps -o pid=,args= --ppid "$(head -1 "$BASE/m1/data/postmaster.pid")" | awk '/snowflake_id lease/ {print $1}')
[ -n "$LW" ] || die "no lease worker on server 1"
kill -STOP "$LW"
rs postgres registry -c "UPDATE snowflake_id_internal.snowflake_registry
                            SET lease_clock = 'the-old-primary'
                          WHERE worker_id = $W" >/dev/null
hold_open "SELECT * FROM snowflake.snowflake_registry_claim(gen_random_uuid(), 'x', 1, 'x', 'x', -1, 10, 12,
    1704067200000, 600000, (extract(epoch FROM clock_timestamp()) * 1000)::bigint);" \
    || { kill -CONT "$LW"; die "mallory's claim did not run"; }
kill -CONT "$LW"
log "attack (registry adoption lock): mallory's claim is open; server 1's lease worker resumed"

# Three renewal periods (the TTL is 3 s): server 1 renews or it loses W.
sleep 3
got=$(lease_of 1 || true)
if [ "$got" != "$W" ] || ! mints 1; then
    die "attack (registry adoption lock) WORKS: server 1 holds '$got' (was $W) while mallory's claim is open: $(last_error 1)"
fi
log "attack (registry adoption lock) refused: server 1 still holds worker id $W and mints"
