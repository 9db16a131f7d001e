#!/usr/bin/env bash
# Worker ids leased from a registry (snowflake_id.worker_id_source =
# 'registry', 0.8.0) on real clusters, on PostgreSQL 18 only. One registry
# server, an ordinary PostgreSQL that does not preload the library, with
# the extension in database "registry" (snowflake_registry_init() with the
# default 10 worker bits); each minting server logs in to it as a role of
# its own, a member of snowflake_lease, which has nothing but the
# documented GRANT. Leases
# last 10 s, so that a busy machine never turns one late renewal into a
# failure, except where a test waits for a lease to run out or for a
# lease period (x in 3, the primary in 7: 3 s). A PRIMARY KEY on the registry's cluster (database "judge",
# the servers' IDs pulled over postgres_fdw) is the judge of "minted
# twice" across servers.
#  1. A registry and four servers started together get four distinct ids,
#     each recorded on the registry with its holder (port, system
#     identifier, data directory). All four mint 200,000 IDs at once (two
#     by a per-row DEFAULT snowflake_nextval(), two by
#     snowflake_nextval(200000)); merged on the registry: 800,000 rows, no
#     duplicate, every row with its server's leased id.
#  2. A cold copy of a stopped server's data directory, started beside
#     the original on another port: it logs in as the original's role,
#     which may hold one live lease, and is refused until the
#     administrator allows two (issue 47); then both run at once on two
#     ids, and their IDs merge without a duplicate.
#  3. A holder frozen (SIGSTOP of its postmaster and every child) past its
#     TTL: the registry shows its lease expired, and a server preferring
#     its id (snowflake_id.worker_id) claims it. The holder resumed, all
#     but its lease worker: its next snowflake_nextval() fails with 55000 "the lease
#     of worker id N ran out" (every call checks the deadline); its
#     worker resumed too, it leases another id and mints under it. Under
#     the contested id, every ID of the old holder is in an earlier
#     millisecond than every ID of the new one.
#  4. The registry stopped: a server keeps minting (a call right after the
#     stop succeeds), then fails with 55000 and a DETAIL once its lease's
#     deadline has passed; the registry started again: it mints again
#     without a restart, on the same id (nobody took it), above its
#     earlier IDs.
#  5. A clean stop releases the lease and keeps its reserved_until (at or
#     above every ID issued); restarted with its clock 1 h behind
#     (libfaketime), the server leases its previous id again and its first
#     new ID's timestamp is above that reserved_until.
#  6. Exhaustion: a registry of 2 worker bits (database "registry2", the
#     extension in its own schema "snowflake", the recommended install,
#     with the documented GRANT USAGE) and five servers with
#     worker_bits = 2: four lease ids 0..3, the fifth none, and its
#     snowflake_nextval() fails with 55000 and a HINT naming worker_bits;
#     the four mint without a duplicate.
#  7. A pg_basebackup -R standby of a leased primary, its clock 1 h behind,
#     claims nothing in recovery (no lease in its snowflake_stats(), no
#     holder on its port in the registry, for a lease period of the
#     primary's renewals); the primary stopped in immediate mode (a
#     failure) and the standby promoted by hand: it leases an id, and its
#     first ID is above the old primary's last ID (a burst never stored
#     included).
# LEASES_ONLY="3 4" runs some scenarios only; each starts and stops its own
# servers, the registry is common to all. Every wait is a poll with a
# bound only a hung machine reaches; all clusters are stopped on exit.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/lease.sh"
if [ "$PG_MAJOR" != 18 ]; then
    skip_test "runs on 18"
fi
BASE=$(state_dir "$ROOT/.run/it-leases" it-leases)
T0=$(date +%s)

# --- helpers (the rest: lib/lease.sh) -------------------------------------
fake_clock "$BASE/faketime"
# Every server of the script, by name, from port SNOWFLAKE_IT_LEASES_PORT
# (15400) on: the registry, then one per role.
nodes "${SNOWFLAKE_IT_LEASES_PORT:-15400}" reg n1 n2 n3 n4 a a2 x y r c e1 e2 e3 e4 e5 p s
# start_all NODE...: start them all at once.
start_all() {
    local n p pids=() rc=0
    for n in "$@"; do start "$n" & pids+=($!); done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    [ $rc = 0 ] || die "not every one of $* started"
}
reg() { q reg -d registry "$@"; }
# make_ids NODE: the extension and the table of IDs every minting server has.
make_ids() {
    q "$1" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
        -c "CREATE TABLE ids (id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
                              tag text NOT NULL DEFAULT '', at timestamptz NOT NULL DEFAULT clock_timestamp())"
}
# ms_of NODE ID_EXPR: the millisecond (Unix) of an ID, decoded on NODE.
ms_of() { q "$1" -c "SELECT (extract(epoch FROM d.ts) * 1000)::bigint FROM snowflake_decode(($2)::bigint) d"; }

LAST=""   # what psql said to the last probe below
# mints NODE: one snowflake_nextval() on NODE succeeds.
mints() {
    local t0=$SECONDS
    # While the start-up read of the high-water marks runs, 55000 at once
    # (issue 55): ask again.
    until LAST=$(q "$1" -c "SELECT snowflake_nextval()" 2>&1); do
        [[ "$LAST" == *"high-water mark is not available"* ]] && [ $((SECONDS - t0)) -lt 30 ] || return 1
        sleep 0.05
    done
}
# refused NODE: snowflake_nextval() on NODE fails at once with the lease
# error (a call that waited would end at the statement timeout, 57014).
refused() {
    if LAST=$(q "$1" -c '\set VERBOSITY verbose' -c "SET statement_timeout = '60s'" \
                 -c "SELECT snowflake_nextval()" 2>&1); then
        return 1
    fi
    grep -q "ERROR:  55000: no worker id is leased from the snowflake_id registry" <<<"$LAST"
}
# expired NODE: snowflake_nextval() on NODE fails at once because the
# lease passed its local deadline, its worker not having given it up.
expired() {
    if LAST=$(q "$1" -c '\set VERBOSITY verbose' -c "SET statement_timeout = '60s'" \
                 -c "SELECT snowflake_nextval()" 2>&1); then
        return 1
    fi
    grep -Eq "ERROR:  55000: the lease of worker id [0-9]+ ran out without a renewal" <<<"$LAST"
}
# stopped NODE: refused or expired (a call after the deadline meets one
# or the other, depending on whether the lease worker has given up).
stopped() { refused "$1" || grep -Eq "ERROR:  55000: the lease of worker id [0-9]+ ran out without a renewal" <<<"$LAST"; }
# exhausted NODE: refused, with a HINT that names worker_bits.
exhausted() { refused "$1" && grep -q worker_bits <<<"$(sed -n '/^HINT:/,/^LOCATION:/p' <<<"$LAST")"; }

# leases_other NODE OLD: NODE leases an id other than OLD, and mints.
leases_other() { local w; w=$(lease_of "$1" 2>/dev/null) && [ -n "$w" ] && [ "$w" != "$2" ] && mints "$1"; }
# replayed_to NODE LSN: the standby NODE has replayed the WAL up to LSN.
replayed_to() { [ "$(q "$1" -c "SELECT pg_last_wal_replay_lsn() >= '$2'::pg_lsn" 2>/dev/null || true)" = t ]; }

# link NODE: the judge database reads NODE's table of IDs as ids_NODE.
link() {
    q reg -d judge -c "SET client_min_messages = warning" \
        -c "CREATE SERVER IF NOT EXISTS $1 FOREIGN DATA WRAPPER postgres_fdw
                OPTIONS (host '$(dir_of "$1")', port '${PORT_OF[$1]}', dbname 'postgres', fetch_size '50000')" \
        -c "CREATE USER MAPPING IF NOT EXISTS FOR postgres SERVER $1 OPTIONS (user 'postgres')" \
        -c "CREATE FOREIGN TABLE IF NOT EXISTS ids_$1 (id bigint, tag text) SERVER $1 OPTIONS (table_name 'ids')"
}
# judge LABEL EXPECTED NODE:TAG...: the IDs tagged TAG on each NODE, copied
# into one PRIMARY KEY table on the registry's cluster: no duplicate, and
# EXPECTED rows in all.
judge() {
    local label="$1" want="$2" t="merged_$1" spec n tag out got; shift 2
    q reg -d judge -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS $t" -c "CREATE TABLE $t (id bigint PRIMARY KEY, node text NOT NULL)"
    for spec in "$@"; do
        n=${spec%%:*} tag=${spec#*:}
        link "$n"
        out=$(q reg -d judge -c "INSERT INTO $t SELECT id, '$n' FROM ids_$n WHERE tag = '$tag'" 2>&1) \
            || die "$label: merging the IDs of $n ($tag) on the registry failed, expected no ID equal to one of ${*%%:*} (PRIMARY KEY): $out"
    done
    got=$(q reg -d judge -c "SELECT count(*) FROM $t")
    [ "$got" = "$want" ] || die "$label: the merged table has $got rows, expected $want"
    log "   merged on the registry over postgres_fdw: $got IDs from $*, no duplicate"
}

# --- scenarios -------------------------------------------------------------
setup_registry() {
    log "registry: database registry, snowflake_registry_init(), a login role per server in the group snowflake_lease with the documented GRANT"
    registry_server reg start "${NODES[@]/#/lease_}"
    registry_db reg registry "worker_bits => 10"
    q reg -c "CREATE DATABASE judge"
    q reg -d judge -c "SET client_min_messages = warning" -c "CREATE EXTENSION postgres_fdw"
}

scenario1() {
    local n pids=() p rc=0 got exp
    log "1. a registry and four servers started together: four ids; 4 x 200,000 IDs at once, no duplicate"
    # 10 s leases: four servers minting flat out on a small machine must
    # not lose a lease to one late renewal (this scenario waits for none).
    for n in n1 n2 n3 n4; do mint_init "$n" reg registry "snowflake_id.lease_ttl = '10s'"; done
    start_all n1 n2 n3 n4
    for n in n1 n2 n3 n4; do make_ids "$n"; leased "$n"; done
    got=$(printf '%s\n' "${LEASE[n1]}" "${LEASE[n2]}" "${LEASE[n3]}" "${LEASE[n4]}" | sort -un | wc -l)
    [ "$got" = 4 ] || die "the four servers lease ${LEASE[n1]} ${LEASE[n2]} ${LEASE[n3]} ${LEASE[n4]}, expected four distinct ids"
    for n in n1 n2 n3 n4; do
        got=$(reg -c "SELECT state, holder_port, system_identifier, data_directory
                        FROM snowflake_registry_holders WHERE worker_id = ${LEASE[$n]}")
        exp=$(q "$n" -c "SELECT 'held', current_setting('port'), (SELECT system_identifier FROM pg_control_system()),
                                current_setting('data_directory')")
        [ "$got" = "$exp" ] || die "$n leases worker id ${LEASE[$n]}: the registry shows '$got', expected '$exp' (state, port, system identifier, data directory)"
    done
    log "   leased ids: n1 ${LEASE[n1]}, n2 ${LEASE[n2]}, n3 ${LEASE[n3]}, n4 ${LEASE[n4]}, each recorded with its holder"
    for n in n1 n2; do
        q "$n" -c "INSERT INTO ids (tag) SELECT 'load' FROM generate_series(1, 200000)" & pids+=($!)
    done
    for n in n3 n4; do
        q "$n" -c "INSERT INTO ids (id, tag) SELECT i, 'load' FROM snowflake_nextval(200000) i" & pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    [ $rc = 0 ] || die "minting 200,000 IDs failed on a server (psql's error is above); expected all four to succeed ($(for n in n1 n2 n3 n4; do printf '%s: %s; ' "$n" "$(stats_of "$n")"; done))"
    for n in n1 n2 n3 n4; do
        got=$(q "$n" -c "SELECT count(*), min(snowflake_worker_id(id)), max(snowflake_worker_id(id)) FROM ids WHERE tag = 'load'")
        [ "$got" = "200000 ${LEASE[$n]} ${LEASE[$n]}" ] \
            || die "$n: IDs, lowest and highest worker id are '$got', expected '200000 ${LEASE[$n]} ${LEASE[$n]}'"
    done
    judge s1 800000 n1:load n2:load n3:load n4:load
    stop n1 n2 n3 n4
}

scenario2() {
    local n p pids=() rc=0 got
    log "2. a cold copy of a stopped server's data directory, started beside the original: two ids, no equal IDs"
    mint_init a reg registry "snowflake_id.lease_ttl = '10s'"   # minting flat out, as in 1
    start a; make_ids a; leased a
    q a -c "INSERT INTO ids (tag) SELECT 'before' FROM generate_series(1, 10000)"
    stop a
    fresh a2
    as_pg cp -a "$(dir_of a)/data" "$(dir_of a2)/data"
    printf "port = %s\nunix_socket_directories = '%s'\n" "${PORT_OF[a2]}" "$(dir_of a2)" \
        | as_pg tee -a "$(dir_of a2)/data/postgresql.conf" >/dev/null
    # The copy logs in as the original's role, which may hold one live
    # lease (issue 47): refused until the administrator allows two.
    start a; leased a
    start a2
    poll_until 60 role_refused a2 \
        || die "a2, a cold copy logging in as lease_a while a holds a lease: expected its claim refused (role limit 1), got: $(stats_of a2)"
    log "   the copy is refused while the original holds its role's one lease: $(q a2 -c "SELECT registry_last_error FROM snowflake_stats()" | cut -c1-90)"
    reg -c "SELECT snowflake_registry_role_limit('lease_a', 2)" >/dev/null
    leased a2
    [ "${LEASE[a]}" != "${LEASE[a2]}" ] || die "the original and its cold copy both lease worker id ${LEASE[a]}, expected two ids"
    got=$(reg -c "SELECT string_agg(DISTINCT system_identifier, ' ') FROM snowflake_registry_holders
                   WHERE worker_id IN (${LEASE[a]}, ${LEASE[a2]})")
    log "   original: worker id ${LEASE[a]}, cold copy: ${LEASE[a2]} (system identifier on the registry: $got)"
    for n in a a2; do
        q "$n" -c "INSERT INTO ids (tag) SELECT 'after' FROM generate_series(1, 100000)" & pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    [ $rc = 0 ] || die "minting 100,000 IDs failed on the original or the copy (psql's error is above), expected both to succeed"
    for n in a a2; do
        got=$(q "$n" -c "SELECT count(*) FILTER (WHERE snowflake_worker_id(id) <> ${LEASE[$n]}) FROM ids WHERE tag = 'after'")
        [ "$got" = 0 ] || die "$n: $got new IDs carry another worker id than its lease, ${LEASE[$n]}"
    done
    judge s2 200000 a:after a2:after
    stop a a2
}

scenario3() {
    local wx lw x_last y_first got exp
    log "3. a holder frozen past its TTL: its id taken by a server preferring it; resumed, it gets 55000, then another id"
    mint_init x reg registry; start x; make_ids x; leased x
    wx=${LEASE[x]}
    mint_init y reg registry "snowflake_id.worker_id = $wx" "snowflake_id.lease_ttl = '10s'"   # only x's lease must run out
    q x -c "INSERT INTO ids (tag) SELECT 'x-held' FROM generate_series(1, 10000)"
    lw=$(lease_worker_of x)
    # Every ID x issued under wx, stored or not, is at or below its last_id.
    x_last=$(ms_of x "(SELECT last_id FROM snowflake_stats())")
    freeze x
    log "   x (worker id $wx) frozen: postmaster and $((${#FROZEN[@]} - 1)) children stopped"
    poll_until 60 is_state reg registry "$wx" expired \
        || die "worker id $wx: the registry shows it '$(holder_state reg registry "$wx")' 60 s after its holder x froze (lease_ttl 3 s), expected 'expired'"
    log "   the registry shows worker id $wx expired after ${POLL_MS} ms"
    # y's clock is an hour behind: only the registry's floor puts its IDs
    # after x's.
    setclock "-1h"
    start_faked y; make_ids y; leased y
    [ "${LEASE[y]}" = "$wx" ] || die "y prefers worker id $wx, expired on the registry, but leased ${LEASE[y]}"
    q y -c "INSERT INTO ids (tag) SELECT 'y-held' FROM generate_series(1, 10000)"
    thaw "$lw"
    expired x || die "x resumed (all but its lease worker) after y took worker id $wx: expected snowflake_nextval() to fail with 55000 'the lease of worker id $wx ran out without a renewal' (every call checks the deadline; issue 47), got: $LAST"
    log "   x resumed, its lease worker still stopped: $(grep -m1 'ERROR:' <<<"$LAST")"
    thaw
    poll_until 60 leases_other x "$wx" \
        || die "x: expected a lease on another id than $wx and an ID within 60 s of its lease worker's resumption; $(stats_of x); last call: $LAST"
    LEASE[x]=$(lease_of x)
    log "   x leases worker id ${LEASE[x]} after ${POLL_MS} ms"
    q x -c "INSERT INTO ids (tag) SELECT 'x-after' FROM generate_series(1, 10000)"
    got=$(q x -c "SELECT count(*) FILTER (WHERE snowflake_worker_id(id) <> ${LEASE[x]}) FROM ids WHERE tag = 'x-after'")
    [ "$got" = 0 ] || die "x: $got IDs minted after it resumed carry another worker id than its new lease ${LEASE[x]}"
    got=$(reg -c "SELECT string_agg(worker_id || ':' || holder_port, ' ' ORDER BY worker_id) FROM snowflake_registry_holders
                   WHERE worker_id IN ($wx, ${LEASE[x]}) AND state = 'held'")
    exp=$(printf '%s\n' "$wx:${PORT_OF[y]}" "${LEASE[x]}:${PORT_OF[x]}" | sort -n | paste -sd ' ')
    [ "$got" = "$exp" ] || die "the registry shows the holders (worker id:port) '$got', expected '$exp'"
    x_last=$(q x -c "SELECT greatest($x_last, max((extract(epoch FROM d.ts) * 1000)::bigint))
                       FROM ids, snowflake_decode(ids.id) d WHERE d.worker_id = $wx")
    y_first=$(q y -c "SELECT min((extract(epoch FROM d.ts) * 1000)::bigint)
                        FROM ids, snowflake_decode(ids.id) d WHERE d.worker_id = $wx")
    [ "$x_last" -lt "$y_first" ] \
        || die "worker id $wx: x's last ID is in millisecond $x_last, y's first in $y_first; expected every ID of x before every ID of y"
    log "   under worker id $wx: x's IDs end at ms $x_last, y's start at ms $y_first"
    judge s3 30000 x:x-held x:x-after y:y-held
    stop x y
}

scenario4() {
    local pm got lo hi errs lasterr
    log "4. the registry stopped: minting goes on until the lease's deadline, then 55000; restarted: minting resumes"
    # A 10 s lease, renewed every ~3.3 s: a call right after the stop has
    # 6 s or more to reach the server on the busiest machine.
    mint_init r reg registry "snowflake_id.lease_ttl = '10s'"
    start r; make_ids r; leased r
    pm=$(postmaster_of r)
    q r -c "INSERT INTO ids (tag) SELECT 'before' FROM generate_series(1, 1000)"
    stop reg
    [ ! -f "$(dir_of reg)/data/postmaster.pid" ] || die "the registry did not stop"
    got=$(q r -c "INSERT INTO ids (tag) VALUES ('down') RETURNING id" 2>&1) \
        || die "r: expected an ID right after the registry stopped (its 10 s lease was renewed every ~3 s), got: $got"
    poll_until 120 stopped r \
        || die "r: expected snowflake_nextval() to fail with 55000 once its 10 s lease ran out with the registry down; 120 s later the last call said: $LAST"
    log "   minting went on for ${POLL_MS} ms after the stop, then: $(grep -m1 'ERROR:' <<<"$LAST")"
    grep -q "^DETAIL:  ." <<<"$LAST" || die "r's 55000 has no DETAIL naming the registry's last error: $LAST"
    read -r errs lasterr < <(q r -c "SELECT registry_errors, coalesce(registry_last_error, '') FROM snowflake_stats()")
    [ "${errs:-0}" -gt 0 ] || die "r's snowflake_stats() shows '$errs' registry errors while the registry is down, expected some"
    [ -n "$lasterr" ] || die "r's snowflake_stats() shows no registry_last_error while the registry is down, expected the last error"
    start reg
    poll_until 120 mints r || die "r: expected minting to resume within 120 s of the registry's restart, without a restart of r; the last call said: $LAST"
    log "   minting resumed ${POLL_MS} ms after the registry's restart"
    [ "$(postmaster_of r)" = "$pm" ] || die "r's postmaster was $pm, now $(postmaster_of r): expected no restart"
    if grep -q "reinitializing" "$(dir_of r)/server.log"; then die "r's log shows a crash restart, expected none"; fi
    got=$(lease_of r)
    [ "$got" = "${LEASE[r]}" ] || die "r leases worker id $got after the outage, expected ${LEASE[r]} again (nobody took it: the lease is renewed)"
    q r -c "INSERT INTO ids (tag) SELECT 'after' FROM generate_series(1, 1000)"
    read -r hi lo < <(q r -c "SELECT max(id) FILTER (WHERE tag <> 'after'), min(id) FILTER (WHERE tag = 'after') FROM ids")
    [ "$lo" -gt "$hi" ] || die "r: the lowest ID after the outage, $lo, is not above the highest before, $hi"
    stop r
}

scenario5() {
    local w last_id last_ms state until_ms off first first_ms
    log "5. a clean stop releases the lease; restarted 1 h behind, the first ID is above the lease's reserved_until"
    mint_init c reg registry "snowflake_id.lease_ttl = '10s'"; start c; make_ids c; leased c
    w=${LEASE[c]}
    q c -c "INSERT INTO ids (tag) SELECT 'before' FROM generate_series(1, 10000)"
    last_id=$(q c -c "SELECT last_id FROM snowflake_stats()")
    last_ms=$(ms_of c "$last_id")
    stop c
    read -r state until_ms < <(reg -c "SELECT h.state, r.reserved_until_ms
                                          FROM snowflake_id_internal.snowflake_registry r
                                          JOIN snowflake_registry_holders h USING (worker_id) WHERE worker_id = $w")
    [ "$state" != held ] || die "worker id $w: still 'held' on the registry after c's clean stop, expected the lease released"
    [ "$until_ms" -ge "$last_ms" ] \
        || die "worker id $w: reserved_until_ms $until_ms is below c's last ID's millisecond $last_ms, expected every ID within the registry's reservation"
    log "   after the clean stop worker id $w is '$state', reserved until ms $until_ms (c's last ID: ms $last_ms)"
    setclock "-1h"
    start_faked c
    off=$(q c -c "SELECT round(extract(epoch FROM now()) - $(date +%s.%N))")
    [ "$off" -le -3500 ] || die "c's clock is $off s off, expected about -3600 s (libfaketime)"
    [ "$off" -ge -3700 ] || die "c's clock is $off s off, expected about -3600 s (libfaketime)"
    leased c
    [ "${LEASE[c]}" = "$w" ] || die "c leased worker id ${LEASE[c]} after its restart, expected its previous id $w (expired, same holder)"
    first=$(q c -c "SELECT snowflake_nextval()" 2>&1) || die "c: expected an ID after its restart 1 h behind, got: $first"
    first_ms=$(ms_of c "$first")
    [ "$first_ms" -gt "$until_ms" ] \
        || die "c's first ID after the restart is in millisecond $first_ms, expected above the lease's reserved_until_ms $until_ms"
    [ "$first" -gt "$last_id" ] || die "c's first ID after the restart, $first, is not above its last before, $last_id"
    log "   first ID after the restart (clock ${off} s): ms $first_ms, above $until_ms"
    stop c
}

scenario6() {
    local n got exp=""
    log "6. exhaustion: 2 worker bits, five servers: ids 0..3, the fifth gets 55000 with a HINT on worker_bits"
    registry_db reg registry2 "worker_bits => 2" snowflake   # this one in its own schema, the recommended install
    for n in e1 e2 e3 e4 e5; do
        mint_init "$n" reg registry2 "snowflake_id.worker_bits = 2" \
            "snowflake_id.lease_ttl = '10s'"
    done
    start_all e1 e2 e3 e4
    for n in e1 e2 e3 e4; do make_ids "$n"; leased "$n"; exp+=" ${PORT_OF[$n]}"; done
    exp=${exp# }
    got=$(printf '%s\n' "${LEASE[e1]}" "${LEASE[e2]}" "${LEASE[e3]}" "${LEASE[e4]}" | sort -n | paste -sd ' ')
    [ "$got" = "0 1 2 3" ] || die "the four servers lease '$got', expected 0 1 2 3"
    start e5; make_ids e5
    poll_until 60 exhausted e5 \
        || die "e5, a fifth server for 4 ids: expected snowflake_nextval() to fail with 55000 and a HINT naming worker_bits within 60 s; the last call said: $LAST"
    log "   e5: $(grep -m1 'ERROR:' <<<"$LAST") / $(grep -m1 'HINT:' <<<"$LAST")"
    for n in e1 e2 e3 e4; do q "$n" -c "INSERT INTO ids (tag) SELECT 'load' FROM generate_series(1, 10000)"; done
    exhausted e5 || die "e5: expected 55000 with a HINT naming worker_bits, still, got: $LAST"
    [ -z "$(lease_of e5)" ] || die "e5 leases worker id $(lease_of e5), expected none (all 4 are held)"
    got=$(q reg -d registry2 -c "SELECT string_agg(holder_port::text, ' ' ORDER BY holder_port)
                                   FROM snowflake.snowflake_registry_holders WHERE state = 'held'")
    [ "$got" = "$exp" ] || die "registry2 shows the ports '$got' holding leases, expected '$exp' (e1..e4)"
    judge s6 40000 e1:load e2:load e3:load e4:load
    stop e1 e2 e3 e4 e5
}

scenario7() {
    local wp lsn p_last renewed first got
    log "7. a standby claims nothing in recovery; promoted after the primary's failure, it leases an id and mints above"
    mint_init p reg registry; start p; make_ids p; leased p
    wp=${LEASE[p]}
    q p -c "INSERT INTO ids (tag) SELECT 'primary' FROM generate_series(1, 10000)"
    fresh s
    basebackup_standby "$(dir_of p)" "${PORT_OF[p]}" "$(dir_of s)" "${PORT_OF[s]}"
    setclock "-1h"
    start_faked s
    [ "$(q s -c "SELECT pg_is_in_recovery()")" = t ] || die "s is not in recovery, expected a standby"
    # A lease period with the standby up: the primary renews on the registry.
    renewed=$(renewed_at reg registry "$wp")
    poll_until 60 renewed_since reg registry "$wp" "$renewed" 3 || die "the primary's lease (worker id $wp) was not renewed within 60 s, expected a renewal every second"
    got=$(q s -c "SELECT worker_id_source || ' ' || coalesce(lease_worker_id::text, 'none') FROM snowflake_stats()")
    [ "$got" = "registry none" ] || die "the standby's snowflake_stats() shows source and lease '$got', expected 'registry none' in recovery"
    got=$(reg -c "SELECT count(*) FROM snowflake_registry_holders WHERE holder_port = ${PORT_OF[s]} AND state = 'held'")
    [ "$got" = 0 ] || die "the registry shows $got lease(s) held by the standby's port ${PORT_OF[s]}, expected none in recovery"
    log "   in recovery for a lease period: no lease on the standby, none on the registry"
    q p -c "SELECT count(*) FROM snowflake_nextval(200000)" >/dev/null   # handed out, never stored
    p_last=$(q p -c "SELECT last_id FROM snowflake_stats()")
    lsn=$(q p -c "SELECT pg_current_wal_lsn()")
    poll_until 120 replayed_to s "$lsn" || die "the standby did not replay the primary's WAL up to $lsn within 120 s"
    as_pg "$(pgbin)/pg_ctl" -D "$(dir_of p)/data" -m immediate -w stop >/dev/null
    as_pg "$(pgbin)/pg_ctl" -D "$(dir_of s)/data" -w promote >/dev/null || die "pg_ctl promote of the standby failed"
    leased s
    first=$(q s -c "SELECT snowflake_nextval()" 2>&1) || die "s: expected an ID after its promotion, got: $first"
    [ "$first" -gt "$p_last" ] || die "the promoted standby's first ID, $first, is not above the old primary's last ID, $p_last"
    got=$(q s -c "SELECT snowflake_worker_id($first)")
    [ "$got" = "${LEASE[s]}" ] || die "the promoted standby's first ID carries worker id $got, expected its lease ${LEASE[s]}"
    log "   promoted: worker id ${LEASE[s]} (the old primary's: $wp); first ID $first above the old primary's last $p_last"
    stop s
}

trap all_stop EXIT
all_stop
for s in ${LEASES_ONLY:-}; do
    [[ " 1 2 3 4 5 6 7 " == *" $s "* ]] || die "LEASES_ONLY: no scenario '$s' (have 1 to 7)"
done
setup_registry
for s in 1 2 3 4 5 6 7; do
    if [[ " ${LEASES_ONLY:-1 2 3 4 5 6 7} " == *" $s "* ]]; then "scenario$s"; fi
done
log "leases: scenarios ${LEASES_ONLY:-1 2 3 4 5 6 7} passed in $(($(date +%s) - T0)) s"
