#!/usr/bin/env bash
# The promises of leased worker ids (snowflake_id.worker_id_source =
# 'registry') that issue 47 found broken: no two servers mint under one
# worker id at once, whatever the registry's clock, a stalled lease
# worker, a hung registry, a partition or a retire do, a caller's wait is
# bounded, and one member cannot take the fleet's ids; and issue 56's: a
# restart after a crash mints within one TTL of it. On PostgreSQL 18
# (SNOWFLAKE_LEASE_PROMISE_ANY_MAJOR=1: on any major).
#
# Registries: "reg", an ordinary PostgreSQL that does not preload the
# library, with one registry database per scenario (the extension in
# public, snowflake_registry_init(), a login role per minting server in
# the group role snowflake_lease, which has EXECUTE on claim, renew and
# release: docs/worker-ids.md "Setting up"); "rega", the same under
# libfaketime, for A. Minting servers lease for 3 s (renewed every 1 s)
# unless said otherwise, prefer worker id K=5 (snowflake_id.worker_id)
# where a scenario contests it, and record every ID they mint: a client
# inserts into ids(id DEFAULT snowflake_nextval(), at DEFAULT
# clock_timestamp()) 50 rows per statement, each statement its own
# transaction, about 2 ms apart, failures recorded (SQLSTATE, message)
# and the loop going on. `at` is read just after its ID was minted: an upper bound of the
# mint time, used in the direction that makes each check strict. A second
# session on each server samples snowflake_stats() every 10 ms (the lease
# held and its lease_expires, when they change). "H2 got K" is the
# earlier of the first sample showing K and H2's first ID under K (a
# bound at most a sample late). All servers run on this machine: their
# clocks agree, except where libfaketime is named (then times are taken
# from an un-faked server or this machine).
#
# Tolerance: an ID may be 5 ms past a deadline (the measurement: `at` is
# read after the ID, and a busy machine may run the backend late).
#
#  A. The registry's clock cannot make two holders. H1 (lease_ttl 15 s,
#     renewed every 5 s, so that the window after a renewal leaves time to
#     start H2) claims K from a registry 2 h behind and renews; right
#     after a renewal the registry's clock steps to 2 h ahead, and H2,
#     preferring K, starts. Promise: every ID of H1 under K is earlier than
#     the moment H2 got K (if it ever does). The opposite step (2 h ahead,
#     then 2 h behind) likewise. The registry databases of A allow
#     max_ahead = 3 h: with a registry 2 h behind, a smaller max_ahead
#     refuses H1's claim (its IDs would be too far ahead).
#  B. A stalled lease worker: SIGSTOP of H1's "snowflake_id lease"
#     process while H1 mints; H2, preferring K, starts once the registry
#     shows K expired. Promise: no ID of H1 under K after H1's own
#     deadline (its lease_expires read right after the stop: no renewal
#     can succeed after it), every ID of H1 under K before H2 got K, and a
#     call made 2 s after the deadline fails with 55000 within 2.5 s (2 s
#     wait plus overhead, measured around the call on the server).
#  C. A hung registry (SIGSTOP of its postmaster and every child).
#     Promise: no ID of H1 under K after its lease_expires (read after the
#     freeze); a call 2 s after it fails with 55000 within 2.5 s; thawed,
#     H1 mints again without a restart.
#  D. A partition: H1 reaches the registry through tests/integration/
#     relay.py (a Unix socket relayed to the registry's), and the relay is
#     stopped (SIGSTOP). Promises as in C; the relay continued, H1 mints
#     again without a restart.
#  E. Retire stops the holder: snowflake_registry_retire(K) while H1 mints
#     under K, then at once snowflake_registry_retire(K, false), and H2,
#     preferring K, starts. Promise: no ID of H1 under K later than the
#     retire's commit (the registry's clock, read right after it) plus
#     TTL/3 (1 s); H1 never holds K again, nor mints under it, within 10 s;
#     H2 gets K, if at all, only after H1's last lease_expires under K.
#  F. A wait is bounded: H1's clock +1 h (libfaketime), the registry's
#     max_ahead 1 h. Single snowflake_nextval() calls, 1.5 s apart, for 20 s.
#     Promise: each call ends within 2.5 s (measured on the server around
#     the call; the client's time, connection included, is logged), and
#     each failure is 55000 with a message or DETAIL about the lease.
#  G. One member cannot hold the fleet hostage: the login role greedy, a
#     member of snowflake_lease, calls snowflake_registry_claim() herself
#     with random tokens. Promise: her second live lease is refused with
#     53400; after snowflake_registry_role_limit('greedy', 3) three live
#     leases are allowed and the fourth refused (53400); a claim whose
#     frontier is the registry's clock + 59 min is refused, or leaves the
#     row's reserved_until_ms at most the registry's clock + max_ahead
#     (1 minute, the default) + the TTL.
#  H. A restart after a crash mints within one TTL of it (issue 56): H1,
#     its lease_ttl left at the default (15 s, renewed every 5 s), mints;
#     right after the registry shows a renewal (the crashed run's lease
#     then lives nearly a TTL more) its postmaster and every child are
#     stopped, then killed with SIGKILL (a host failure: a child killed
#     while running learns of its postmaster's death and may release the
#     lease first), and H1 starts again at once. Its new token is refused
#     (53400, its role's one live lease is the crashed run's) until that
#     lease runs out. The restarted run's first ID (the earlier of the mint
#     loop's and of a snowflake_nextval() tried every 20 ms) is logged
#     with the crashed run's lease_expires (the registry's, read before the
#     crash). Promise: the first ID at most TTL + 1 s after the crash, at
#     most 1 s after that lease expired, and not before; every ID of the restarted run above
#     every committed ID of the crashed run (a statement the crash cut
#     short stored none: its IDs cannot be checked). The 1 s is for what
#     follows the expiry: the lease worker's wake-up at the time the
#     refusal named, one claim on a local registry and the 20 ms poll, some
#     80 ms on a loaded 2-core machine; the restart (1 to 5 s here, most of
#     it the fsync of the data directory before crash recovery) overlaps
#     the lease's remaining life, so the bound holds while a restart takes
#     less than a TTL. Then a late restart: h1 crashes again right after
#     a renewal and is started so that it is up 12 s before the crashed
#     run's lease runs out (the restart's length measured in the round
#     before); promises as above but the TTL + 1 s (the restart itself is
#     later). Up to 3 tries, until one is up 10.5-13 s before the expiry
#     (or 6.5-8.5 s, aimed at once a restart proves too slow for 12 s):
#     there a lease worker that asked again on its back-off instead of
#     when the refusal said comes more than a second late. Before d2d6203
#     the worker did (1, 2, 3, 6, 10, 15 s after the first refusal, then
#     every TTL/3): the first round passed or failed with the phase of
#     those steps (68208ac passed it once, 812 ms after the expiry, and
#     failed it twice, 1.2 and 1.7 s after), the late restart fails on it
#     whatever the phase (2.4 s after). Three tries in neither window
#     (a machine too slow) are logged, not failed; each still checks the
#     promises.
# LEASE_PROMISE_ONLY="B C" runs some scenarios only; each starts and stops
# its own minting servers. Every wait is a poll with a bound only a hung
# machine reaches; every cluster is stopped and every stopped process
# continued on exit.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/lease.sh"
if [ "$PG_MAJOR" != 18 ] && [ "${SNOWFLAKE_LEASE_PROMISE_ANY_MAJOR:-}" != 1 ]; then
    skip_test "runs on 18 (SNOWFLAKE_LEASE_PROMISE_ANY_MAJOR=1 runs it on $PG_MAJOR)"
fi
BASE=$(state_dir "$ROOT/.run/it-lease-promise" it-lease-promise)
T0=$(date +%s)
K=5          # the contested worker id
TOL_US=5000  # 5 ms: see the header

# --- helpers (the rest: lib/lease.sh) -------------------------------------
fake_clock "$BASE/faketime"   # one clock: rega's in A, f1's in F (never up at once)
PORT0=${SNOWFLAKE_IT_LEASE_PROMISE_PORT:-15900}   # the registries, minting servers and the relay: +0..+14
nodes "$PORT0" reg rega a1 a2 a3 a4 b1 b2 c1 d1 e1 e2 f1 h1
MINTERS=("${NODES[@]:2}")
# shellcheck disable=SC2034  # read by all_stop (lib/lease.sh)
REGISTRIES=(rega reg)
RELAY_PORT=$((PORT0 + ${#NODES[@]}))
RELAY_DIR="$BASE/relay"
RELAY_PID=""
stop_own() { relay_stop; }

now_us() { date +%s%6N; }
# ms DELTA_US: a difference of microseconds in ms, one decimal.
ms() { awk -v d="$1" 'BEGIN { printf "%.1f", d / 1000 }'; }

# make_tables NODE: the extension, the record of IDs, failures and lease
# samples, and the procedures that fill them.
make_tables() {
    q "$1" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" -c "
CREATE TABLE ids (id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
                  at timestamptz NOT NULL DEFAULT clock_timestamp(), srv text NOT NULL DEFAULT '$1');
CREATE TABLE errs (at timestamptz NOT NULL DEFAULT clock_timestamp(), state text, msg text, detail text);
CREATE TABLE watch (at timestamptz NOT NULL, worker integer, expires timestamptz);
CREATE TABLE ctl (stop boolean NOT NULL);
INSERT INTO ctl VALUES (false);
CREATE FUNCTION us(t timestamptz) RETURNS bigint LANGUAGE sql IMMUTABLE
    AS \$\$ SELECT (extract(epoch FROM t) * 1000000)::bigint \$\$;
CREATE PROCEDURE mint_loop() LANGUAGE plpgsql AS \$p\$
DECLARE st text; m text; d text;
BEGIN
    WHILE NOT (SELECT stop FROM ctl) LOOP
        BEGIN
            INSERT INTO ids (srv) SELECT '$1' FROM generate_series(1, 50);
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL;
            INSERT INTO errs (state, msg, detail) VALUES (st, m, d);
            PERFORM pg_sleep(0.01);
        END;
        COMMIT;
        PERFORM pg_sleep(0.002);  -- some 10,000 IDs a second, not the machine's all
    END LOOP;
END \$p\$;
CREATE PROCEDURE watch_loop() LANGUAGE plpgsql AS \$p\$
DECLARE w integer; e timestamptz; pw integer := -2; pe timestamptz;
BEGIN
    WHILE NOT (SELECT stop FROM ctl) LOOP
        SELECT lease_worker_id, lease_expires INTO w, e FROM snowflake_stats();
        IF w IS DISTINCT FROM pw OR e IS DISTINCT FROM pe THEN
            INSERT INTO watch VALUES (clock_timestamp(), w, e);
            pw := w; pe := e;
        END IF;
        COMMIT;
        PERFORM pg_sleep(0.01);
    END LOOP;
END \$p\$;
-- One call of snowflake_nextval(): SQLSTATE (ok), ms on this server's clock, message, DETAIL.
CREATE FUNCTION probe() RETURNS text LANGUAGE plpgsql AS \$f\$
DECLARE t0 timestamptz := clock_timestamp(); st text := 'ok'; m text := ''; d text := '';
BEGIN
    BEGIN
        PERFORM snowflake_nextval();
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL;
    END;
    RETURN concat_ws('|', st, round(extract(epoch FROM clock_timestamp() - t0) * 1000),
                     translate(m, E'|\n', '/ '), translate(coalesce(d, ''), E'|\n', '/ '));
END \$f\$;
-- The first ID of a snowflake_nextval() tried every 20 ms for at most SECS,
-- recorded in ids: ID, its at (µs), calls, the failure before it (SQLSTATE,
-- message, DETAIL); no ID: empty.
CREATE FUNCTION first_id(secs float8) RETURNS text LANGUAGE plpgsql AS \$f\$
DECLARE t0 timestamptz := clock_timestamp(); i bigint; a timestamptz; n integer := 0;
        st text := ''; m text := ''; d text := '';
BEGIN
    LOOP
        n := n + 1;
        BEGIN
            INSERT INTO ids (srv) VALUES ('$1') RETURNING id, at INTO i, a;
            EXIT;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL;
        END;
        EXIT WHEN clock_timestamp() > t0 + make_interval(secs => secs);
        PERFORM pg_sleep(0.02);
    END LOOP;
    RETURN concat_ws('|', coalesce(i::text, ''), coalesce(us(a)::text, ''), n, st,
                     translate(m, E'|\n', '/ '), translate(coalesce(d, ''), E'|\n', '/ '));
END \$f\$;"
}
# record NODE: its clients start minting and sampling its lease.
record() {
    q "$1" -c "UPDATE ctl SET stop = false"
    q "$1" -c "CALL mint_loop()" >>"$(dir_of "$1")/clients.log" 2>&1 & BG+=($!)
    q "$1" -c "CALL watch_loop()" >>"$(dir_of "$1")/clients.log" 2>&1 & BG+=($!)
}
# unrecord NODE...: their clients stop (each within its current statement).
unrecord() {
    local n p
    for n in "$@"; do q "$n" -c "UPDATE ctl SET stop = true"; done
    for p in "${BG[@]}"; do
        poll_until 120 gone "$p" || die "a recording client (PID $p) did not end within 120 s of its stop"
    done
    BG=()
}
gone() { ! kill -0 "$1" 2>/dev/null; }

# minting LABEL NODE [W]: NODE started, its tables made, leased (W, the
# id it prefers of a new registry, where given) and recording, until it
# has minted 1000 IDs under its lease.
minting() {
    local label="$1" n="$2"
    start "$n"; make_tables "$n"; leased "$n"
    [ -z "${3:-}" ] || [ "${LEASE[$n]}" = "$3" ] || die "$label: $n prefers worker id $3 of a new registry, but leased ${LEASE[$n]}"
    record "$n"
    poll_until 60 minted_under "$n" "${LEASE[$n]}" 1000 || die "$label: $n minted no 1000 IDs within 60 s"
}
# minted_under NODE W N: NODE has minted N IDs or more under worker id W.
minted_under() { [ "$(q "$1" -c "SELECT count(*) >= $3 FROM ids WHERE snowflake_worker_id(id) = $2")" = t ]; }
# minted_more NODE N: NODE has more than N + 100 IDs.
minted_more() { [ "$(q "$1" -c "SELECT count(*) > $2 + 100 FROM ids")" = t ]; }
# clock_past NODE US: NODE's clock is past US (Unix µs).
clock_past() { [ "$(q "$1" -c "SELECT us(clock_timestamp()) > $2")" = t ]; }
machine_past() { [ "$(now_us)" -gt "$1" ]; }
# got_us NODE W: when NODE first held W (Unix µs; empty if never): its
# first sample showing W, or its first ID under W, the earlier.
got_us() {
    q "$1" -c "SELECT least((SELECT us(min(at)) FROM watch WHERE worker = $2),
                            (SELECT us(min(at)) FROM ids WHERE snowflake_worker_id(id) = $2))"
}
# after NODE W US: count, first and last `at` (µs) of NODE's IDs under W
# with `at` above US.
after() {
    q "$1" -c "SELECT count(*), coalesce(us(min(at)), 0), coalesce(us(max(at)), 0)
                 FROM ids WHERE snowflake_worker_id(id) = $2 AND us(at) > $3"
}
# errs_other NODE: the failures recorded on NODE other than 55000.
errs_other() {
    q "$1" -c "SELECT coalesce(string_agg(DISTINCT state || ' ' || msg, '; '), '') FROM errs WHERE state <> '55000'"
}
errs_summary() {
    q "$1" -c "SELECT coalesce(string_agg(format('%s x %s', n, state), ', '), 'none')
                 FROM (SELECT state, count(*) n FROM errs GROUP BY state) s"
}
PROBE=""
# probe_after NODE DEADLINE_US: a call on NODE once its clock is 2 s past
# DEADLINE_US; FAILS gets why unless it fails with 55000 within 2.5 s.
probe_after() {
    local n="$1" dl="$2" st pms msg
    poll_until 60 clock_past "$n" $((dl + 2000000)) || die "$n: its clock did not pass its deadline + 2 s within 60 s"
    PROBE=$(q "$n" -c "SELECT probe()")
    IFS='|' read -r st pms msg _ <<<"$PROBE"
    log "   a call 2 s after the deadline: $st in $pms ms ($msg)"
    [ "$st" = 55000 ] || FAILS+=("a call on $n 2 s after its deadline ended with '$st' ($msg), expected 55000")
    [ "$pms" -le 2500 ] || FAILS+=("a call on $n 2 s after its deadline took $pms ms, expected at most 2500")
}
FAILS=()
# verdict LABEL: die naming every failed check of the scenario, first first.
verdict() {
    local f
    if [ ${#FAILS[@]} -gt 0 ]; then
        for f in "${FAILS[@]}"; do printf '\033[1;31mFAILED:\033[0m %s: %s\n' "$1" "$f" >&2; done
        die "$1: ${#FAILS[@]} promise(s) broken (after $(($(date +%s) - SC_T0)) s); the first: ${FAILS[0]}"
    fi
    log "$1: passed in $(($(date +%s) - SC_T0)) s"
}

# sigstop PID...: stop them, and wait until they are.
sigstop() {
    local p
    for p in "$@"; do kill -STOP "$p"; FROZEN+=("$p"); done
    poll_until 30 all_stopped "$@" || die "not every one of $* stopped within 30 s of SIGSTOP"
}

relay_up() { [ -S "$RELAY_DIR/.s.PGSQL.$RELAY_PORT" ] && [ -s "$RELAY_DIR/pid" ]; }
relay_start() {
    rm -rf "$RELAY_DIR"; mkdir -p "$RELAY_DIR"; chmod 755 "$RELAY_DIR"
    python3 "$ROOT/tests/integration/relay.py" "$RELAY_DIR/.s.PGSQL.$RELAY_PORT" \
        "$(dir_of reg)/.s.PGSQL.${PORT_OF[reg]}" "$RELAY_DIR/pid" >"$BASE/relay.log" 2>&1 &
    RELAY_PID=$!
    poll_until 30 relay_up || die "the relay did not listen within 30 s ($(cat "$BASE/relay.log"))"
    [ "$(cat "$RELAY_DIR/pid")" = "$RELAY_PID" ] || die "the relay's PID file says $(cat "$RELAY_DIR/pid"), expected $RELAY_PID"
}
relay_stop() {
    [ -n "$RELAY_PID" ] || return 0
    kill -CONT "$RELAY_PID" 2>/dev/null || true
    kill "$RELAY_PID" 2>/dev/null || true
    wait "$RELAY_PID" 2>/dev/null || true
    RELAY_PID=""
}

# --- scenarios -------------------------------------------------------------
# a_case H1 H2 DB FROM TO: one clock step of A.
a_case() {
    local h1="$1" h2="$2" db="$3" from="$4" to="$5" r0 t_step off g cnt first last
    log "   registry clock $from; $h1 claims worker id $K and renews"
    setclock "$from"
    registry_db rega "$db" "max_ahead => interval '3 hours'"
    mint_init "$h1" rega "$db" "snowflake_id.worker_id = $K" "snowflake_id.lease_ttl = '15s'"
    mint_init "$h2" rega "$db" "snowflake_id.worker_id = $K"
    start "$h1"; make_tables "$h1"; leased "$h1"
    [ "${LEASE[$h1]}" = "$K" ] || die "A: $h1 prefers worker id $K of a new registry, but leased ${LEASE[$h1]}"
    record "$h1"
    r0=$(renewed_at rega "$db" "$K")
    poll_until 60 renewed_since rega "$db" "$K" "$r0" || die "A: $h1's lease was not renewed within 60 s (renewals every 5 s)"
    setclock "$to"
    t_step=$(now_us)
    off=$(q rega -c "SELECT round(extract(epoch FROM clock_timestamp()) - $(date +%s.%N))")
    log "   right after a renewal the registry's clock steps to $to (now ${off} s off); $h2 starts, preferring $K"
    if [ "${off#-}" -lt 7000 ] || [ "${off#-}" -gt 7400 ]; then die "A: the registry's clock is $off s off, expected about 7200 s ($to)"; fi
    start "$h2"; make_tables "$h2"; record "$h2"
    # H2 may be refused every id for a while: only K matters here.
    if poll_until 30 has_lease "$h2"; then
        LEASE[$h2]=$(lease_of "$h2")
        log "   $h2 leased worker id ${LEASE[$h2]} $(ms $(($(now_us) - t_step))) ms after the step"
    else
        LEASE[$h2]=none
        log "   $h2 leased no worker id within 30 s of its start ($(stats_of "$h2"))"
    fi
    # Both mint for longer than H1's renewal period (5 s) more: a holder
    # that lost K notices at its next renewal.
    poll_until 60 machine_past $(($(now_us) + 7000000)) || true
    if [ "${LEASE[$h2]}" != none ]; then
        poll_until 60 minted_under "$h2" "${LEASE[$h2]}" 100 || die "A: $h2 minted no IDs under its lease ${LEASE[$h2]} within 60 s"
    fi
    unrecord "$h1" "$h2"
    g=$(got_us "$h2" "$K")
    read -r cnt first last < <(after "$h1" "$K" "$t_step")
    log "   $h1 minted $cnt IDs under $K after the step (the last $(ms $((last - t_step))) ms after it); errors on $h1: $(errs_summary "$h1")"
    if [ -z "$g" ]; then
        log "   $h2 never held $K (it holds ${LEASE[$h2]})"
    else
        read -r cnt first last < <(after "$h1" "$K" "$g")
        log "   $h2 got $K $(ms $((g - t_step))) ms after the step; $h1 minted $cnt IDs under $K after that"
        [ "$cnt" = 0 ] || FAILS+=("registry clock $from -> $to: $h2 got worker id $K $(ms $((g - t_step))) ms after the step, and $h1 minted $cnt IDs under $K after that, over $(ms $((last - first))) ms, the last $(ms $((last - g))) ms after $h2 got it; expected none")
    fi
    stop "$h2" "$h1"
}

scenarioA() {
    log "A. the registry's clock steps 2 h (behind -> ahead, then ahead -> behind): never two holders of one id"
    setclock "+0"
    registry_server rega start_faked "${MINTERS[@]/#/lease_}" greedy
    a_case a1 a2 reg_a1 "-2h" "+2h"
    a_case a3 a4 reg_a2 "+2h" "-2h"
    stop rega
    verdict A
}

scenarioB() {
    local lw dl g cnt first last other lastall
    log "B. H1's lease worker stopped (SIGSTOP) while H1 mints; H2 takes worker id $K once it expired"
    registry_db reg reg_b
    mint_init b1 reg reg_b "snowflake_id.worker_id = $K"
    mint_init b2 reg reg_b "snowflake_id.worker_id = $K"
    minting B b1 "$K"
    lw=$(lease_worker_of b1)
    sigstop "$lw"
    dl=$(q b1 -c "SELECT us(lease_expires) FROM snowflake_stats()")
    [ -n "$dl" ] || die "B: b1 shows no lease_expires right after its lease worker stopped (the lease was live)"
    log "   b1's lease worker (PID $lw) stopped; its lease_expires: $(ms $((dl - $(now_us)))) ms from now"
    poll_until 60 is_state reg reg_b "$K" expired \
        || die "B: the registry shows worker id $K '$(holder_state reg reg_b "$K")' 60 s after b1's lease worker stopped, expected 'expired'"
    start b2; make_tables b2; record b2; leased b2
    log "   b2 leased worker id ${LEASE[b2]}"
    probe_after b1 "$dl"
    poll_until 60 minted_under b2 "${LEASE[b2]}" 100 || die "B: b2 minted no IDs under its lease within 60 s"
    unrecord b1 b2
    thaw
    read -r cnt first last < <(after b1 "$K" $((dl + TOL_US)))
    lastall=$(q b1 -c "SELECT coalesce(us(max(at)), 0) FROM ids WHERE snowflake_worker_id(id) = $K")
    log "   b1 minted $cnt IDs under $K more than 5 ms after its deadline (its last ID under $K: $(ms $((lastall - dl))) ms after the deadline); errors on b1: $(errs_summary b1)"
    [ "$cnt" = 0 ] || FAILS+=("b1 minted $cnt IDs under worker id $K after its lease_expires (+5 ms), the last $(ms $((last - dl))) ms after it; expected none")
    g=$(got_us b2 "$K")
    if [ -n "$g" ]; then
        read -r cnt first last < <(after b1 "$K" "$g")
        log "   b2 got $K $(ms $((g - dl))) ms after b1's deadline; b1 minted $cnt IDs under $K after that"
        [ "$cnt" = 0 ] || FAILS+=("b2 got worker id $K, and b1 minted $cnt IDs under it after that, the last $(ms $((last - g))) ms after; expected every ID of b1 under $K before b2 got it")
    else
        log "   b2 never held $K (it holds ${LEASE[b2]})"
    fi
    other=$(errs_other b1)
    [ -z "$other" ] || FAILS+=("b1's minting failed with other errors than 55000: $other")
    stop b1 b2
    verdict B
}

# outage NODE HOW: C (HOW=registry) and D (HOW=relay).
outage() {
    local n="$1" how="$2" label="$3" pm dl t_thaw cnt first last other dlw lastall
    log "$label. H1 cut off from the registry ($how stopped): no ID past its deadline, then 55000; resumed without a restart"
    registry_db reg "reg_$n"
    if [ "$how" = relay ]; then
        relay_start
        mint_init "$n" reg "reg_$n" "snowflake_id.registry = 'host=$RELAY_DIR port=$RELAY_PORT dbname=reg_$n user=lease_$n'"
    else
        mint_init "$n" reg "reg_$n"
    fi
    minting "$label" "$n"
    pm=$(postmaster_of "$n")
    if [ "$how" = relay ]; then sigstop "$RELAY_PID"; else freeze reg; fi
    dl=$(q "$n" -c "SELECT us(lease_expires) FROM snowflake_stats()")
    [ -n "$dl" ] || die "$label: $n shows no lease_expires right after the $how stopped (the lease was live)"
    log "   the $how stopped; $n's lease_expires: $(ms $((dl - $(now_us)))) ms from now"
    probe_after "$n" "$dl"
    t_thaw=$(now_us)
    thaw
    poll_until 120 minted_more "$n" "$(q "$n" -c "SELECT count(*) FROM ids")" \
        || FAILS+=("$n minted no 100 IDs within 120 s of the $how's continuation ($(stats_of "$n"))")
    log "   the $how continued: $n mints again after ${POLL_MS} ms"
    [ "$(postmaster_of "$n")" = "$pm" ] || FAILS+=("$n's postmaster was $pm, now $(postmaster_of "$n"): expected no restart")
    unrecord "$n"
    # A renewal answered just before the stop may have been published after
    # the read above: the latest deadline seen before the continuation.
    dlw=$(q "$n" -c "SELECT coalesce(us(max(expires)), 0) FROM watch WHERE worker = ${LEASE[$n]} AND us(at) < $t_thaw")
    [ "$dlw" -le "$dl" ] || { log "   a later lease_expires was sampled before the continuation: +$(ms $((dlw - dl))) ms"; dl=$dlw; }
    read -r cnt first last < <(q "$n" -c "SELECT count(*), coalesce(us(min(at)), 0), coalesce(us(max(at)), 0) FROM ids
                                           WHERE snowflake_worker_id(id) = ${LEASE[$n]} AND us(at) > $((dl + TOL_US)) AND us(at) < $t_thaw")
    lastall=$(q "$n" -c "SELECT coalesce(us(max(at)), 0) FROM ids WHERE snowflake_worker_id(id) = ${LEASE[$n]} AND us(at) < $t_thaw")
    log "   $n minted $cnt IDs more than 5 ms after its deadline and before the continuation (its last ID before it: $(ms $((lastall - dl))) ms after the deadline); errors: $(errs_summary "$n")"
    [ "$cnt" = 0 ] || FAILS+=("$n minted $cnt IDs under worker id ${LEASE[$n]} after its lease_expires (+5 ms) with the $how stopped, the last $(ms $((last - dl))) ms after it; expected none")
    other=$(errs_other "$n")
    [ -z "$other" ] || FAILS+=("$n's minting failed with other errors than 55000: $other")
    stop "$n"
    relay_stop
    verdict "$label"
}
scenarioC() { outage c1 registry C; }
scenarioD() { outage d1 relay D; }

scenarioE() {
    local c t_drop again cnt first last dl g
    log "E. snowflake_registry_retire($K) while H1 mints under it, then put back at once: H1 stops within TTL/3 and never gets $K back"
    registry_db reg reg_e
    mint_init e1 reg reg_e "snowflake_id.worker_id = $K"
    mint_init e2 reg reg_e "snowflake_id.worker_id = $K"
    minting E e1 "$K"
    c=$(q reg -d reg_e -c "SELECT snowflake_registry_retire($K)" \
           -c "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint" | tail -1)
    q reg -d reg_e -c "SELECT snowflake_registry_retire($K, false)" >/dev/null
    log "   retired and put back $(ms $(($(now_us) - c))) ms after the retire's commit; e2 starts, preferring $K"
    start e2; make_tables e2; record e2
    poll_until 60 machine_past $((c + 10000000)) || true
    unrecord e1 e2
    # The end of e1's lease on K: its first sample without K after the retire.
    t_drop=$(q e1 -c "SELECT coalesce(us(min(at)), 0) FROM watch WHERE worker IS DISTINCT FROM $K AND us(at) > $c")
    [ "$t_drop" != 0 ] || t_drop=$((c + 10000000))
    read -r cnt first last < <(q e1 -c "SELECT count(*), coalesce(us(min(at)), 0), coalesce(us(max(at)), 0) FROM ids
                                         WHERE snowflake_worker_id(id) = $K AND us(at) > $((c + 1000000)) AND us(at) <= $t_drop")
    log "   e1 dropped $K $(ms $((t_drop - c))) ms after the retire; $cnt IDs under $K more than 1 s after it$([ "$cnt" = 0 ] || echo " (the last at +$(ms $((last - c))) ms)")"
    [ "$cnt" = 0 ] || FAILS+=("e1 minted $cnt IDs under worker id $K more than TTL/3 (1 s) after the retire's commit, the last $(ms $((last - c))) ms after it; expected none")
    again=$(q e1 -c "SELECT coalesce(us(min(at)), 0) FROM watch WHERE worker = $K AND us(at) > $t_drop")
    read -r cnt first last < <(after e1 "$K" "$t_drop")
    if [ "$again" != 0 ] || [ "$cnt" != 0 ]; then
        FAILS+=("e1 held worker id $K again $(ms $((again - c))) ms after the retire and minted $cnt IDs under it (from +$(ms $((first - c))) to +$(ms $((last - c))) ms); expected never within 10 s")
    fi
    log "   e1 afterwards: $(stats_of e1); errors: $(errs_summary e1)"
    dl=$(q e1 -c "SELECT coalesce(us(max(expires)), 0) FROM watch WHERE worker = $K AND us(at) <= $t_drop")
    g=$(got_us e2 "$K")
    if [ -n "$g" ]; then
        log "   e2 got $K $(ms $((g - c))) ms after the retire; e1's last lease_expires under it: +$(ms $((dl - c))) ms"
        read -r cnt first last < <(after e1 "$K" "$g")
        log "   e1 minted $cnt IDs under $K after e2 got it$([ "$cnt" = 0 ] || echo ", the last $(ms $((last - g))) ms after")"
        [ "$cnt" = 0 ] || FAILS+=("e2 got worker id $K $(ms $((g - c))) ms after the retire, and e1 minted $cnt IDs under it after that, the last $(ms $((last - g))) ms after; expected every ID of e1 under $K before e2 got it")
        [ "$g" -ge "$dl" ] || FAILS+=("e2 got worker id $K $(ms $((g - c))) ms after the retire, $(ms $((dl - g))) ms before e1's lease on it expired (its last lease_expires); expected not before")
    else
        log "   e2 never held $K ($(stats_of e2))"
    fi
    stop e1 e2
    verdict E
}

scenarioF() {
    local off i t_start st pms msg detail c0 c1 cms out durs=() bad=()
    log "F. H1's clock 1 h ahead, max_ahead 1 h: each snowflake_nextval() ends within 2.5 s, failures are 55000 about the lease"
    registry_db reg reg_f "max_ahead => interval '1 hour'"
    mint_init f1 reg reg_f
    setclock "+1h"
    start_faked f1
    off=$(q f1 -c "SELECT round(extract(epoch FROM clock_timestamp()) - $(date +%s.%N))")
    if [ "$off" -lt 3500 ] || [ "$off" -gt 3700 ]; then die "F: f1's clock is $off s off, expected about +3600 s (libfaketime)"; fi
    make_tables f1
    poll_until 30 has_lease f1 || log "   f1 holds no lease 30 s after its start ($(stats_of f1))"
    log "   f1 ($off s ahead): $(stats_of f1)"
    t_start=$(now_us)
    for i in $(seq 0 19); do
        [ "$(now_us)" -lt $((t_start + 20000000)) ] || break
        poll_until 60 machine_past $((t_start + i * 1500000)) || true
        c0=$(now_us)
        out=$(q f1 -c "SET statement_timeout = '25s'" -c "SELECT probe()" 2>&1) || out="psql|0|$out|"
        c1=$(now_us); cms=$(( (c1 - c0) / 1000 ))
        IFS='|' read -r st pms msg detail <<<"$out"
        durs+=("$pms")
        log "   call $((i + 1)): $st after $pms ms on the server, $cms ms at the client${msg:+: $msg}${detail:+ / $detail}"
        if [ "$st" = psql ] || ! [ "$pms" -le 2500 ]; then
            bad+=("call $((i + 1)) took $pms ms on the server ($cms ms at the client) and ended '$st'")
        elif [ "$st" != ok ] && { [ "$st" != 55000 ] || ! grep -qi lease <<<"$msg $detail"; }; then
            bad+=("call $((i + 1)) failed with '$st' ($msg / $detail), expected 55000 saying why (the lease)")
        fi
    done
    log "   ${#durs[@]} calls in $(ms $(($(now_us) - t_start))) ms; server-side ms: ${durs[*]}"
    [ ${#bad[@]} = 0 ] || FAILS+=("${#bad[@]} of ${#durs[@]} calls broke the bound: $(printf '%s; ' "${bad[@]}" | sed 's/; $//')")
    [ ${#durs[@]} -ge 5 ] || FAILS+=("only ${#durs[@]} calls fitted in 20 s; expected each to end within 2.5 s")
    stop f1
    verdict F
}

# greedy_claim FRONTIER_SQL: greedy's claim of a lease for 60 s with a
# new random token; sets CL (worker_id lease_epoch reserved_until_ms
# registry_now_ms, empty when no row), CL_STATE (ok or the SQLSTATE),
# CL_TOKEN, CL_ERR.
CL="" CL_STATE="" CL_TOKEN="" CL_ERR=""
greedy_claim() {
    local out
    CL_TOKEN=$(cat /proc/sys/kernel/random/uuid)
    if out=$(timeout 60 "$(pgbin)/psql" -X -q -At -F ' ' -h "$(dir_of reg)" -p "${PORT_OF[reg]}" -U greedy -d reg_g \
                -v ON_ERROR_STOP=1 -c '\set VERBOSITY verbose' \
                -c "SELECT c.worker_id, c.lease_epoch, c.reserved_until_ms, (extract(epoch FROM clock_timestamp()) * 1000)::bigint
                      FROM snowflake_registry_claim('$CL_TOKEN', 'greedy', 1, '1', '/greedy', -1,
                                                    $G_WB, $G_SB, $G_EPOCH, 60000, $1) c" 2>&1); then
        CL=$out CL_STATE=ok CL_ERR=""
    else
        CL="" CL_ERR=$(grep -m1 'ERROR:' <<<"$out" || echo "$out")
        CL_STATE=$(sed -nE 's/^ERROR: +([0-9A-Z]{5}):.*/\1/p' <<<"$CL_ERR" | head -1)
        CL_STATE=${CL_STATE:-unknown}
    fi
}
granted() { [ "$CL_STATE" = ok ] && [ -n "$CL" ]; }
REG_NOW_MS="(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
scenarioG() {
    local ids=() i n w ep tok ru now ahead out
    log "G. a member claims for herself: her second live lease refused (53400); role_limit 3 allows three; a far frontier is bounded"
    registry_db reg reg_g
    read -r G_WB G_SB G_EPOCH < <(q reg -d reg_g -c "SELECT worker_bits, sequence_bits, epoch_ms FROM snowflake_id_internal.snowflake_registry_config")
    greedy_claim "$REG_NOW_MS"
    granted || die "G: greedy's first claim failed ($CL_STATE: $CL_ERR), expected a lease"
    read -r w ep _ <<<"$CL"; ids+=("$w")
    log "   greedy's first claim: worker id $w"
    greedy_claim "$REG_NOW_MS"
    if [ "$CL_STATE" != 53400 ]; then
        n=1
        if granted; then
            read -r w _ <<<"$CL"; ids+=("$w"); n=2
            for i in 3 4 5; do
                greedy_claim "$REG_NOW_MS"
                if granted; then read -r w _ <<<"$CL"; ids+=("$w"); n=$i; else break; fi
            done
        fi
        FAILS+=("greedy's second live lease ended '$CL_STATE'${CL:+ (worker id ${ids[1]})}${CL_ERR:+: $CL_ERR}, expected 53400; she went on to hold ${#ids[@]} live leases of 5 tried (worker ids ${ids[*]})")
        verdict G
    fi
    log "   her second claim: $CL_ERR"
    out=$(q reg -d reg_g -c "SELECT snowflake_registry_role_limit('greedy', 3)" 2>&1) \
        || { FAILS+=("snowflake_registry_role_limit('greedy', 3) failed: $out"); verdict G; }
    for i in 2 3; do
        greedy_claim "$REG_NOW_MS"
        granted || { FAILS+=("with role_limit 3, greedy's live lease number $i ended '$CL_STATE' ($CL_ERR), expected a lease"); verdict G; }
        read -r w ep _ <<<"$CL"; ids+=("$w"); tok=$CL_TOKEN
    done
    greedy_claim "$REG_NOW_MS"
    log "   with role_limit 3: leases ${ids[*]}; the fourth claim: ${CL_STATE} ${CL_ERR}"
    [ "$CL_STATE" = 53400 ] || { FAILS+=("with role_limit 3, greedy's fourth live lease ended '$CL_STATE'${CL:+ (row $CL)}, expected 53400"); verdict G; }
    # Room for one more: she releases her last lease, then claims far ahead.
    out=$(timeout 60 "$(pgbin)/psql" -X -q -At -h "$(dir_of reg)" -p "${PORT_OF[reg]}" -U greedy -d reg_g -v ON_ERROR_STOP=1 \
            -c "SELECT snowflake_registry_release($w, '$tok', $ep)" 2>&1) || die "G: greedy's release of worker id $w failed: $out"
    [ "$out" = t ] || die "G: greedy's release of worker id $w returned '$out', expected t"
    ahead=$(q reg -d reg_g -c "SELECT least(max_ahead_ms, 60000) FROM snowflake_id_internal.snowflake_registry_config")
    greedy_claim "$REG_NOW_MS + 59 * 60000"
    if granted; then
        read -r w _ _ _ <<<"$CL"
        read -r ru now < <(q reg -d reg_g -c "SELECT reserved_until_ms, $REG_NOW_MS FROM snowflake_id_internal.snowflake_registry WHERE worker_id = $w")
        log "   a claim with a frontier 59 min ahead: worker id $w, reserved until now + $(( (ru - now) / 1000 )) s"
        [ "$ru" -le $((now + ahead + 60000)) ] \
            || FAILS+=("greedy's claim with a frontier 59 min ahead left worker id $w reserved until the registry's clock + $(( (ru - now) / 1000 )) s, expected at most + $(( (ahead + 60000) / 1000 )) s (max_ahead 1 min + the TTL)")
    else
        log "   a claim with a frontier 59 min ahead: refused, $CL_STATE: $CL_ERR"
    fi
    verdict G
}

# crash NODE: NODE's postmaster and every child killed at once, as a host
# failure would: all stopped first (the postmaster first, so that it forks
# no new child), then killed with SIGKILL. Killed while running, a child
# learns of its postmaster's death at once and may act on it first (the
# lease worker releases its lease). Then wait until all are gone and
# remove the socket's lock (the postmaster's PID may be in use again).
crash() {
    local pm kids p; pm=$(postmaster_of "$1")
    kill -STOP "$pm"
    kids=$(pgrep -P "$pm" || true)
    # shellcheck disable=SC2086
    kill -STOP $kids 2>/dev/null || true
    poll_until 30 halted "$pm" $kids || die "$1: not every process stopped within 30 s of SIGSTOP"
    # shellcheck disable=SC2086
    kill -9 $kids "$pm" 2>/dev/null || true
    for p in $pm $kids; do
        poll_until 30 gone "$p" || die "$1: process $p outlived kill -9 by 30 s"
    done
    rm -f "$(dir_of "$1")"/.s.PGSQL.*
}
# halted PID...: each stopped, or ended (a backend that was exiting).
halted() { local p s; for p in "$@"; do s=$(ps -o stat= -p "$p" || true); [[ -z "$s" || "$s" == [TZ]* ]] || return 1; done; }
# h_round LABEL LEAD_US: one crash of h1 right after a renewal, and its
# restart: at once (LEAD_US empty), or LEAD_US before the crashed run's
# lease runs out. Checks the restarted run's first ID (FAILS) and sets
# H_UP (µs from the restart to h1 up) and H_LEFT (µs the crashed run's
# lease had left when h1 was up: about when its first claim was refused).
h_round() {
    local label="$1" lead="$2" w exp_us t_crash t_restart t_up p out first_id first_at calls st msg detail first_us d lo hi cnt bad
    w=$(lease_of h1)
    [ -n "$w" ] || die "H: h1 holds no lease before its crash ($(stats_of h1))"
    # Right after a renewal the crashed run's lease lives longest: nearly
    # a TTL after the crash.
    p=$(renewed_at reg reg_h "$w")
    poll_until 60 renewed_since reg reg_h "$w" "$p" \
        || die "H: h1's lease (worker id $w) was not renewed within 60 s, expected a renewal every $((H_TTL / 3000)) s"
    exp_us=$(q reg -d reg_h -c "SELECT (extract(epoch FROM lease_expires) * 1000000)::bigint
                                  FROM snowflake_registry_holders WHERE worker_id = $w")
    t_crash=$(now_us)
    crash h1
    for p in "${BG[@]}"; do poll_until 60 gone "$p" || die "H: a recording client (PID $p) outlived h1's crash by 60 s"; done
    BG=()
    [ -z "$lead" ] || poll_until 60 machine_past $((exp_us - lead)) || die "H: the machine's clock did not reach the restart time within 60 s"
    t_restart=$(now_us)
    start h1
    t_up=$(now_us)
    H_UP=$((t_up - t_restart)); H_LEFT=$((exp_us - t_up))
    log "   $label: h1 (worker id $w, lease_ttl $H_TTL ms: the default) crashed $(ms $((t_crash - exp_us + H_TTL * 1000))) ms after a renewal; its lease_expires on the registry: $(ms $((exp_us - t_crash))) ms after the crash; restarted $(ms $((t_restart - t_crash))) ms after the crash, up $(ms $((t_up - t_crash))) ms after it, $(ms "$H_LEFT") ms before that lease ran out"
    record h1
    out=$(q h1 -c "SELECT first_id(60)")
    IFS='|' read -r first_id first_at calls st msg detail <<<"$out"
    [ -n "$first_id" ] || die "H: no ID from h1 within 60 s of its restart ($calls calls; the last: $st $msg / $detail; $(stats_of h1))"
    log "   the poll (every 20 ms) got its first ID at its call $calls, $(ms $((first_at - t_crash))) ms after the crash; the call before: ${st:-none} ${msg:+$msg / }$detail"
    poll_until 60 minted_more h1 "$(q h1 -c "SELECT count(*) FROM ids")" || die "H: h1 minted no 100 IDs within 60 s of its first ($(stats_of h1))"
    unrecord h1
    # The restarted run's first ID: the poll's or the mint loop's, the earlier.
    first_us=$(q h1 -c "SELECT us(min(at)) FROM ids WHERE us(at) > $t_restart")
    d=$((first_us - t_crash))
    log "   the restarted run's first ID: $(ms "$d") ms after the crash, $(ms $((first_us - exp_us))) ms after the crashed run's lease expired; worker id $(lease_of h1); its failures before: $(errs_summary h1)"
    # Restarted at once, within TTL + 1 s of the crash (a late restart is
    # itself later than that).
    [ -n "$lead" ] || [ "$d" -le $(((H_TTL + 1000) * 1000)) ] \
        || FAILS+=("$label: the restarted run's first ID came $(ms "$d") ms after the crash, $(ms $((first_us - exp_us))) ms after the crashed run's lease expired (h1 was up again $(ms $((t_up - t_crash))) ms after the crash); expected at most TTL + 1 s ($((H_TTL + 1000)) ms) after the crash")
    # The documented wait: until the crashed run's lease runs out, and
    # not a back-off step longer.
    [ $((first_us - exp_us)) -le 1000000 ] \
        || FAILS+=("$label: the restarted run's first ID came $(ms $((first_us - exp_us))) ms after the crashed run's lease expired; expected at most 1 s (the lease worker asks again when the refusal says the lease runs out)")
    [ "$first_us" -ge $((exp_us - TOL_US)) ] \
        || FAILS+=("$label: the restarted run's first ID came $(ms $((exp_us - first_us))) ms before the crashed run's lease expired; expected none while it lived (its role may hold one live lease)")
    # Committed IDs only: those of the statement the crash cut short were
    # never stored, and the crashed run's last_id died with it.
    read -r hi lo cnt < <(q h1 -c "SELECT (SELECT max(id) FROM ids WHERE us(at) < $t_restart), min(id), count(*)
                                     FROM ids WHERE us(at) > $t_restart")
    bad=$(q h1 -c "SELECT count(*) FROM ids WHERE us(at) > $t_restart AND id <= $hi")
    log "   $cnt IDs of the restarted run, from $lo; the crashed run's committed IDs end at $hi; $bad of the new ones at or below it"
    [ "$bad" = 0 ] || FAILS+=("$label: $bad IDs of the restarted run are at or below the crashed run's highest committed ID $hi (the lowest: $lo); expected every one above")
}
scenarioH() {
    local src lead try target hit=""
    log "H. a crash and an immediate restart at the default TTL: the first ID within TTL + 1 s of the crash, above every ID of the crashed run; then a late restart"
    registry_db reg reg_h
    MINT_TTL="" mint_init h1 reg reg_h   # snowflake_id.lease_ttl left at its default
    minting H h1
    read -r H_TTL src < <(q h1 -c "SELECT setting, source FROM pg_settings WHERE name = 'snowflake_id.lease_ttl'")
    [ "$src" = default ] || die "H: h1's snowflake_id.lease_ttl is $H_TTL ms from '$src', expected the default"
    h_round "at once" ""
    # The late restart: h1 up 12 s before the crashed run's lease runs
    # out (the restart's length measured in the round before), so that it
    # is refused for 12 s: a worker that asked again on a back-off grown
    # over that time, not when the refusal said, would come seconds late
    # (68208ac's asked 1, 2, 3, 6, 10 and 15 s after its first refusal:
    # its first ID came some 3 s after the expiry), whatever the phase of
    # its steps. A try tells such a back-off apart when h1 was up 10.5 to
    # 13 s before the expiry (its step at 15 s comes 1.6 s late or more),
    # or, where crashing and restarting take too long for that, 6.5 to
    # 8.5 s before (its step at 10 s: 1.1 s late or more). Every try keeps
    # the promises; one outside both windows is not counted, and three of
    # them leave the late restart unproven, which is logged, not failed (a
    # busy machine).
    target=12000000
    for try in 1 2 3; do
        lead=$((H_UP + target))
        record h1
        poll_until 60 minted_more h1 "$(q h1 -c "SELECT count(*) FROM ids")" || die "H: h1 minted no 100 IDs within 60 s ($(stats_of h1))"
        h_round "late restart, try $try" "$lead"
        if [ "$H_LEFT" -ge 10500000 ] && [ "$H_LEFT" -le 13000000 ]; then hit=1; break; fi
        if [ "$H_LEFT" -ge 6500000 ] && [ "$H_LEFT" -le 8500000 ]; then hit=1; break; fi
        # Too slow to be up 10.5 s before: aim at 7.5 s.
        [ "$H_LEFT" -gt 13000000 ] || target=7500000
        log "   h1 was up $(ms "$H_LEFT") ms before the lease ran out, in neither window (10.5-13 s, 6.5-8.5 s): not counted"
    done
    if [ -n "$hit" ]; then
        log "   the late restart was up $(ms "$H_LEFT") ms before the lease ran out: a back-off would have shown"
    else
        log "   NOTE: no try of the late restart fell in a window where a back-off would show (the machine was slow); its promises held"
    fi
    stop h1
    verdict H
}

trap all_stop EXIT
all_stop
ALL="A B C D E F G H"
for s in ${LEASE_PROMISE_ONLY:-}; do
    [[ " $ALL " == *" $s "* ]] || die "LEASE_PROMISE_ONLY: no scenario '$s' (have $ALL)"
done
if [[ " ${LEASE_PROMISE_ONLY:-$ALL} " =~ \ [B-H]\  ]]; then registry_server reg start "${MINTERS[@]/#/lease_}" greedy; fi
for s in $ALL; do
    if [[ " ${LEASE_PROMISE_ONLY:-$ALL} " == *" $s "* ]]; then
        SC_T0=$(date +%s); FAILS=()
        "scenario$s"
    fi
done
log "lease_promise: scenarios ${LEASE_PROMISE_ONLY:-$ALL} passed in $(($(date +%s) - T0)) s"
