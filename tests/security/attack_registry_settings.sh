#!/usr/bin/env bash
# Red-team attack on the worker-id registry (0.8.0 leases): settings of
# the registry's login role or database stop every leased server.
#
# 1. A registry member: whoever holds the credentials of snowflake_lease,
#    the ONE login role that docs/worker-ids.md has every server use (one
#    compromised minting host is enough). PostgreSQL lets a role set its
#    own defaults and signal its own backends, so she runs, as it:
#        ALTER ROLE snowflake_lease SET default_transaction_read_only = on;
#        SELECT pg_terminate_backend(pid) FROM pg_stat_activity
#         WHERE usename = current_user AND pid <> pg_backend_pid();
#    Every lease worker reconnects into a read-only session: each claim
#    and renewal fails ("cannot execute UPDATE in a read-only
#    transaction") and the whole fleet stops minting (55000) within a
#    lease. statement_timeout = '1ms', or a new PASSWORD, do the same; the
#    same ALTER ROLE also overrides the documented synchronous_commit = on
#    (attack_registry_sync_commit.sh).
# 2. The owner of the registry database (in the red team's version
#    mallory, a plain role; a registry database must now belong to a
#    superuser, so here it is a superuser's maintenance setting):
#        ALTER DATABASE registry SET default_transaction_read_only = on;
#    takes effect at the lease workers' next connection: after any
#    registry restart or failover, or a dropped connection, the fleet
#    stops likewise.
# The lease worker takes whatever session the role and database settings
# give it (src/lease/registry_client.rs sets nothing at connect).
#
# Passes (exit 0) when server 1 keeps minting through both; fails (exit 1)
# while either works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/registry_lib.sh"
registry_scaffold settings "${SNOWFLAKE_ATTACK_PORT:-16235}"   # the registry; minting server N on the port + N
# ------------------------------------------------------------------------
registry_up
minter_up 1
leased 1
log "attack (registry settings): server 1 holds worker id $(lease_of 1)"
worked=()

# 1. The member.
rs snowflake_lease registry -c "ALTER ROLE snowflake_lease SET default_transaction_read_only = on" \
    -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
         WHERE usename = current_user AND pid <> pg_backend_pid()" >/dev/null
poll_until 8 no_lease 1 || true
if no_lease 1 || ! mints 1; then
    worked+=("member's ALTER ROLE snowflake_lease SET default_transaction_read_only = on: server 1 lost its lease ($(last_error 1))")
fi
log "attack (registry settings) 1: server 1: lease $(lease_of 1 || true); $(last_error 1)"
rs postgres registry -c "ALTER ROLE snowflake_lease RESET default_transaction_read_only" \
    -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = 'snowflake_lease'" >/dev/null
leased 1

# 2. The database owner; then a routine restart of the registry.
rs postgres registry -c "ALTER DATABASE registry SET default_transaction_read_only = on" >/dev/null
cluster_stop "$REG"; cluster_up "$REG"
poll_until 8 no_lease 1 || true
if no_lease 1 || ! mints 1; then
    worked+=("owner's ALTER DATABASE registry SET default_transaction_read_only = on and a registry restart: server 1 lost its lease ($(last_error 1))")
fi
log "attack (registry settings) 2: server 1: lease $(lease_of 1 || true); $(last_error 1)"

[ ${#worked[@]} = 0 ] || die "attack (registry settings) WORKS: $(printf '%s; ' "${worked[@]}")"
log "attack (registry settings) refused"
