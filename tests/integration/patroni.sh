#!/usr/bin/env bash
# Patroni (PostgreSQL 15 only; Debian's patroni 3.0 and etcd 3.4): a local
# etcd and three Patroni members, each with the library preloaded and the
# same worker_id through Patroni's configuration (patroni_snowflake.yml,
# shown in docs/operations.md). Every member's postgres runs under
# libfaketime with a clock file of its own. Two clients insert through a
# connection string that follows the primary, recording every ID they
# receive (patroni_client.py). In synchronous mode:
#  1. a switchover (patronictl switchover);
#  2. a failover: kill -9 of the leader's Patroni and postmaster (a node
#     lost), the other members' clocks 1 h behind; Patroni promotes one;
#  3. the old leader rejoins through Patroni's pg_rewind;
# after each, every ID the new primary mints is above every ID committed
# and every ID a client received, and every received ID is in the table.
#  4. Asynchronous mode (synchronous_mode: false), the same failover:
#     what it exposes is measured and reported (acknowledged commits
#     missing on the new primary, received IDs not below its first new ID),
#     not asserted.
# Every process started is stopped by PID. The cluster's set-up, shared
# with patroni_registry.sh, is in lib/patroni.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/patroni.sh"
FT=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1
[ -f "$FT" ] || die "libfaketime is missing (apt package libfaketime)"
HERE="$ROOT/tests/integration"
# members' PostgreSQL: +0..+2; REST: +10..+12; etcd: +20, +21
patroni_state it-patroni "${SNOWFLAKE_IT_PATRONI_PORT:-25960}" snowflake-it
patroni_clean "${BASE:?}/bin" "${BASE:?}"/*.ids
mkdir -p "$BASE/bin"

# postgres under libfaketime, with a clock file per data directory; every
# other program as it is.
for f in /usr/lib/postgresql/15/bin/*; do ln -s "$f" "$BASE/bin/"; done
rm "$BASE/bin/postgres"
cat > "$BASE/bin/postgres" <<WRAP
#!/bin/sh
# The clock of the member whose data directory is named after -D.
dir=""; prev=""
for a in "\$@"; do [ "\$prev" = "-D" ] && dir="\$a"; prev="\$a"; done
clock="\${dir%/data}/faketime"
[ -n "\$dir" ] && [ -f "\$clock" ] || exec /usr/lib/postgresql/15/bin/postgres "\$@"
LD_PRELOAD=$FT FAKETIME_TIMESTAMP_FILE="\$clock" FAKETIME_NO_CACHE=1 FAKETIME_DONT_FAKE_MONOTONIC=1 \\
    exec /usr/lib/postgresql/15/bin/postgres "\$@"
WRAP
chmod 755 "$BASE/bin/postgres"

config() {  # config INDEX: the member's own settings, then the shared fragment
    member_config "$1" "$BASE/bin"
    cat "$HERE/patroni_snowflake.yml"
}
for m in "${MEMBERS[@]}"; do mkdir -p "$BASE/$m"; echo "+0" > "$BASE/$m/faketime"; done
write_configs config
chmod 644 "$BASE"/m?/faketime
start_cluster
pq_member m1 -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
    -c "CREATE TABLE ids (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), via int, at timestamptz DEFAULT clock_timestamp())"
log "patroni: etcd and 3 members up (m1 leads, synchronous mode), worker_id 17 from Patroni's configuration on each"

DSN="host=127.0.0.1,127.0.0.1,127.0.0.1 port=$(member_ports) user=postgres dbname=postgres target_session_attrs=read-write"
for c in 1 2; do
    /usr/bin/python3 "$HERE/patroni_client.py" "$DSN" "$BASE/client$c.ids" "$BASE/stop" &
    CLIENT_PIDS+=($!)
done
received_max() { cat "$BASE"/client?.ids 2>/dev/null | sort -n | tail -1; }
received_count() { cat "$BASE"/client?.ids 2>/dev/null | wc -l; }
grows() { local before=$1; [ "$(received_count)" -gt "$((before + 20))" ]; }
# missing_on MEMBER: MISSING, how many IDs the clients received that
# MEMBER's table lacks (the IDs in $BASE/received.ids and table.ids).
missing_on() {
    cat "$BASE"/client?.ids | sort -u > "$BASE/received.ids"
    pq_member "$1" -c "SELECT id FROM ids ORDER BY id" | sort -u > "$BASE/table.ids"
    MISSING=$(comm -23 "$BASE/received.ids" "$BASE/table.ids" | wc -l)
}

# check EVENT: on the current leader, a new ID is above everything received
# and committed, and every received ID is in the table (synchronous mode).
check() {
    local event=$1 l rmax cmax next n
    l=$(leader)
    rmax=$(received_max); n=$(received_count)
    cmax=$(pq_member "$l" -c "SELECT max(id) FROM ids")
    next=$(pq_member "$l" -c "SELECT snowflake_nextval()")
    missing_on "$l"
    log "patroni: $event: leader $l; $n IDs received; new ID $next, received max $rmax, committed max $cmax; $MISSING received IDs missing"
    [ "$next" -gt "$rmax" ] && [ "$next" -gt "$cmax" ] || die "patroni: after $event an ID ($next) is not above every earlier one ($rmax received, $cmax committed)"
    [ "$MISSING" = 0 ] || die "patroni: after $event $MISSING acknowledged IDs are missing on the new primary"
}
wait_for "the clients" 30 grows 0

# 1. Switchover to the synchronous standby.
n=$(received_count)
switchover
wait_for "the clients after the switchover" 60 grows "$n"
check "switchover $OLD -> $NEW"
wait_for "$OLD to follow $NEW, and a synchronous standby" 120 healthy sync

# 2. Failover with the clocks of the other members 1 h behind: a node lost.
old=$(leader)
for m in "${MEMBERS[@]}"; do [ "$m" = "$old" ] || echo "${PATRONI_SKEW:--1h}" > "$BASE/$m/faketime"; done
n=$(received_count)
members > "$BASE/before-failover.members"
dcs_dump > "$BASE/before-failover.dcs" || true
failover "$old"
wait_for "the clients after the failover" 60 grows "$n"
check "failover from $old (killed) to $NEW, its clock 1 h behind"

# 3. The old leader rejoins through Patroni's pg_rewind.
echo "+0" > "$BASE/$old/faketime"
start_member "$(index_of "$old")"
wait_for "$old to rejoin" 120 healthy sync
grep -qi "rewind" "$BASE/$old.log" || { tail -20 "$BASE/$old.log" >&2; die "patroni: $old rejoined without pg_rewind"; }
rewound=$(pq_member "$old" -c "SELECT pg_is_in_recovery()")
[ "$rewound" = t ] || die "patroni: $old is not a standby after rejoining"
n=$(received_count)
wait_for "the clients after the rejoin" 30 grows "$n"
check "$old rejoined through pg_rewind"

# 4. Asynchronous mode: the same failover, measured.
ctl edit-config --force -s synchronous_mode=false >/dev/null
wait_for "asynchronous replication" 60 healthy async
n=$(received_count)
wait_for "the clients in asynchronous mode" 30 grows "$n"
old=$(leader)
for m in "${MEMBERS[@]}"; do [ "$m" = "$old" ] || echo "-1h" > "$BASE/$m/faketime"; done
n=$(received_count)
failover "$old"
first=$(pq_member "$NEW" -c "SELECT snowflake_nextval()")
missing_on "$NEW"
exposed=0   # bash compares 64-bit integers exactly (awk would use doubles)
while read -r id; do if (( id >= first )); then exposed=$((exposed + 1)); fi; done < "$BASE/received.ids"
log "patroni: asynchronous failover from $old to $NEW: $MISSING acknowledged commits missing, $exposed received IDs not below the new primary's first ID ($first); the exposure is the replication lag (docs/design.md)"
echo "$MISSING $exposed" > "$BASE/async.exposure"

log "patroni: ok"
finish
