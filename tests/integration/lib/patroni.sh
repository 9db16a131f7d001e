# shellcheck shell=bash
# The Patroni cluster that tests/integration/patroni.sh and
# patroni_registry.sh share (PostgreSQL 15 only; Debian's patroni 3.0 and
# etcd 3.4): a local etcd and three Patroni members m1..m3 on 127.0.0.1,
# each with its socket in its own directory. Every process started here is
# stopped by PID. Sourcing this file sources scripts/lib.sh, skips the
# script on another major and installs patroni and etcd. It lives below
# tests/integration/lib/ so that scripts/test.sh, which runs every
# tests/integration/*.sh, does not run it as a script of its own.
#   patroni_state NAME PORT0 SCOPE: the state directory $BASE
#       (.run/NAME), member I's PostgreSQL on PORT0 + I, its REST API on
#       PORT0 + 10 + I, etcd on PORT0 + 20 (clients) and + 21 (peers),
#       Patroni scope SCOPE.
#   patroni_clean [PATH...]: stop_all at exit; an earlier run's members,
#       etcd, logs and stop file removed, with the PATHs.
#   member_config I BIN_DIR: the start of member I's configuration, ending
#       inside postgresql.parameters (append parameters at 4 spaces, then
#       bootstrap:); write_configs FUNCTION: $BASE/mN.yml from FUNCTION I
#       for each member, and $BASE owned by postgres.
#   start_cluster: etcd (start_etcd), m1 until it leads, then m2 and m3 until the
#       leader streams to both, one synchronously.
#   start_member I; kill_member M (a node lost: kill -9 of its Patroni and
#       postmaster; EVENT_T when); switchover (from the leader to the
#       synchronous standby, until it leads) and failover M (M lost, until
#       another member leads): each sets OLD, NEW, and EVENT_T when it
#       began.
#   ctl ARGS, members, leader, is_leader M, new_leader_not M, sync_standby,
#   healthy sync|async, index_of M, pg_port I, rest_port I, member_ports,
#   pq_member M ARGS (psql on M's socket), dcs_dump, wait_for WHAT SECONDS
#   COMMAND...: the cluster, seen through Patroni and PostgreSQL.
#   CLIENT_PIDS: the script's clients, killed at exit; stop_own: a function
#       the script may define, run at exit after the clients are killed and
#       before the members stop.
#   finish: stop everything now, not at exit.
source "$(dirname "${BASH_SOURCE[0]}")/../../../scripts/lib.sh"
if [ "$PG_MAJOR" != 15 ]; then
    skip_test "runs on 15"
fi
apt_ensure patroni etcd-server
TEST=$(basename "$0" .sh)           # the prefix of the messages below
MEMBERS=(m1 m2 m3)
declare -A PATRONI_PID=()
ETCD_PID="" CLIENT_PIDS=()
KILLED=" "                          # members killed on purpose: their postmaster.pid is stale
OLD="" NEW="" EVENT_T=""

patroni_state() {
    BASE=$(state_dir "$ROOT/.run/$1" "$1")
    PORT0=$2 SCOPE=$3
    ETCD_CLIENT=$((PORT0 + 20)) ETCD_PEER=$((PORT0 + 21))
}
pg_port() { echo $((PORT0 + $1)); }
rest_port() { echo $((PORT0 + 10 + $1)); }
member_ports() { echo "$(pg_port 0),$(pg_port 1),$(pg_port 2)"; }
index_of() { local i; for i in 0 1 2; do [ "${MEMBERS[$i]}" = "$1" ] && echo "$i"; done; }

stop_all() {
    local m pid
    touch "$BASE/stop"
    for pid in "${CLIENT_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    if declare -F stop_own >/dev/null; then stop_own; fi
    for m in "${!PATRONI_PID[@]}"; do kill "${PATRONI_PID[$m]}" 2>/dev/null || true; done
    for m in "${!PATRONI_PID[@]}"; do
        for _ in $(seq 1 300); do kill -0 "${PATRONI_PID[$m]}" 2>/dev/null || break; sleep 0.1; done
    done
    for m in "${MEMBERS[@]}"; do    # a postmaster whose Patroni did not stop it
        [[ "$KILLED" != *" $m "* ]] || continue
        if [ -f "$BASE/$m/data/postmaster.pid" ]; then
            pid=$(head -1 "$BASE/$m/data/postmaster.pid")
            if [ -n "$pid" ] && ps -o args= -p "$pid" 2>/dev/null | grep -q postgres; then
                kill -QUIT "$pid" 2>/dev/null || true
            fi
        fi
    done
    [ -z "$ETCD_PID" ] || kill "$ETCD_PID" 2>/dev/null || true
}
finish() { trap - EXIT; stop_all; }
patroni_clean() {
    trap stop_all EXIT
    rm -rf "${BASE:?}"/m? "${BASE:?}/etcd" "${BASE:?}/stop" "${BASE:?}"/*.log "$@"
    mkdir -p "$BASE"
}

member_config() {
    local i=$1 m=${MEMBERS[$1]}
    cat <<CFG
scope: $SCOPE
name: $m
log: {level: INFO}
restapi: {listen: '127.0.0.1:$(rest_port "$i")', connect_address: '127.0.0.1:$(rest_port "$i")'}
etcd: {host: '127.0.0.1:$ETCD_CLIENT'}
postgresql:
  listen: '127.0.0.1:$(pg_port "$i")'
  connect_address: '127.0.0.1:$(pg_port "$i")'
  data_dir: $BASE/$m/data
  bin_dir: $2
  pgpass: $BASE/$m/pgpass
  pg_hba: ['local all all trust', 'host all all 127.0.0.1/32 trust', 'host replication all 127.0.0.1/32 trust']
  authentication:
    superuser: {username: postgres, password: postgres}
    replication: {username: postgres, password: postgres}
    rewind: {username: postgres, password: postgres}
  parameters:
    unix_socket_directories: '$BASE/$m'
CFG
}
write_configs() {
    local i
    for i in 0 1 2; do
        mkdir -p "$BASE/${MEMBERS[$i]}"
        "$1" "$i" > "$BASE/${MEMBERS[$i]}.yml"
    done
    chown -R postgres:postgres "$BASE"
}

start_member() {  # records Patroni's own PID (runuser forks; kill -9 of it would not reach Patroni)
    local i=$1 m=${MEMBERS[$1]}
    rm -f "$BASE/$m.pid"
    runuser -u postgres -- bash -c "echo \$\$ > '$BASE/$m.pid'; exec patroni '$BASE/$m.yml'" >>"$BASE/$m.log" 2>&1 &
    poll_until 30 test -s "$BASE/$m.pid" || die "$TEST: Patroni $m wrote no PID within 30 s"
    PATRONI_PID[$m]=$(cat "$BASE/$m.pid")
    KILLED=${KILLED/ $m / }
}
# EVENT_T is read by the scripts that source this file:
# shellcheck disable=SC2034
kill_member() {
    local m=$1 pm
    pm=$(head -1 "$BASE/$m/data/postmaster.pid")
    EVENT_T=$(date +%s.%N)
    kill -9 "${PATRONI_PID[$m]}"; unset "PATRONI_PID[$m]"
    kill -9 "$pm"; KILLED+="$m "
}

# patronictl retries an unreachable etcd for ever: every call is bounded.
ctl() { timeout -k 5 60 runuser -u postgres -- patronictl -c "$BASE/m1.yml" "$@"; }
members() {  # "NAME ROLE STATE" per line
    ctl list -f json 2>/dev/null | /usr/bin/python3 -c \
        'import json, sys; [print(m["Member"], m["Role"].replace(" ", "_"), m["State"]) for m in json.load(sys.stdin)]'
}
leader() { members | awk '$2 == "Leader" && $3 == "running" {print $1}'; }
is_leader() { [ "$(leader)" = "$1" ]; }
new_leader_not() { local l; l=$(leader); [ -n "$l" ] && [ "$l" != "$1" ]; }
sync_standby() { members | grep -q "Sync_Standby"; }
dcs_dump() { curl -s --max-time 10 "http://127.0.0.1:$ETCD_CLIENT/v2/keys/service/$SCOPE/?recursive=true"; }
# pq_member MEMBER [psql args...]: psql as postgres on MEMBER's socket.
pq_member() {
    local m=$1; shift
    timeout 60 "$(pgbin)/psql" -X -q -At -F ' ' -h "$BASE/$m" -p "$(pg_port "$(index_of "$m")")" -U postgres \
        -v ON_ERROR_STOP=1 "$@"
}
# wait_for WHAT SECONDS COMMAND...: poll COMMAND; on time-out, show the
# cluster and fail.
wait_for() {
    local what=$1 secs=$2; shift 2
    poll_until "$secs" "$@" && return 0
    members >&2 || true; tail -n 5 "$BASE"/m?.log >&2 || true
    dcs_dump >&2 || true
    die "$TEST: timed out after $secs s waiting for $what"
}
# healthy sync|async [STANDBYS]: the leader streams to STANDBYS members
# (default 2, both others; 1 once a member was killed), one of them
# synchronous (async: none); in synchronous mode Patroni promotes only
# the member its /sync key names, so wait until it names one.
healthy() {
    local l n=${2:-2} want; l=$(leader); [ -n "$l" ] || return 1
    want="$n 0"
    if [ "$1" = sync ]; then sync_standby || return 1; want="$n 1"; fi
    [ "$(pq_member "$l" -d postgres -c "SELECT count(*) FILTER (WHERE state = 'streaming'),
                                               count(*) FILTER (WHERE sync_state = 'sync') FROM pg_stat_replication" 2>/dev/null)" = "$want" ]
}

# etcd_up: etcd answers; etcd_gone: its process ended.
etcd_up() { curl -fs --max-time 5 "http://127.0.0.1:$ETCD_CLIENT/version" -o /dev/null; }
etcd_gone() { ! kill -0 "$ETCD_PID" 2>/dev/null; }
etcd_settled() { etcd_up || etcd_gone; }
# start_etcd: etcd until it answers. A port of ours still held by a
# closing connection (the kernel's ephemeral range) ends etcd with "address
# already in use": it is started again, three times at most; any other
# exit fails the script with etcd's log, at once.
start_etcd() {
    local try
    for try in 1 2 3; do
        rm -rf "${BASE:?}/etcd"
        etcd --name it --data-dir "$BASE/etcd" --enable-v2 \
            --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT" \
            --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
            --initial-cluster "it=http://127.0.0.1:$ETCD_PEER" >"$BASE/etcd.log" 2>&1 &
        ETCD_PID=$!
        poll_until 60 etcd_settled || die "$TEST: etcd did not answer within 60 s: $(tail -n 3 "$BASE/etcd.log")"
        etcd_up && return 0
        grep -q "address already in use" "$BASE/etcd.log" \
            || die "$TEST: etcd exited: $(tail -n 3 "$BASE/etcd.log")"
        log "$TEST: etcd could not bind its ports (try $try of 3): $(grep -m1 "address already in use" "$BASE/etcd.log")"
        sleep 2
    done
    die "$TEST: etcd could not bind 127.0.0.1:$ETCD_CLIENT and :$ETCD_PEER in 3 tries: $(tail -n 1 "$BASE/etcd.log")"
}
start_cluster() {
    start_etcd
    start_member 0
    wait_for "m1 to lead" 120 is_leader m1
    start_member 1; start_member 2
    wait_for "two replicas, one synchronous" 180 healthy sync
}
# In synchronous mode, Patroni switches over only to the synchronous standby.
# shellcheck disable=SC2034
switchover() {
    wait_for "Patroni to name a synchronous standby" 60 sync_standby
    OLD=$(leader)
    NEW=$(members | awk '$2 == "Sync_Standby" {print $1; exit}')
    EVENT_T=$(date +%s.%N)
    ctl switchover --leader "$OLD" --candidate "$NEW" --force >>"$BASE/patronictl.log" 2>&1 \
        || { cat "$BASE/patronictl.log" >&2; die "$TEST: patronictl switchover failed"; }
    wait_for "$NEW to lead after the switchover" 120 is_leader "$NEW"
}
# failover MEMBER: MEMBER lost (kill_member), until another member leads;
# OLD and NEW, and EVENT_T when it was killed.
failover() {
    OLD=$1
    kill_member "$OLD"
    wait_for "a new leader after $OLD was killed" 120 new_leader_not "$OLD"
    NEW=$(leader)
}
