#!/usr/bin/env bash
# The worker-id registry under an HA manager (issue 47, item 6, "The
# registry under an HA manager"; docs/worker-ids.md, "The registry under
# Patroni"), on PostgreSQL 15 only: Debian's patroni 3.0 and etcd 3.4, a
# local etcd and three Patroni members m1..m3 in synchronous mode
# (synchronous_mode: true, synchronous_mode_strict: true; ttl 10,
# loop_wait 2 as docs/high-availability.md times it). The members do not
# preload the library: on the primary, database "registry" gets the
# extension and snowflake_registry_init(), a group role snowflake_lease
# with the documented GRANTs and a login role per minting server (all
# replicated). Two minting servers s1 and s2 (plain clusters, the library
# preloaded, worker_id_source = 'registry', lease_ttl = '30s', the value
# docs/worker-ids.md gives for that Patroni timing) lease their worker ids
# through one connection string naming the three members' sockets with
# target_session_attrs=read-write. A client per server inserts into its
# table ids (id DEFAULT snowflake_nextval(), at clock_timestamp()) all the
# time, one transaction per statement, its errors tolerated and counted.
# After both lease and mint:
#  1. a switchover of the registry (patronictl switchover to the
#     synchronous standby);
#  2. a failover: kill -9 of the leader's Patroni and of its postmaster.
# After each, asserted: each server mints again without a restart (the
# same postmaster PID, no crash restart in its log), with a row minted
# more than a lease TTL after the event began, so under a lease renewed
# (or claimed) on the new primary, which shows the server's row held and
# renewed after the event; all within 180 s of the event.
# At the end, asserted: every ID distinct across s1 and s2; for every
# worker id both used, the time ranges in which s1 and s2 minted under it
# (min(at)..max(at)) are disjoint; once the new primary has a
# synchronous standby again, each server holds a lease
# (snowflake_stats().lease_worker_id not null; one that ran out while the
# registry could not commit must come back), on distinct ids; neither
# server's lease worker ever exited.
# Reported, not asserted: how long minting paused on each server around
# each event (the longest gap between its rows), the client errors, whether
# a server kept its worker id, snowflake_stats().registry_errors, the
# lease WARNINGs/ERRORs in the servers' logs, and whether a registry member
# cancelled a wait for synchronous replication (an acknowledged commit no
# standby has).
# Every process started is stopped on exit, by PID. The cluster's set-up,
# shared with patroni.sh, is in lib/patroni.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/patroni.sh"
T0=$(date +%s)
# Registry members' PostgreSQL: +0..+2; their REST API: +10..+12; etcd:
# +20, +21; the minting servers (Unix sockets only): +30, +31.
patroni_state it-patroni-registry "${SNOWFLAKE_IT_PATRONI_REGISTRY_PORT:-26400}" snowflake-registry-it
SERVERS=(s1 s2)
TTL_S=30                 # snowflake_id.lease_ttl of the minting servers
BOUND_S=180              # how long after an event each server must mint under a renewed lease
declare -A SERVER_PORT=() PM_PID=()
SERVER_PORT[s1]=$((PORT0 + 30)) SERVER_PORT[s2]=$((PORT0 + 31))
stop_own() { local s; for s in "${SERVERS[@]}"; do cluster_stop "$BASE/$s"; done; }
stop_own
patroni_clean "${BASE:?}"/s? "${BASE:?}"/*.errors
on_exit() { local rc=$?; if [ "$rc" != 0 ]; then diagnose || true; fi; stop_all; }
trap on_exit EXIT

# --- the registry: etcd and three Patroni members ------------------------
config() {  # config INDEX: a member's Patroni configuration
    member_config "$1" /usr/lib/postgresql/15/bin
    cat <<CFG
    logging_collector: 'on'
    log_directory: '$BASE/${MEMBERS[$1]}/log'
    log_filename: 'postgresql.log'
    log_line_prefix: '%m [%p] %u@%d '
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 2
    retry_timeout: 5
    # docs/worker-ids.md: no committed claim or renewal may be lost by a
    # failover, and none may commit on the primary alone.
    synchronous_mode: true
    synchronous_mode_strict: true
    postgresql:
      use_pg_rewind: true
      parameters:
        wal_log_hints: 'on'
CFG
}
for m in "${MEMBERS[@]}"; do mkdir -p "$BASE/$m/log"; done
write_configs config
start_cluster
ctl show-config 2>/dev/null | grep -q "synchronous_mode_strict: true" \
    || die "patroni_registry: the registry cluster is not in strict synchronous mode: $(ctl show-config 2>&1)"

LEASE_FUNCS="snowflake_registry_claim(uuid,text,integer,text,text,integer,integer,integer,bigint,integer,bigint),
             snowflake_registry_renew(integer,uuid,bigint,integer,bigint),
             snowflake_registry_release(integer,uuid,bigint)"
pq_member m1 -d postgres -c "CREATE DATABASE registry" -c "CREATE ROLE snowflake_lease NOLOGIN" \
    -c "CREATE ROLE lease_s1 LOGIN CONNECTION LIMIT 3 IN ROLE snowflake_lease" \
    -c "CREATE ROLE lease_s2 LOGIN CONNECTION LIMIT 3 IN ROLE snowflake_lease"
n=$(pq_member m1 -d registry -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
    -c "SELECT snowflake_registry_init()" \
    -c "GRANT EXECUTE ON FUNCTION $LEASE_FUNCS TO snowflake_lease" \
    -c "GRANT USAGE ON SCHEMA public TO snowflake_lease")
[ "$n" = 1024 ] || die "patroni_registry: snowflake_registry_init() returned '$n', expected 1024 (one row per id)"
log "patroni_registry: etcd and 3 Patroni members up (m1 leads, synchronous_mode_strict), registry initialised"

# --- the minting servers ---------------------------------------------------
hosts="$BASE/m1,$BASE/m2,$BASE/m3" ports="$(member_ports)"
for s in "${SERVERS[@]}"; do
    mkdir -p "$BASE/$s"; chown postgres:postgres "$BASE/$s"
    cluster_init "$BASE/$s" "${SERVER_PORT[$s]}" "shared_preload_libraries = 'snowflake_id'" \
        "snowflake_id.worker_id_source = 'registry'" "snowflake_id.lease_ttl = '${TTL_S}s'" \
        "snowflake_id.registry = 'host=$hosts port=$ports dbname=registry user=lease_$s target_session_attrs=read-write'"
done
for s in "${SERVERS[@]}"; do
    cluster_start "$BASE/$s" || { tail -30 "$BASE/$s/server.log" >&2; die "patroni_registry: $s did not start"; }
    PM_PID[$s]=$(head -1 "$BASE/$s/data/postmaster.pid")
done
# q SERVER [psql args...]: psql as postgres on a minting server's socket.
q() {
    local s=$1; shift
    timeout 60 "$(pgbin)/psql" -X -q -At -F ' ' -h "$BASE/$s" -p "${SERVER_PORT[$s]}" -U postgres \
        -v ON_ERROR_STOP=1 "$@"
}
lease_of() { q "$1" -c "SELECT lease_worker_id FROM snowflake_stats()"; }
has_lease() { [ -n "$(lease_of "$1" 2>/dev/null)" ]; }
stats_of() {
    q "$1" -c "SELECT format('lease %s, %s registry errors, last: %s', coalesce(lease_worker_id::text, 'none'),
                             registry_errors, coalesce(registry_last_error, 'none')) FROM snowflake_stats()" 2>&1 || true
}
for s in "${SERVERS[@]}"; do
    q "$s" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
        -c "CREATE TABLE ids (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), at timestamptz NOT NULL DEFAULT clock_timestamp())"
    poll_until 120 has_lease "$s" || die "patroni_registry: $s leased no worker id within 120 s ($(stats_of "$s"))"
done
[ "$(lease_of s1)" != "$(lease_of s2)" ] || die "patroni_registry: s1 and s2 both lease worker id $(lease_of s1)"
log "patroni_registry: s1 leases worker id $(lease_of s1), s2 $(lease_of s2), from the registry's primary m1 (TTL ${TTL_S} s)"

# The clients: one INSERT per transaction, about 50 a second; every error
# is written to $BASE/SERVER.errors ("unix-time sqlstate message").
cat > "$BASE/client.py" <<'PY'
import sys, time
from pathlib import Path
import psycopg2
dsn, errors, stop = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
conn = None
with errors.open("a") as f:
    while not stop.exists():
        try:
            if conn is None:
                conn = psycopg2.connect(dsn, connect_timeout=5)
                conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("INSERT INTO ids DEFAULT VALUES")
            time.sleep(0.02)
        except psycopg2.Error as e:
            f.write(f"{time.time():.3f} {e.pgcode or '-'} {' '.join(str(e).split())[:300]}\n")
            f.flush()
            if conn is not None and conn.closed:
                conn = None
            time.sleep(0.05)
PY
for s in "${SERVERS[@]}"; do
    : > "$BASE/$s.errors"
    /usr/bin/python3 "$BASE/client.py" "host=$BASE/$s port=${SERVER_PORT[$s]} user=postgres dbname=postgres" \
        "$BASE/$s.errors" "$BASE/stop" &
    CLIENT_PIDS+=($!)
done
rows_of() { q "$1" -c "SELECT count(*) FROM ids"; }
has_rows() { [ "$(rows_of "$1" 2>/dev/null || echo 0)" -ge "$2" ]; }
for s in "${SERVERS[@]}"; do
    poll_until 60 has_rows "$s" 200 || die "patroni_registry: $s minted $(rows_of "$s") rows within 60 s, expected 200 ($(stats_of "$s"))"
done
log "patroni_registry: both servers mint ($(rows_of s1) and $(rows_of s2) rows)"

# --- the events -------------------------------------------------------------
# minted_after SERVER UNIX_TIME: SERVER has a row minted after that time.
minted_after() { [ "$(q "$1" -c "SELECT count(*) > 0 FROM ids WHERE at > to_timestamp($2)" 2>/dev/null)" = t ]; }
# renewed_on MEMBER SERVER UNIX_TIME: the registry on MEMBER shows SERVER's
# lease held and renewed (or claimed) after that time.
renewed_on() {
    [ "$(pq_member "$1" -d registry -c "SELECT count(*) > 0 FROM snowflake_registry_holders
                                         WHERE holder_port = ${SERVER_PORT[$2]} AND state = 'held'
                                           AND renewed_at > to_timestamp($3)" 2>/dev/null)" = t ]
}
# resumed SERVER UNIX_TIME MEMBER: SERVER minted more than a lease TTL
# after the event began (so under a lease renewed or claimed since), and
# the registry's new primary MEMBER shows its lease renewed since.
resumed() { minted_after "$1" "$(awk -v t="$2" -v d="$TTL_S" 'BEGIN {printf "%.3f", t + d}')" && renewed_on "$3" "$1" "$2"; }
# since UNIX_TIME: seconds since then, one decimal.
since() { awk -v t="$1" -v now="$(date +%s.%N)" 'BEGIN {printf "%.1f", now - t}'; }
# same_postmaster SERVER: no restart of any kind since its start, and its
# lease worker never ended (a worker that exits forgets its lease).
same_postmaster() {
    local s=$1 now
    now=$(head -1 "$BASE/$s/data/postmaster.pid")
    [ "$now" = "${PM_PID[$s]}" ] || die "patroni_registry: $s's postmaster was ${PM_PID[$s]}, now $now: expected no restart"
    if grep -Eq "reinitializing|terminated by signal" "$BASE/$s/server.log"; then
        die "patroni_registry: $s's log shows a crash restart: $(grep -Em1 "reinitializing|terminated by signal" "$BASE/$s/server.log")"
    fi
    if grep -Eq '"snowflake_id lease" .*exited' "$BASE/$s/server.log"; then
        die "patroni_registry: $s's lease worker ended: $(grep -Em1 '"snowflake_id lease" .*exited' "$BASE/$s/server.log")"
    fi
}
# lease_lines SERVER UNIX_TIME: the lease worker's lines of SERVER's log
# from that time on, and its ERRORs and FATALs (for a failure's report).
lease_lines() {
    local from
    from=$(date -d "@${2%.*}" '+%Y-%m-%d %H:%M:%S')
    awk -v from="$from" 'substr($0, 1, 19) >= from' "$BASE/$1/server.log" \
        | grep -E "snowflake_id lease|FATAL|PANIC|terminated|exited" | cut -c1-300 | tail -40 || true
}
# On a failure: what the servers' lease workers and the registry said.
diagnose() {
    local s
    for s in "${SERVERS[@]}"; do
        [ -f "$BASE/$s/server.log" ] || continue
        log "patroni_registry (failure report): $s: $(stats_of "$s"); its lease log:"
        lease_lines "$s" "$T0" >&2
    done
    log "patroni_registry (failure report): the registry's members:"
    members >&2 2>/dev/null || true
}
# report EVENT UNIX_START UNIX_END: per server, the longest gap between
# consecutive rows in [START - 1 s, END], its errors, and its worker id
# before and after.
REPORT=()
report() {
    local ev=$1 t1=$2 t2=$3 s gap errs before after kept
    for s in "${SERVERS[@]}"; do
        IFS='|' read -r gap before after < <(q "$s" -F '|' -c "
            WITH w AS (SELECT id, at, at - lag(at) OVER (ORDER BY at) AS gap FROM ids
                        WHERE at BETWEEN to_timestamp($t1) - interval '1 s' AND to_timestamp($t2))
            SELECT coalesce(round(extract(epoch FROM (SELECT max(gap) FROM w)) * 1000)::text, 'none'),
                   (SELECT snowflake_worker_id(id) FROM ids WHERE at <= to_timestamp($t1) ORDER BY at DESC LIMIT 1),
                   (SELECT snowflake_worker_id(id) FROM ids ORDER BY at DESC LIMIT 1)")
        errs=$(awk -v a="$t1" -v b="$t2" '$1 >= a && $1 <= b' "$BASE/$s.errors" | wc -l)
        kept=kept; [ "$before" = "$after" ] || kept="changed"
        REPORT+=("$ev: $s paused at most ${gap} ms (longest gap between its rows), $errs client errors; worker id $before -> $after ($kept)")
        log "   ${REPORT[-1]}"
    done
}
# after_event EVENT UNIX_START: the new primary shows both leases renewed,
# both servers mint past a TTL after the event, without a restart.
after_event() {
    local ev=$1 t1=$2 l s left t2 took
    l=$(leader)
    for s in "${SERVERS[@]}"; do
        left=$(( BOUND_S - ($(date +%s) - ${t1%.*}) )); [ "$left" -gt 0 ] || left=1
        poll_until "$left" resumed "$s" "$t1" "$l" \
            || die "patroni_registry: after the $ev, $s did not mint under a lease renewed on the new primary $l within $BOUND_S s of the event ($(stats_of "$s"); minted after the event: $(q "$s" -c "SELECT count(*) FROM ids WHERE at > to_timestamp($t1)"))"
        same_postmaster "$s"
    done
    took=$(since "$t1"); t2=$(date +%s.%N)
    log "patroni_registry: $ev: both servers mint under leases renewed on $l, $took s after the event began, same postmasters"
    report "$ev" "$t1" "$t2"
}

# 1. A switchover to the synchronous standby.
switchover
log "patroni_registry: switchover $OLD -> $NEW done $(since "$EVENT_T") s after it began"
after_event "switchover $OLD -> $NEW" "$EVENT_T"
wait_for "$OLD to follow $NEW, and a synchronous standby" 180 healthy sync

# 2. A failover: the leader's Patroni and postmaster killed (a node lost).
failover "$(leader)"
log "patroni_registry: failover from $OLD (killed) to $NEW, leading $(since "$EVENT_T") s after the kill"
after_event "failover $OLD -> $NEW" "$EVENT_T"

# The registry writes again only once the new primary has a synchronous
# standby (synchronous_mode_strict): the other survivor, which may need a
# pg_rewind first. Until then a renewal waits for it, times out and is
# not counted, so a lease may run out and be revived or claimed again.
wait_for "a synchronous standby of $NEW" "$BOUND_S" healthy sync 1
log "patroni_registry: $NEW has a synchronous standby $(since "$EVENT_T") s after the kill"

# --- the verdict ------------------------------------------------------------
touch "$BASE/stop"
for pid in "${CLIENT_PIDS[@]}"; do wait "$pid" || true; done
CLIENT_PIDS=()
for s in "${SERVERS[@]}"; do
    # A lease may be between a renewal that timed out waiting for the
    # synchronous standby and the next one: the server must hold one again
    # (within $BOUND_S s, a bound only a hung system reaches). Said in the
    # log, with what its lease worker logged, when it was not held at
    # first look.
    if ! has_lease "$s"; then
        log "patroni_registry: $s held no lease at first look at the end ($(stats_of "$s")); its lease log since the failover:"
        lease_lines "$s" "$EVENT_T" >&2
        poll_until "$BOUND_S" has_lease "$s" \
            || die "patroni_registry: $s holds no lease at the end, $BOUND_S s after the clients stopped ($(stats_of "$s"))"
        log "patroni_registry: $s holds a lease again after $POLL_MS ms"
    fi
    same_postmaster "$s"
    log "patroni_registry: $s at the end: $(stats_of "$s")"
done
[ "$(lease_of s1)" != "$(lease_of s2)" ] || die "patroni_registry: s1 and s2 both lease worker id $(lease_of s1) at the end"
# Both tables side by side on s1 (database judge).
q s1 -d postgres -c "CREATE DATABASE judge"
q s1 -d judge -c "CREATE TABLE minted (server text NOT NULL, id bigint NOT NULL, worker int NOT NULL, at timestamptz NOT NULL)"
for s in "${SERVERS[@]}"; do
    q "$s" -c "COPY (SELECT '$s', id, snowflake_worker_id(id), at FROM ids) TO STDOUT" \
        | q s1 -d judge -c "COPY minted FROM STDIN"
done
read -r total distinct < <(q s1 -d judge -c "SELECT count(*), count(DISTINCT id) FROM minted")
[ "$total" = "$distinct" ] \
    || die "patroni_registry: $total IDs minted by s1 and s2, only $distinct distinct: $(q s1 -d judge -c "SELECT string_agg(server || ':' || id, ' ') FROM (SELECT server, id FROM minted WHERE id IN (SELECT id FROM minted GROUP BY id HAVING count(*) > 1) LIMIT 10) d")"
overlap=$(q s1 -d judge -c "
    WITH r AS (SELECT server, worker, min(at) AS lo, max(at) AS hi, count(*) AS n FROM minted GROUP BY server, worker)
    SELECT string_agg(format('worker id %s: s1 %s..%s (%s rows), s2 %s..%s (%s rows)', a.worker, a.lo, a.hi, a.n, b.lo, b.hi, b.n), '; ')
      FROM r a JOIN r b ON a.worker = b.worker AND a.server = 's1' AND b.server = 's2'
     WHERE a.lo <= b.hi AND b.lo <= a.hi")
[ -z "$overlap" ] || die "patroni_registry: two servers minted under one worker id at the same time: $overlap"
shared=$(q s1 -d judge -c "SELECT count(DISTINCT worker) FROM minted GROUP BY worker HAVING count(DISTINCT server) > 1" | wc -l)
log "patroni_registry: $total IDs from s1 and s2, all distinct; worker ids used: $(q s1 -d judge -c "SELECT string_agg(server || ':' || w, ' ') FROM (SELECT server, string_agg(DISTINCT worker::text, ',') AS w FROM minted GROUP BY server ORDER BY server) x"); $shared used by both, in disjoint time ranges"

# --- reported, not asserted ---------------------------------------------------
for r in "${REPORT[@]}"; do log "   $r"; done
for s in "${SERVERS[@]}"; do
    log "patroni_registry: $s: lease WARNINGs and ERRORs in its server.log (count, message):"
    { grep -E "WARNING|ERROR" "$BASE/$s/server.log" | grep -i lease | sed -E 's/^[0-9-]+ [0-9:.]+ [A-Z]+ \[[0-9]+\] //' \
        | sed -E 's/[0-9]+ ms/N ms/g; s/epoch [0-9]+/epoch N/g' | cut -c1-220 | sort | uniq -c | sort -rn | head -15 >&2; } || true
done
cancelled=$(cat "$BASE"/m?/log/*.log 2>/dev/null | grep -c "canceling wait for synchronous replication" || true)
log "patroni_registry: registry members' logs: $cancelled cancelled wait(s) for synchronous replication"
if [ "$cancelled" != 0 ]; then grep -h -B2 "canceling wait for synchronous replication" "$BASE"/m?/log/*.log | head -20 >&2; fi
log "patroni_registry: ok in $(($(date +%s) - T0)) s"
finish
