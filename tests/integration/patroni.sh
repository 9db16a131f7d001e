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
# Every process started is stopped by PID.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
if [ "$PG_MAJOR" != 15 ]; then
    skip_test "runs on 15"
fi
apt_ensure patroni etcd-server
FT=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1
[ -f "$FT" ] || die "libfaketime is missing (apt package libfaketime)"
HERE="$ROOT/tests/integration"
BASE=$(state_dir "$ROOT/.run/it-patroni" it-patroni)
PORT0=${SNOWFLAKE_IT_PATRONI_PORT:-55960}     # members' PostgreSQL: +0..+2; REST: +10..+12; etcd: +20, +21
MEMBERS=(m1 m2 m3)
declare -A PATRONI_PID=()
ETCD_PID="" CLIENT_PIDS=()
pg_port() { echo $((PORT0 + $1)); }
rest_port() { echo $((PORT0 + 10 + $1)); }
ETCD_CLIENT=$((PORT0 + 20)) ETCD_PEER=$((PORT0 + 21))

stop_all() {
    local m pid
    touch "$BASE/stop"
    for pid in "${CLIENT_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for m in "${!PATRONI_PID[@]}"; do kill "${PATRONI_PID[$m]}" 2>/dev/null || true; done
    for m in "${!PATRONI_PID[@]}"; do
        for _ in $(seq 1 100); do kill -0 "${PATRONI_PID[$m]}" 2>/dev/null || break; sleep 0.1; done
    done
    for m in "${MEMBERS[@]}"; do    # a postmaster whose Patroni was killed
        if [ -f "$BASE/$m/data/postmaster.pid" ]; then
            pid=$(head -1 "$BASE/$m/data/postmaster.pid")
            kill -QUIT "$pid" 2>/dev/null || true
        fi
    done
    [ -z "$ETCD_PID" ] || kill "$ETCD_PID" 2>/dev/null || true
}
trap stop_all EXIT
rm -rf "${BASE:?}"/m? "${BASE:?}/etcd" "${BASE:?}/bin" "${BASE:?}"/*.ids "${BASE:?}/stop" "${BASE:?}"/*.log
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

etcd --name it --data-dir "$BASE/etcd" --enable-v2 \
    --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
    --initial-cluster "it=http://127.0.0.1:$ETCD_PEER" >"$BASE/etcd.log" 2>&1 &
ETCD_PID=$!

config() {  # config INDEX: the member's own settings, then the shared fragment
    local i=$1 m=${MEMBERS[$1]}
    cat <<CFG
scope: snowflake-it
name: $m
log: {level: INFO}
restapi: {listen: '127.0.0.1:$(rest_port "$i")', connect_address: '127.0.0.1:$(rest_port "$i")'}
etcd: {host: '127.0.0.1:$ETCD_CLIENT'}
postgresql:
  listen: '127.0.0.1:$(pg_port "$i")'
  connect_address: '127.0.0.1:$(pg_port "$i")'
  data_dir: $BASE/$m/data
  bin_dir: $BASE/bin
  pgpass: $BASE/$m/pgpass
  pg_hba: ['local all all trust', 'host all all 127.0.0.1/32 trust', 'host replication all 127.0.0.1/32 trust']
  authentication:
    superuser: {username: postgres, password: postgres}
    replication: {username: postgres, password: postgres}
    rewind: {username: postgres, password: postgres}
  parameters: {unix_socket_directories: '$BASE/$m'}
CFG
    cat "$HERE/patroni_snowflake.yml"
}
start_member() {  # records Patroni's own PID (runuser forks; kill -9 of it would not reach Patroni)
    local i=$1 m=${MEMBERS[$1]}
    rm -f "$BASE/$m.pid"
    runuser -u postgres -- bash -c "echo \$\$ > '$BASE/$m.pid'; exec patroni '$BASE/$m.yml'" >>"$BASE/$m.log" 2>&1 &
    for _ in $(seq 1 50); do [ -s "$BASE/$m.pid" ] && break; sleep 0.1; done
    PATRONI_PID[$m]=$(cat "$BASE/$m.pid")
}
for i in 0 1 2; do
    m=${MEMBERS[$i]}
    mkdir -p "$BASE/$m"
    echo "+0" > "$BASE/$m/faketime"
    config "$i" > "$BASE/$m.yml"
done
chown -R postgres:postgres "$BASE"
chmod 644 "$BASE"/m?/faketime
ctl() { runuser -u postgres -- patronictl -c "$BASE/m1.yml" "$@"; }
members() {  # "NAME ROLE STATE" per line
    ctl list -f json 2>/dev/null | /usr/bin/python3 -c \
        'import json, sys; [print(m["Member"], m["Role"].replace(" ", "_"), m["State"]) for m in json.load(sys.stdin)]'
}
leader() { members | awk '$2 == "Leader" && $3 == "running" {print $1}'; }
wait_for() {  # wait_for WHAT SECONDS COMMAND...
    local what=$1 secs=$2; shift 2
    for _ in $(seq 1 $((secs * 5))); do "$@" && return 0; sleep 0.2; done
    members >&2 || true; tail -n 5 "$BASE"/m?.log >&2
    curl -s "http://127.0.0.1:$ETCD_CLIENT/v2/keys/service/snowflake-it/?recursive=true" >&2 || true
    die "patroni: timed out waiting for $what"
}
index_of() { local i; for i in 0 1 2; do [ "${MEMBERS[$i]}" = "$1" ] && echo "$i"; done; }
is_leader() { [ "$(leader)" = "$1" ]; }
new_leader_not() { local l; l=$(leader); [ -n "$l" ] && [ "$l" != "$1" ]; }
sync_standby() { members | grep -q "Sync_Standby"; }
healthy() {  # the leader streams to both other members, one of them synchronous ($1: "sync" or "async")
    local l port want; l=$(leader); [ -n "$l" ] || return 1
    # In synchronous mode, Patroni promotes only the member its /sync key
    # names: wait until it names one.
    if [ "${1:-sync}" = sync ]; then sync_standby || return 1; fi
    port=$(pg_port "$(index_of "$l")")
    want="2 1"; [ "${1:-sync}" = sync ] || want="2 0"
    [ "$(pq_at "$port" -F ' ' -c "SELECT count(*) FILTER (WHERE state = 'streaming'),
                                         count(*) FILTER (WHERE sync_state = 'sync') FROM pg_stat_replication" 2>/dev/null)" = "$want" ]
}
wait_for "etcd" 30 curl -fsS "http://127.0.0.1:$ETCD_CLIENT/version" -o /dev/null
start_member 0
wait_for "m1 to lead" 90 is_leader m1
start_member 1; start_member 2
pq_at() { local port=$1; shift; "$(pgbin)/psql" -X -q -At -h 127.0.0.1 -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"; }
wait_for "two replicas, one synchronous" 120 healthy sync
P=$(pg_port 0)
pq_at "$P" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
    -c "CREATE TABLE ids (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), via int, at timestamptz DEFAULT clock_timestamp())"
log "patroni: etcd and 3 members up (m1 leads, synchronous mode), worker_id 17 from Patroni's configuration on each"

DSN="host=127.0.0.1,127.0.0.1,127.0.0.1 port=$(pg_port 0),$(pg_port 1),$(pg_port 2) user=postgres dbname=postgres target_session_attrs=read-write"
for c in 1 2; do
    /usr/bin/python3 "$HERE/patroni_client.py" "$DSN" "$BASE/client$c.ids" "$BASE/stop" &
    CLIENT_PIDS+=($!)
done
received_max() { cat "$BASE"/client?.ids 2>/dev/null | sort -n | tail -1; }
received_count() { cat "$BASE"/client?.ids 2>/dev/null | wc -l; }
grows() { local before=$1; [ "$(received_count)" -gt "$((before + 20))" ]; }

# check EVENT: on the current leader, a new ID is above everything received
# and committed, and every received ID is in the table (synchronous mode).
check() {
    local event=$1 l port rmax cmax next missing n
    l=$(leader); port=$(pg_port "$(index_of "$l")")
    rmax=$(received_max); n=$(received_count)
    cmax=$(pq_at "$port" -c "SELECT max(id) FROM ids")
    next=$(pq_at "$port" -c "SELECT snowflake_nextval()")
    cat "$BASE"/client?.ids | sort -u > "$BASE/received.ids"
    pq_at "$port" -c "SELECT id FROM ids ORDER BY id" | sort -u > "$BASE/table.ids"
    missing=$(comm -23 "$BASE/received.ids" "$BASE/table.ids" | wc -l)
    log "patroni: $event: leader $l; $n IDs received; new ID $next, received max $rmax, committed max $cmax; $missing received IDs missing"
    [ "$next" -gt "$rmax" ] && [ "$next" -gt "$cmax" ] || die "patroni: after $event an ID ($next) is not above every earlier one ($rmax received, $cmax committed)"
    [ "$missing" = 0 ] || die "patroni: after $event $missing acknowledged IDs are missing on the new primary"
}
wait_for "the clients" 30 grows 0

# 1. Switchover to the synchronous standby (in synchronous mode, Patroni
#    switches over only to it).
n=$(received_count)
wait_for "Patroni to name a synchronous standby" 60 sync_standby
target=$(members | awk '$2 == "Sync_Standby" {print $1; exit}')
ctl switchover --leader m1 --candidate "$target" --force >>"$BASE/patronictl.log" 2>&1 \
    || { cat "$BASE/patronictl.log" >&2; die "patroni: patronictl switchover failed"; }
wait_for "$target to lead" 60 is_leader "$target"
wait_for "the clients after the switchover" 60 grows "$n"
check "switchover m1 -> $target"
wait_for "m1 to follow $target, and a synchronous standby" 120 healthy sync

# 2. Failover with the clocks of the other members 1 h behind: a node lost.
old=$(leader)
for m in "${MEMBERS[@]}"; do [ "$m" = "$old" ] || echo "${PATRONI_SKEW:--1h}" > "$BASE/$m/faketime"; done
n=$(received_count)
members > "$BASE/before-failover.members"
curl -s "http://127.0.0.1:$ETCD_CLIENT/v2/keys/service/snowflake-it/?recursive=true" > "$BASE/before-failover.dcs" || true
kill -9 "${PATRONI_PID[$old]}"; unset "PATRONI_PID[$old]"
kill -9 "$(head -1 "$BASE/$old/data/postmaster.pid")"
wait_for "a new leader" 90 new_leader_not "$old"
wait_for "the clients after the failover" 60 grows "$n"
check "failover from $old (killed) to $(leader), its clock 1 h behind"

# 3. The old leader rejoins through Patroni's pg_rewind.
echo "+0" > "$BASE/$old/faketime"
start_member "$(index_of "$old")"
wait_for "$old to rejoin" 120 healthy sync
grep -qi "rewind" "$BASE/$old.log" || { tail -20 "$BASE/$old.log" >&2; die "patroni: $old rejoined without pg_rewind"; }
rewound=$(pq_at "$(pg_port "$(index_of "$old")")" -c "SELECT pg_is_in_recovery()")
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
kill -9 "${PATRONI_PID[$old]}"; unset "PATRONI_PID[$old]"
kill -9 "$(head -1 "$BASE/$old/data/postmaster.pid")"
wait_for "a new leader (asynchronous)" 90 new_leader_not "$old"
l=$(leader); port=$(pg_port "$(index_of "$l")")
first=$(pq_at "$port" -c "SELECT snowflake_nextval()")
cat "$BASE"/client?.ids | sort -u > "$BASE/received.ids"
pq_at "$port" -c "SELECT id FROM ids ORDER BY id" | sort -u > "$BASE/table.ids"
lost=$(comm -23 "$BASE/received.ids" "$BASE/table.ids" | wc -l)
exposed=0   # bash compares 64-bit integers exactly (awk would use doubles)
while read -r id; do if (( id >= first )); then exposed=$((exposed + 1)); fi; done < "$BASE/received.ids"
log "patroni: asynchronous failover from $old to $l: $lost acknowledged commits missing, $exposed received IDs not below the new primary's first ID ($first); the exposure is the replication lag (docs/design.md)"
echo "$lost $exposed" > "$BASE/async.exposure"

log "patroni: ok"
trap - EXIT
stop_all
