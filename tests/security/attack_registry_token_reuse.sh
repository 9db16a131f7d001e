#!/usr/bin/env bash
# Red-team attack on the worker-id registry's limit of live leases per
# login role (issue 47): a member of snowflake_lease (mallory) holds
# more ids than her limit of one, and with enough rounds every id, so
# that the next server to start or restart gets 55000.
#
# A claim preferred the row the caller's token holds (a crash restart of
# one postmaster keeps its token and its row) and counted the role's
# leases but those of the caller's own token. Mallory reuses one token:
# while her rows are locked in another session of hers (an open
# transaction that renewed them), her claim skips them (SKIP LOCKED),
# takes a fresh row, and counts none of hers.
#
# Passes (exit 0) when her second claim is refused with 53400, or waits
# for her own open renewal (55P03 at her lock_timeout), while her first
# row is locked; fails (exit 1) while the attack works (commit
# bf13dc9 failed: she got a second id).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/registry_lib.sh"
registry_scaffold tokenreuse "${SNOWFLAKE_ATTACK_PORT:-16340}"   # the registry
# ------------------------------------------------------------------------
registry_up_documented
T=11111111-1111-4111-8111-111111111111
claim() {
    rs mallory registry -F ' ' -c "SET lock_timeout = '2s'" -c "SELECT worker_id, lease_epoch FROM $REG_SCHEMA.snowflake_registry_claim(
        '$T', 'x', 1, 'x', 'x', -1, 10, 12, 1704067200000, 600000,
        (extract(epoch FROM clock_timestamp()) * 1000)::bigint)" 2>&1
}
read -r W EP < <(claim) || die "mallory's first claim failed"
[[ "$W" =~ ^[0-9]+$ ]] || die "mallory's first claim returned '$W $EP', expected a worker id"
log "attack (registry token reuse): mallory holds worker id $W with token $T"

hold_open "SELECT * FROM $REG_SCHEMA.snowflake_registry_renew($W, '$T', $EP, 600000,
    (extract(epoch FROM clock_timestamp()) * 1000)::bigint);" \
    || die "mallory's renewal did not run"

out=$(claim || true)
n=$(rs postgres registry -c "SELECT count(*) FROM $REG_SCHEMA.snowflake_registry_holders
                              WHERE holder_role = 'mallory' AND state = 'held'")
# Refused for her limit (53400), or (since issue 56, when renewals lock
# the role's row) made to wait for her own open renewal: either way, no
# second id.
if [ "$n" != 1 ] || ! grep -Eq "may hold no more worker-id leases|canceling statement due to lock timeout" <<<"$out"; then
    die "attack (registry token reuse) WORKS: with her row $W locked, mallory's second claim with the same token said '$out'; she holds $n ids"
fi
log "attack (registry token reuse) refused: $(grep -m1 ERROR <<<"$out")"
