#!/usr/bin/env bash
# The registry's clock after a failover to a standby in another Linux
# time namespace (issue 56, item 1), on PostgreSQL 18 only. A lease
# expires by the registry's CLOCK_BOOTTIME, and two readings are compared
# only under one clock name. The kernel's boot id alone named the clock,
# but a standby started under `unshare --time` (or a container restored by
# CRIU) shares the boot id and reads CLOCK_BOOTTIME shifted by its
# namespace's offset: a failover compared two clocks as one.
#
# Each round: a registry (worker_bits 10, the documented set-up of
# tests/security/registry_lib.sh) with a streaming standby; minting
# servers m1 and m2 lease for 3 s (renewed every 1 s) through a
# multi-host connection string (the primary, then the standby,
# target_session_attrs=read-write). m2 crashes (kill -9 of its postmaster
# and every child at once: nothing released), the standby replays, the
# primary stops in immediate mode and the standby is promoted.
#  A. The standby's CLOCK_BOOTTIME is an hour ahead of the primary's
#     (`unshare --time --boottime 3600` for the standby).
#  B. An hour behind (the primary under the offset, the standby without:
#     a negative offset would need an hour of uptime).
# Promises, in both rounds:
#  1. The two clocks have two names (snowflake_registry_boot()).
#  2. No second live holder: right after the promotion, a claim (as
#     lease_m3, preferring m1's id) gets neither m1's id nor m2's, both
#     of whose leases were live at the failover; m1 keeps its id and
#     mints throughout (its lease is never lost).
#  3. The crashed m2's id is free within one TTL plus one renewal period
#     of the promotion (3 s + 1 s), plus 3 s for the promotion to be seen
#     and the poll (the lease is seen at the first renewal on the new
#     clock, then runs one TTL: docs/worker-ids.md).
# On the build before the fix (fcdfa36; a5901f6 only moved the lease
# code), both rounds fail promise 1, round A promise 2 (the
# claim got m1's id: every lease on the old clock looked expired), round
# B fails promise 3 (m2's id stayed held for the hour of the offset).
# LEASE_CLOCK_ONLY="A" runs one round.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../security/registry_lib.sh"
if [ "$PG_MAJOR" != 18 ] && [ "${SNOWFLAKE_LEASE_CLOCK_ANY_MAJOR:-}" != 1 ]; then
    skip_test "runs on 18 (SNOWFLAKE_LEASE_CLOCK_ANY_MAJOR=1 runs it on $PG_MAJOR)"
fi
unshare --time --boottime 3600 true 2>/dev/null || skip_test "unshare --time is not allowed here (needs root and Linux 5.6)"
registry_scaffold lease-clock "${SNOWFLAKE_IT_LEASE_CLOCK_PORT:-15850}"   # the registry; standby +9; minting servers +1..+3
SB="$BASE/standby"; PS=$((P0 + 9))
TTL_S=3
T0=$SECONDS
NAMES_FAILED=()

# start_in DIR OFFSET: start DIR's server in a time namespace whose
# CLOCK_BOOTTIME is OFFSET seconds ahead (0: the machine's own).
start_in() {
    local dir="$1" off="$2" ns=()
    [ "$off" = 0 ] || ns=(unshare --time --boottime "$off")
    "${ns[@]}" runuser -u postgres -- env ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH="$LD_LIBRARY_PATH"} \
        "$(pgbin)/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null \
        || { tail -20 "$dir/server.log" >&2; die "the server in $dir did not start"; }
}
sb() { "$(pgbin)/psql" -X -q -h "$SB" -p "$PS" -U "${SB_USER:-postgres}" -d registry -v ON_ERROR_STOP=1 -At "$@"; }
boot_of() { "$(pgbin)/psql" -X -q -h "$1" -p "$2" -U postgres -d registry -At \
                -c "SELECT snowflake_id_internal.snowflake_registry_boot()"; }
# crash N: minting server N dies as its host would: every child is
# stopped first, then the postmaster, then all are killed. (With the
# postmaster killed first, its lease worker sees it die and releases the
# lease within the microseconds the other kills take.)
crash() {
    local pid kids
    pid=$(head -1 "$BASE/m$1/data/postmaster.pid"); kids=$(pgrep -P "$pid" || true)
    # shellcheck disable=SC2086
    kill -STOP $kids "$pid"
    # shellcheck disable=SC2086
    kill -9 "$pid" $kids
    for k in $pid $kids; do poll_until 10 dead "$k" || die "process $k of m$1 outlived kill -9"; done
    rm -f "$BASE/m$1"/.s.PGSQL.*
}
dead() { ! kill -0 "$1" 2>/dev/null; }
replayed() { [ "$(sb -c "SELECT pg_last_wal_replay_lsn() >= '$1'::pg_lsn")" = t ]; }
state_sb() { sb -c "SELECT state FROM snowflake.snowflake_registry_holders WHERE worker_id = $1"; }
not_held() { local s; s=$(state_sb "$1") && [ "$s" != held ]; }
minter() {  # minter N: server N, leasing through both registry hosts
    node "$BASE/m$1" $((P0 + $1)) "shared_preload_libraries = 'snowflake_id'" \
        "snowflake_id.worker_id_source = 'registry'" \
        "snowflake_id.registry = 'host=$REG,$SB port=$P0,$PS dbname=registry user=lease_m$1 target_session_attrs=read-write connect_timeout=2'" \
        "snowflake_id.lease_ttl = '${TTL_S}s'"
    ms "$1" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" >/dev/null
}

round() {  # round NAME PRIMARY_OFFSET STANDBY_OFFSET
    local name="$1" poff="$2" soff="$3" k1 k2 lsn t_f got held_ms first last
    log "$name. the registry fails over to a standby whose CLOCK_BOOTTIME is $(( (soff - poff) / 3600 )) h from the primary's"
    for d in "$BASE"/m* "$SB" "$REG"; do [ -d "$d" ] && cluster_stop "$d"; done
    registry_up_documented "wal_level = replica" "max_wal_senders = 4"
    rs postgres registry -c "CREATE ROLE lease_m2 LOGIN CONNECTION LIMIT 3 IN ROLE snowflake_lease" \
        -c "CREATE ROLE lease_m3 LOGIN CONNECTION LIMIT 3 IN ROLE snowflake_lease" >/dev/null
    if [ "$poff" != 0 ]; then cluster_stop "$REG"; start_in "$REG" "$poff"; fi
    mkdir -p "$SB"; chown postgres:postgres "$SB"
    basebackup_standby "$REG" "$P0" "$SB" "$PS" >/dev/null 2>&1 || die "pg_basebackup of the registry failed"
    start_in "$SB" "$soff"
    local bp bs; bp=$(boot_of "$REG" "$P0"); bs=$(boot_of "$SB" "$PS")
    # Recorded, not fatal: the promises below show what one name costs.
    if [ "$bp" = "$bs" ]; then
        printf '\033[1;31mERROR:\033[0m %s\n' "$name: the primary's and the standby's clocks have one name, '$bp'" >&2
        NAMES_FAILED+=("$name")
    fi
    log "   clock names: primary '$bp', standby '$bs'"
    minter 1; minter 2
    poll_until 30 has_lease 1 || die "$name: m1 leased no id within 30 s ($(last_error 1))"
    poll_until 30 has_lease 2 || die "$name: m2 leased no id within 30 s ($(last_error 2))"
    k1=$(lease_of 1); k2=$(lease_of 2)
    mints 1 || die "$name: m1 does not mint"
    # m2 crashes right after a renewal: its lease lives nearly a TTL more.
    local r0; r0=$(rs postgres registry -c "SELECT renewed_at FROM snowflake.snowflake_registry_holders WHERE worker_id = $k2")
    renewed() { [ "$(rs postgres registry -c "SELECT renewed_at > '$r0' FROM snowflake.snowflake_registry_holders WHERE worker_id = $k2")" = t ]; }
    poll_until 10 renewed || die "$name: m2 renewed no lease within 10 s"
    crash 2
    lsn=$(rs postgres registry -c "SELECT pg_current_wal_lsn()")
    poll_until 30 replayed "$lsn" || die "$name: the standby did not replay up to $lsn within 30 s"
    as_pg "$(pgbin)/pg_ctl" -D "$REG/data" -m immediate -w stop >/dev/null
    as_pg "$(pgbin)/pg_ctl" -D "$SB/data" -w -t 60 promote >/dev/null || die "$name: the promotion failed"
    t_f=$(date +%s%N)
    # 2. A claim right after the promotion, preferring m1's id.
    got=$(SB_USER=lease_m3 sb -c "SELECT worker_id FROM snowflake.snowflake_registry_claim(
              '33333333-3333-4333-8333-333333333333', 'm3', 3, 'm3', '/m3', $k1, 10, 12, 1704067200000, 60000,
              (extract(epoch FROM clock_timestamp()) * 1000)::bigint)" 2>&1) || true
    [ "$got" != "$k1" ] || die "$name: a claim right after the failover got worker id $k1, which m1 holds: a second live holder"
    [ "$got" != "$k2" ] || die "$name: a claim right after the failover got worker id $k2, whose crashed holder's lease was live"
    log "   a claim right after the promotion (preferring m1's id $k1) got '$got'"
    # 3. The crashed holder's id is free within TTL + a renewal + 3 s.
    poll_until $((TTL_S + 1 + 3)) not_held "$k2" \
        || die "$name: the crashed m2's id $k2 is still $(state_sb "$k2") $(( ($(date +%s%N) - t_f) / 1000000 )) ms after the promotion (bound: $(( (TTL_S + 1 + 3) * 1000 )) ms)"
    held_ms=$(( ($(date +%s%N) - t_f) / 1000000 ))
    # Seen at the promotion at the earliest: never free a TTL sooner (the
    # poll sees it free after it is; 200 ms for the promotion's end,
    # which a renewal may see before this script reads the time).
    [ "$held_ms" -ge $((TTL_S * 1000 - 200)) ] \
        || die "$name: the crashed m2's id $k2 was free $held_ms ms after the promotion, before one TTL (${TTL_S} s) of the new clock: its lease was cut short"
    log "   the crashed m2's id $k2 free $held_ms ms after the promotion (TTL ${TTL_S} s)"
    # m1 kept its id and mints on.
    [ "$(lease_of 1)" = "$k1" ] || die "$name: m1 holds '$(lease_of 1)' after the failover, expected its id $k1"
    first=$(ms 1 -c "SELECT snowflake_nextval()")
    sleep 1
    last=$(ms 1 -c "SELECT snowflake_nextval()")
    [ "$last" -gt "$first" ] || die "$name: m1's IDs went from $first to $last"
    ! grep -q "stopped minting" "$BASE/m1/server.log" \
        || die "$name: m1 lost its lease: $(grep -m1 "stopped minting" "$BASE/m1/server.log")"
    log "   m1 kept worker id $k1 and mints"
}

for r in ${LEASE_CLOCK_ONLY:-A B}; do
    case "$r" in
        A) round A 0 3600 ;;
        B) round B 3600 0 ;;
        *) die "unknown round $r" ;;
    esac
done
[ ${#NAMES_FAILED[@]} = 0 ] || die "lease_clock: rounds ${NAMES_FAILED[*]}: one name for two clocks"
log "lease_clock: passed in $((SECONDS - T0)) s"
