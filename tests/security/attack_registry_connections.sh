#!/usr/bin/env bash
# Red-team attack on the worker-id registry (0.8.0 leases), second round:
# a member of snowflake_lease (mallory: the login role of another server,
# or anyone who has its password) keeps every other server that connects
# to the registry from then on from ever getting a lease, with nothing but
# idle sessions.
#
# The documented set-up gives each server its own login role, but sets no
# CONNECTION LIMIT on it: mallory may open every connection slot of the
# registry that is not reserved for superusers (max_connections less
# superuser_reserved_connections and reserved_connections). Servers that
# are connected keep their sessions; every server that needs a new one
# cannot get it ("too many clients already"): a server restarted (a minor
# upgrade, a crash of its postmaster, a node drained in Kubernetes), every
# server after a registry failover or restart (the documented Patroni
# set-up: all sessions drop at once, and her script reconnects first), a
# server whose request timed out (it drops the connection and reconnects).
# Each stops minting (55000) at the end of its lease and stays stopped
# while she holds the slots: ids need not run out.
#
# docs/worker-ids.md now gives each login role a CONNECTION LIMIT (3: a
# request that timed out may leave a session behind for a moment), which
# a member cannot raise, and this script sets the registry up that way.
#
# Passes (exit 0) when a restarted server leases a worker id while she
# holds her sessions; fails (exit 1) while the attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/registry_lib.sh"
registry_scaffold conns "${SNOWFLAKE_ATTACK_PORT:-16320}"   # the registry; minting server N on the port + N
# ------------------------------------------------------------------------
registry_up_documented "max_connections = 20"
minter_up 1
leased 1
log "attack (registry connections): server 1 holds worker id $(lease_of 1)"

# The attack: mallory opens idle sessions until the registry refuses her,
# and takes back every slot that frees up.
grab() {
    while :; do
        "$(pgbin)/psql" -X -q -h "$REG" -p "$P0" -U mallory -d registry -c "SELECT pg_sleep(300)" >/dev/null 2>&1 &
        sleep 0.05
    done
}
grab & holders+=($!)
mine() { rs postgres registry -c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'mallory'"; }
full() { ! "$(pgbin)/psql" -X -q -h "$REG" -p "$P0" -U lease_m1 -d registry -Atc "SELECT 1" >/dev/null 2>&1; }
poll_until 10 full || log "attack (registry connections): mallory cannot fill the registry's connection slots (her CONNECTION LIMIT)"
log "attack (registry connections): mallory holds $(mine) sessions of the registry"

# Server 1 restarts, as servers do.
cluster_stop "$BASE/m1"
cluster_up "$BASE/m1"
poll_until 20 has_lease 1 || true
log "attack (registry connections): restarted server 1: lease '$(lease_of 1 || true)'; $(last_error 1)"
back() { has_lease 1 && mints 1; }
back || die "attack (registry connections) WORKS: restarted server 1 cannot mint while mallory holds $(mine) registry sessions: $(last_error 1)"
log "attack (registry connections) refused: server 1 mints under worker id $(lease_of 1)"
