#!/usr/bin/env bash
# Red-team attack on the worker-id registry (0.8.0 leases): a registry
# member turns off the synchronous commit of every server's claims and
# renewals, which docs/worker-ids.md requires ("every committed claim and
# renewal must survive a failover of the registry": a lost renewal lets
# the next holder of the id start below IDs the old holder minted).
#
# The documented setup pins it for the servers' shared login role:
#     ALTER ROLE snowflake_lease SET synchronous_commit = on;
# but a role may change its own defaults: whoever holds snowflake_lease's
# credentials (one compromised minting host) runs
#     SET synchronous_commit = local;
#     ALTER ROLE snowflake_lease SET synchronous_commit = local;
# and every lease worker's next session commits without waiting for a
# standby. (The SECURITY DEFINER functions cannot pin it: a SET clause
# ends with the function, before the commit.)
#
# Shown without a failover: the registry names a synchronous standby that
# never connects, so a claim committed as documented never returns and the
# server leases nothing; after her ALTER ROLE it leases an id, that is,
# the registry acknowledged a claim that no standby has.
#
# Passes (exit 0) when the server still leases nothing; fails (exit 1)
# while the attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/registry_lib.sh"
registry_scaffold sync "${SNOWFLAKE_ATTACK_PORT:-16240}"   # the registry; minting server N on the port + N
# ------------------------------------------------------------------------
registry_up
rs postgres postgres -c "ALTER SYSTEM SET synchronous_standby_names = 'the_standby'" \
    -c "SELECT pg_reload_conf()" >/dev/null
minter_up 1
# As documented: no acknowledged claim without the standby.
if poll_until 6 has_lease 1; then
    die "setup: server 1 leased worker id $(lease_of 1) although no synchronous standby is connected"
fi
log "attack (registry synchronous_commit): without a standby, server 1 leases nothing: $(last_error 1)"

# The attack: two statements of the member.
rs snowflake_lease registry -c "SET synchronous_commit = local" \
    -c "ALTER ROLE snowflake_lease SET synchronous_commit = local" >/dev/null

if poll_until 10 has_lease 1; then
    die "attack (registry synchronous_commit) WORKS: server 1 leased worker id $(lease_of 1) on a claim no standby has (the member's ALTER ROLE snowflake_lease SET synchronous_commit = local overrode the documented 'on')"
fi
log "attack (registry synchronous_commit) refused: $(last_error 1)"
