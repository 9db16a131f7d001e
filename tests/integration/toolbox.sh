#!/usr/bin/env bash
# No duplicate across the operator's toolbox. Before each operation the
# old server has run ahead of its clock (max_lead = 1h and a 20M-ID burst,
# about 5 s of lead, handed out and never stored) and holds a
# 300,000-row table keyed by snowflake_nextval(); afterwards the server's
# clock is 1 h behind (libfaketime). A PRIMARY KEY is the judge of "minted
# again", and every new ID must be above every ID handed out before, the
# burst included: the high-water mark (src/mint/high_water.rs) carries it.
#  1. pg_upgrade --copy within the major, state file not copied: above
#     every ID handed out, from the table's database and from a database
#     with no tables.
#  2. pg_upgrade --link with the old state file copied in: refused (55000,
#     another cluster's file) until snowflake_accept_configuration(); then
#     above every ID the old server issued.
#  3. (PostgreSQL 18) pg_upgrade --link from 17, and --swap within 18,
#     without the state file.
#  4. pg_dump of one database | psql into a new server that keeps the
#     worker id: above every ID handed out. Into a server with another
#     worker id whose clock is 1 h behind: its IDs stay on its own clock.
#  5. The state file deleted while running: written again, without a
#     restart (the reservation worker checks about once a second; the time
#     it took is reported, and only a file still missing after 60 s fails);
#     deleted just before a clean stop: written at exit; deleted while
#     stopped: above every ID handed out.
#  6. A stale state file put back by hand, a CHECKPOINT, kill -9 at once
#     (no pause for the worker): above every ID handed out.
#  7. A garbage state file, accepted: above the high-water mark; with no
#     mark in any database, the acceptance says "no floor but the clock"
#     in its result and a WARNING.
#  8. A key 10 days ahead (anyone can write one into a table they own):
#     never a floor, not even for snowflake_raise_floor_from_data(apply
#     => true), which reports it.
#  9. A FOR ALL TABLES publication from a server whose clock is 1 h
#     ahead: the subscriber's IDs stay on its own clock.
# 10. A mark edited 30 days ahead, restored by a superuser: held back (no
#     ID, 55000 naming it, a WARNING), never applied by itself; one at the
#     layout's last millisecond cannot even be accepted (22008); another
#     database mints on meanwhile (issue 55); a DELETE of the rows is
#     refused, and snowflake_discard_high_water() lowers them: IDs follow
#     the clock (issue 46, item 5).
# Wherever the old server's mark is more than 10 minutes ahead of the new
# server's clock and IDs (1, 3, 4, 5: the clock 1 h behind, no state
# file), it is held back too, until snowflake_accept_configuration().
# TOOLBOX_SCENARIOS="2 6" runs some of them only (each on its own, e.g.
# to show which fail against an older version).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
BASE=$(state_dir "$ROOT/.run/it-toolbox" it-toolbox)
PORT=${SNOWFLAKE_IT_PORT:-15450}
fake_clock "$BASE/faketime"
all_stop() { for d in "$BASE"/*/; do [ -f "$d/data/PG_VERSION" ] && cluster_stop "${d%/}"; done; true; }
trap all_stop EXIT
all_stop
PRELOAD="shared_preload_libraries = 'snowflake_id'"
want() { [[ " ${TOOLBOX_SCENARIOS:-1 2 3 4 5 6 7 8 9 10} " == *" $1 "* ]]; }

# fresh NAME: an empty directory for a cluster, owned by postgres.
fresh() { local d="$BASE/$1"; cluster_stop "$d"; rm -rf "$d"; mkdir -p "$d"; is_root && chown postgres:postgres "$d"; echo "$d"; }
start() { fake_start "$1"; }  # start DIR: with the fake clock
q() { local d="$1" p="$2"; shift 2; pq "$d" "$p" -At -F ' ' "$@"; }
# init DIR PORT: a cluster with worker id 7 and an hour of lead allowed.
init() { cluster_init "$1" "$2" "$PRELOAD" "snowflake_id.worker_id = 7" "snowflake_id.max_lead = '1h'"; }

# prime DIR PORT: the old server's history. 300,000 keys, then a burst
# of 20M IDs handed out and never stored (an application that took them
# and lost them): the largest IDs it issued are in no table.
# Prints "largest_key largest_issued".
prime() {
    local d="$1" p="$2"
    q "$d" "$p" -c "SET client_min_messages = warning" -c "CREATE EXTENSION IF NOT EXISTS snowflake_id" \
        -c "CREATE TABLE keys (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), v int)" >/dev/null
    q "$d" "$p" -c "CREATE DATABASE empty" >/dev/null
    q "$d" "$p" -d empty -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" >/dev/null
    q "$d" "$p" -c "INSERT INTO keys (v) SELECT g FROM generate_series(1, 300000) g"
    q "$d" "$p" -c "SELECT count(*) FROM snowflake_nextval(20000000)" >/dev/null
    q "$d" "$p" -c "SELECT max(id), (SELECT last_id FROM snowflake_stats()) FROM keys"
}
# after DIR PORT LABEL BOUND: 1,000 new keys; all above BOUND, none equal
# to an old key (the PRIMARY KEY would refuse it), and the table grew by
# exactly 1,000.
after() {
    local d="$1" p="$2" label="$3" bound="$4" n lo
    n=$(q "$d" "$p" -c "SELECT count(*) FROM keys")
    lo=$(q "$d" "$p" -c "WITH ins AS (INSERT INTO keys (v) SELECT -g FROM generate_series(1, 1000) g RETURNING id)
                          SELECT min(id) FROM ins") || die "$label: inserting new keys failed (a key minted again?)"
    [ "$(q "$d" "$p" -c "SELECT count(*) FROM keys")" = $((n + 1000)) ] || die "$label: rows lost or duplicated"
    [ "$lo" -gt "$bound" ] || die "$label: a new ID ($lo) is not above $bound"
    log "   $label: 1,000 new keys from $lo, above $bound; state $(q "$d" "$p" -c "SELECT state FROM snowflake_stats()")"
}
# empty_after DIR PORT LABEL BOUND: the first ID from the database with
# no tables is above BOUND too.
empty_after() {
    local id; id=$(q "$1" "$2" -d empty -c "SELECT snowflake_nextval()") || die "$3: no ID from the database with no tables"
    [ "$id" -gt "$4" ] || die "$3: the first ID from the database with no tables ($id) is not above $4"
    log "   $3: the first ID from a database with no tables, $id, is above $4 too"
}
# held_back DIR PORT LABEL: the old server's mark, more than 10 minutes
# ahead of this server's clock, moved nothing by itself (issue 46): no ID
# (55000, naming it), snowflake_stats() says why; then a superuser's
# snowflake_accept_configuration() applies it.
# libfaketime does not reach every process of Debian's PostgreSQL 15: its
# postmaster, and so the launcher it starts, read the real clock soon
# after start-up (its "ready to accept connections" line has the real
# time), while backends keep the fake one. Where the launcher judges the
# mark on the real clock, it is not far ahead, and not holding it is
# right; everywhere else the hold must happen.
held_back() {
    local out ready at now state
    state_known() { state=$(q "$1" "$2" -c "SELECT state FROM snowflake_stats()"); [ "$state" != "waiting for the high-water mark" ]; }
    poll_until 30 state_known "$1" "$2" || die "$3: the first round did not run"
    if [ "$state" != "disabled: high-water mark far ahead of the clock" ]; then
        ready=$(grep "database system is ready to accept connections" "$1/server.log" | tail -1)
        at=$(date -d "$(cut -d' ' -f1-3 <<< "$ready")" +%s); now=$(date +%s)
        [ $((now - at)) -lt 600 ] || die "$3: the mark far ahead of the clock was not held back (state: $state)"
        log "   $3: the launcher runs on the real clock here (libfaketime does not reach the postmaster): the mark is near for it, not held"
        return 0
    fi
    out=$(q "$1" "$2" -c "SELECT snowflake_nextval()" 2>&1) && die "$3: minted below a mark far ahead of the clock ($out)"
    [[ "$out" == *"high-water mark of this database is far ahead of the clock"* ]] || die "$3: not refused for the far mark: $out"
    [ "$(q "$1" "$2" -c "SELECT state FROM snowflake_stats()")" = "disabled: high-water mark far ahead of the clock" ] \
        || die "$3: snowflake_stats().state does not say why generation is disabled"
    grep -q "is [0-9]* s ahead of the clock; not applied" "$1/server.log" || die "$3: the log does not report the far mark"
    out=$(q "$1" "$2" -c "SELECT snowflake_accept_configuration()")
    [[ "$out" == *"high-water mark"*"accepted"* || "$out" == *"high-water mark"*"applied"* ]] \
        || die "$3: the acceptance does not say it applied the mark: $out"
    log "   $3: the far mark was held back until accepted ($out)"
}
# put_state FILE DIR: FILE as DIR's state file, as an operator would copy it.
put_state() { as_pg tee "$2/data/snowflake_id.state" < "$1" >/dev/null; as_pg chmod 600 "$2/data/snowflake_id.state"; }
# upgrade OLD_BINDIR OLD_DIR NEW_DIR MODE: pg_upgrade, run as postgres in NEW_DIR.
upgrade() {
    local oldbin="$1" olddir="$2" newdir="$3" mode="$4"
    # --copy is the default, and an option only from PostgreSQL 16 on.
    if [ "$mode" = --copy ] && [ "$PG_MAJOR" -lt 16 ]; then mode=""; fi
    (cd "$newdir" && as_pg "$(pgbin)/pg_upgrade" -b "$oldbin" -B "$(pgbin)" -d "$olddir/data" -D "$newdir/data" \
        ${mode:+"$mode"} >"$newdir/pg_upgrade.out" 2>&1) || { tail -30 "$newdir/pg_upgrade.out" >&2; die "pg_upgrade $mode failed"; }
}

setclock "+0"
A=$(fresh a); init "$A" "$PORT"; start "$A"
read -r KEY ISSUED < <(prime "$A" "$PORT")
log "the old server: largest key $KEY, largest ID issued $ISSUED (lead $(q "$A" "$PORT" -c "SELECT round(lead_ms) FROM snowflake_stats()") ms)"
cp "$A/data/snowflake_id.state" "$BASE/a.state"
cluster_stop "$A"

# --- 1. pg_upgrade --copy, no state file ------------------------------------------------
if want 1; then
log "1. pg_upgrade --copy (PostgreSQL $PG_MAJOR), the state file not copied, clock 1 h behind"
B=$(fresh b); init "$B" $((PORT + 1)); upgrade "$(pgbin)" "$A" "$B" --copy
setclock "-1h"; start "$B"
grep -q 'no state file' "$B/server.log" || die "1: the log does not say the state file is missing"
held_back "$B" $((PORT + 1)) "pg_upgrade --copy"
after "$B" $((PORT + 1)) "pg_upgrade --copy" "$ISSUED"
empty_after "$B" $((PORT + 1)) "pg_upgrade --copy" "$ISSUED"
cluster_stop "$B"
fi

# --- 2. pg_upgrade --link, the old state file copied in ------------------------------------
if want 2; then
log "2. pg_upgrade --link, the old state file copied in, clock 1 h behind"
setclock "+0"
C=$(fresh c); init "$C" $((PORT + 2)); upgrade "$(pgbin)" "$A" "$C" --link
put_state "$BASE/a.state" "$C"
setclock "-1h"; start "$C"
out=$(q "$C" $((PORT + 2)) -c "SELECT snowflake_nextval()" 2>&1) && die "2: minted with another cluster's state file"
[[ "$out" == *"written by another cluster"* ]] || die "2: not refused as another cluster's file: $out"
grep -q "was written by the cluster with system identifier" "$C/server.log" || die "2: the log does not name the other cluster"
[ "$(q "$C" $((PORT + 2)) -c "SELECT state FROM snowflake_stats()")" = "disabled: state file of another cluster" ] \
    || die "2: snowflake_stats().state does not say why generation is disabled"
q "$C" $((PORT + 2)) -c "SELECT snowflake_accept_configuration()" | grep -q "state file of another cluster accepted" \
    || die "2: the acceptance does not say what it accepted"
after "$C" $((PORT + 2)) "pg_upgrade --link + the old file, accepted" "$ISSUED"
cluster_stop "$C"
fi

# --- 3. pg_upgrade 17 -> 18 ----------------------------------------------------------
if [ "$PG_MAJOR" = 18 ] && want 3; then
    log "3. pg_upgrade --link from PostgreSQL 17, the state file not copied, clock 1 h behind"
    setclock "+0"
    (select_pg 17
     [ "$(cat "$("$PG_CONFIG" --sharedir)/extension/snowflake_id.control" 2>/dev/null | sed -n "s/^default_version = '\(.*\)'/\1/p")" = "$(project_version)" ] \
         || install_extension >/dev/null
     O=$(fresh o17); init "$O" $((PORT + 3)); start "$O"
     prime "$O" $((PORT + 3)) > "$BASE/o17.max"
     cluster_stop "$O")
    read -r _ ISSUED17 < "$BASE/o17.max"
    # initdb 18 enables data checksums by default; 17's did not.
    U=$(fresh u18); init "$U" $((PORT + 4)); as_pg "$(pgbin)/pg_checksums" --disable -D "$U/data" >/dev/null
    upgrade "$(pg_config_for 17 | xargs dirname)" "$BASE/o17" "$U" --link
    setclock "-1h"; start "$U"
    held_back "$U" $((PORT + 4)) "pg_upgrade 17 -> 18 --link"
    after "$U" $((PORT + 4)) "pg_upgrade 17 -> 18 --link" "$ISSUED17"
    empty_after "$U" $((PORT + 4)) "pg_upgrade 17 -> 18 --link" "$ISSUED17"
    cluster_stop "$U"
fi

# --- 3b. pg_upgrade --swap (PostgreSQL 18) ------------------------------------------
if [ "$PG_MAJOR" = 18 ] && want 3; then
    log "3b. pg_upgrade --swap (PostgreSQL 18), the state file not copied, clock 1 h behind"
    setclock "+0"
    A=$(fresh a); init "$A" "$PORT"; start "$A"
    read -r KEY ISSUED < <(prime "$A" "$PORT")
    cluster_stop "$A"
    W=$(fresh w18); init "$W" $((PORT + 4)); upgrade "$(pgbin)" "$A" "$W" --swap
    setclock "-1h"; start "$W"
    held_back "$W" $((PORT + 4)) "pg_upgrade --swap"
    after "$W" $((PORT + 4)) "pg_upgrade --swap" "$ISSUED"
    empty_after "$W" $((PORT + 4)) "pg_upgrade --swap" "$ISSUED"
    cluster_stop "$W"
fi

# --- 4. dump and restore into a new server with the same worker id -----------------------
log "4. pg_dump of one database | psql into a new server, clock 1 h behind"
setclock "+0"
A=$(fresh a); init "$A" "$PORT"; start "$A"
read -r KEY ISSUED < <(prime "$A" "$PORT")
if want 4; then
D=$(fresh d); init "$D" $((PORT + 5)); setclock "-1h"; start "$D"
"$(pgbin)/pg_dump" -h "$A" -p "$PORT" -U postgres postgres | q "$D" $((PORT + 5)) -q >/dev/null 2>&1
held_back "$D" $((PORT + 5)) "dump and restore, same worker id"
after "$D" $((PORT + 5)) "dump and restore, same worker id" "$ISSUED"
cluster_stop "$D"
# Another worker id: the other server's mark is not this one's.
F=$(fresh f); cluster_init "$F" $((PORT + 5)) "$PRELOAD" "snowflake_id.worker_id = 8" "snowflake_id.max_lead = '1h'"
start "$F"
"$(pgbin)/pg_dump" -h "$A" -p "$PORT" -U postgres postgres | q "$F" $((PORT + 5)) -q >/dev/null
id=$(q "$F" $((PORT + 5)) -c "INSERT INTO keys (v) VALUES (-1) RETURNING id")
[ "$(q "$F" $((PORT + 5)) -c "SELECT snowflake_timestamp($id) < now() + interval '1 minute'")" = t ] \
    || die "4: the dump of worker 7 moved worker 8's IDs to the other server's time ($id)"
log "   dump and restore into worker 8: its ID $id is on its own clock"
cluster_stop "$F"
fi

# --- 5. the state file deleted while running -----------------------------------------
if want 5; then
log "5. the state file deleted while running, and just before a clean stop"
setclock "+0"
rm "$A/data/snowflake_id.state"
state_file_back() { [ -f "$A/data/snowflake_id.state" ]; }
poll_until 60 state_file_back || die "5: the deleted state file was not written again within 60 s"
log "   the deleted state file was written again after $POLL_MS ms"
grep -q "is missing; writing it again" "$A/server.log" || die "5: the log does not say the file was written again"
ISSUED=$(q "$A" "$PORT" -c "SELECT last_id FROM snowflake_stats()")
rm "$A/data/snowflake_id.state"; cluster_stop "$A"
[ -f "$A/data/snowflake_id.state" ] || die "5: no state file after a clean stop"
setclock "-1h"; start "$A"
after "$A" "$PORT" "state file deleted" "$ISSUED"
ISSUED=$(q "$A" "$PORT" -c "SELECT last_id FROM snowflake_stats()")
cluster_stop "$A"; rm "$A/data/snowflake_id.state"; start "$A"
held_back "$A" "$PORT" "state file deleted while stopped"
after "$A" "$PORT" "state file deleted while stopped" "$ISSUED"
fi

# --- 6. a stale state file put back, CHECKPOINT, kill -9 --------------------------------
if want 6; then
log "6. a stale state file put back by hand, CHECKPOINT, kill -9, clock 1 h behind"
setclock "+0"; cluster_stop "$A"; start "$A"
cp "$A/data/snowflake_id.state" "$BASE/stale.state"
q "$A" "$PORT" -c "SELECT count(*) FROM snowflake_nextval(20000000)" >/dev/null
ISSUED=$(q "$A" "$PORT" -c "SELECT last_id FROM snowflake_stats()")
put_state "$BASE/stale.state" "$A"
q "$A" "$PORT" -c "CHECKPOINT"
kill9 "$A"
setclock "-1h"; start "$A"
# (The start-up read may run: a crash in the moment after a checkpoint.)
id=$(mint_when_ready "$A" "$PORT" postgres) || die "6: no ID after the crash"
[ "$id" -gt "$ISSUED" ] || die "6: an ID at or below $ISSUED after the crash ($id)"
empty_after "$A" "$PORT" "stale file, checkpoint, crash" "$ISSUED"
log "   stale file, checkpoint, crash: the next ID is above $ISSUED"
fi

# --- 7. a garbage state file, accepted -------------------------------------------------
if want 7; then
log "7. a garbage state file accepted, clock 1 h behind"
ISSUED=$(q "$A" "$PORT" -c "SELECT last_id FROM snowflake_stats()")
cluster_stop "$A"; echo garbage | as_pg tee "$A/data/snowflake_id.state" >/dev/null
start "$A"
out=$(q "$A" "$PORT" -c "SELECT snowflake_nextval()" 2>&1) && die "7: minted with a garbage state file"
res=$(q "$A" "$PORT" -c "SELECT snowflake_accept_configuration()" 2>&1)
[[ "$res" != *"no floor but the clock"* ]] || die "7: the high-water mark was not taken as a floor: $res"
after "$A" "$PORT" "garbage file accepted" "$ISSUED"
E=$(fresh e); init "$E" $((PORT + 6)); start "$E"
q "$E" $((PORT + 6)) -c "CREATE EXTENSION snowflake_id" >/dev/null
# Every mark deleted once the first round since a restart has written
# its own (an idle server writes nothing more before it stops).
cluster_stop "$E"; start "$E"
first_round() { [ "$(q "$E" $((PORT + 6)) -c "SELECT state FROM snowflake_stats()")" != "waiting for the high-water mark" ]; }
poll_until 30 first_round || die "7: no first round"
# (Only with the table's guard turned off, as only a superuser can: issue 55.)
q "$E" $((PORT + 6)) -c "ALTER TABLE snowflake_id_internal.snowflake_high_water DISABLE TRIGGER written_by_snowflake_id" \
    -c "DELETE FROM snowflake_id_internal.snowflake_high_water" \
    -c "ALTER TABLE snowflake_id_internal.snowflake_high_water ENABLE ALWAYS TRIGGER written_by_snowflake_id" >/dev/null
cluster_stop "$E"; echo garbage | as_pg tee "$E/data/snowflake_id.state" >/dev/null; start "$E"
res=$(q "$E" $((PORT + 6)) -c "SELECT snowflake_accept_configuration()" 2>&1)
[[ "$res" == *"WARNING:  snowflake_id: accepted with no floor but the clock"* && "$res" == *"no floor but the clock; state file"* ]] \
    || die "7: accepting with nothing to go by did not say so: $res"
log "   with no mark in any database, the acceptance says: no floor but the clock"
cluster_stop "$E"
fi

# --- 8. a key 10 days ahead ------------------------------------------------------------
if want 8; then
log "8. a key 10 days ahead is not a floor"
setclock "+0"
FAR=$(q "$A" "$PORT" -c "SELECT snowflake_compose(now() + interval '10 days', 7, 0)")
q "$A" "$PORT" -c "INSERT INTO keys (id, v) VALUES ($FAR, 0)"
cluster_stop "$A"; start "$A"
id=$(q "$A" "$PORT" -c "SELECT snowflake_nextval()")
[ "$id" -lt "$FAR" ] && [ "$(q "$A" "$PORT" -c "SELECT snowflake_timestamp($id) < now() + interval '1 minute'")" = t ] \
    || die "8: the key 10 days ahead raised the floor ($id)"
[ "$(q "$A" "$PORT" -c "SELECT beyond_limit FROM snowflake_raise_floor_from_data(apply => true) WHERE relation = 'public.keys'")" = t ] \
    || die "8: snowflake_raise_floor_from_data() did not report the key beyond its limit"
id=$(q "$A" "$PORT" -c "SELECT snowflake_nextval()")
[ "$(q "$A" "$PORT" -c "SELECT snowflake_timestamp($id) < now() + interval '11 minutes'")" = t ] \
    || die "8: applying the keys raised the floor past its limit ($id)"
log "   ignored, reported by snowflake_raise_floor_from_data(), never applied; IDs follow the clock"
fi

# --- 9. a FOR ALL TABLES publication from a server 1 h ahead ------------------------------
if want 9; then
log "9. a subscriber of a FOR ALL TABLES publication whose server is 1 h ahead"
cluster_stop "$A"
AHEAD_CLOCK="$BASE/faketime-ahead"; echo "+1h" > "$AHEAD_CLOCK"; chmod 644 "$AHEAD_CLOCK"
setclock "+0"
P=$(fresh p); cluster_init "$P" $((PORT + 7)) "$PRELOAD" "snowflake_id.worker_id = 9" "wal_level = logical"
cluster_start "$P" LD_PRELOAD="$FAKETIME_LIB" FAKETIME_TIMESTAMP_FILE="$AHEAD_CLOCK" FAKETIME_NO_CACHE=1 \
    FAKETIME_DONT_FAKE_MONOTONIC=1 || { tail -20 "$P/server.log" >&2; die "start failed in $P"; }
S=$(fresh s); cluster_init "$S" $((PORT + 8)) "$PRELOAD" "snowflake_id.worker_id = 10"; start "$S"
for d in "$P $((PORT + 7))" "$S $((PORT + 8))"; do
    read -r dir port <<< "$d"
    q "$dir" "$port" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
        -c "CREATE TABLE keys (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), v int)" \
        -c "CREATE SEQUENCE counter" >/dev/null
done
# The publisher adopts its sequence and turns the switch on; the
# subscriber's own sequence of that name stays its own (issue 63: the
# list's and the switch's rows from a replication worker are skipped; on
# 6f10ef7 the table sync applied the publisher's rows to both).
q "$P" $((PORT + 7)) -c "INSERT INTO keys (v) SELECT g FROM generate_series(1, 1000) g" \
    -c "SELECT snowflake_adopt_sequence('counter')" -c "SELECT snowflake_adopt_sequences()" \
    -c "CREATE PUBLICATION everything FOR ALL TABLES" >/dev/null
# A conversion's progress row of the publisher's (written past its guard,
# as a restore writes it): the subscribers' stay their own (issue 63,
# part 3; on 338878c the table sync applied it to both).
q "$P" $((PORT + 7)) -c "SET session_replication_role = replica" \
    -c "INSERT INTO snowflake_convert_progress (tbl, col, rel, rel_col, new_col, not_null, phase, pages_total) VALUES ('keys', 'id', 'keys', 'id', 'id_new', true, 'backfill', 1)" >/dev/null
q "$S" $((PORT + 8)) -c "CREATE SUBSCRIPTION s CONNECTION 'host=$P port=$((PORT + 7)) user=postgres dbname=postgres' PUBLICATION everything" >/dev/null 2>&1
for _ in $(seq 1 100); do
    [ "$(q "$S" $((PORT + 8)) -c "SELECT count(*) FROM keys")" = 1000 ] \
        && [ "$(q "$S" $((PORT + 8)) -c "SELECT count(*) FROM snowflake_id_internal.snowflake_high_water WHERE worker_id = 9")" -ge 1 ] && break
    sleep 0.2
done
[ "$(q "$S" $((PORT + 8)) -c "SELECT count(*) FROM snowflake_id_internal.snowflake_high_water WHERE worker_id = 9")" -ge 1 ] \
    || die "9: the publisher's high-water mark did not reach the subscriber"
id=$(q "$S" $((PORT + 8)) -c "SELECT snowflake_nextval()")
[ "$(q "$S" $((PORT + 8)) -c "SELECT snowflake_timestamp($id) < now() + interval '1 minute'")" = t ] \
    || die "9: the publisher's mark moved the subscriber's IDs to its time ($id)"
log "   the subscriber holds the publisher's mark and mints on its own clock ($id)"
for _ in $(seq 1 50); do
    [ "$(q "$S" $((PORT + 8)) -c "SELECT count(*) FROM pg_subscription_rel WHERE srsubstate <> 'r'")" = 0 ] && break
    sleep 0.2
done
adopted=$(q "$S" $((PORT + 8)) -c "SELECT count(*) FROM snowflake_id_internal.snowflake_adopted")
switch=$(q "$S" $((PORT + 8)) -c "SELECT count(*) + (SELECT count(*) FROM snowflake_convert_progress) FROM snowflake_id_internal.snowflake_adopt_switch")
errors=$(q "$S" $((PORT + 8)) -c "SELECT apply_error_count + sync_error_count FROM pg_stat_subscription_stats")
own=$(q "$S" $((PORT + 8)) -c "SELECT nextval('counter')")
[ "$adopted/$switch/$errors/$own" = "0/0/0/1" ] \
    || die "9: the publisher's adoption reached the subscriber: $adopted listed, $switch switch and progress rows, $errors errors, nextval('counter') = $own"
log "   the publisher's list and switch stay the publisher's: the subscriber's counter gives 1"
# A subscriber built from the publisher's pg_dump -s (issue 63, part 3):
# the labels adopt its own counter, which mints with its own worker id;
# the publisher's rows of the list are skipped, with no error.
S2=$(fresh s2); cluster_init "$S2" $((PORT + 9)) "$PRELOAD" "snowflake_id.worker_id = 11"; start "$S2"
as_pg "$(pgbin)/pg_dump" -h "$P" -p $((PORT + 7)) -U postgres -s -f "$S2/schema.sql" postgres || die "9: pg_dump -s failed"
q "$S2" $((PORT + 9)) -v ON_ERROR_STOP=1 -q -f "$S2/schema.sql" >/dev/null 2>"$S2/schema.err" \
    || { cat "$S2/schema.err" >&2; die "9: restoring pg_dump -s into the second subscriber failed"; }
q "$S2" $((PORT + 9)) -c "CREATE SUBSCRIPTION s2 CONNECTION 'host=$P port=$((PORT + 7)) user=postgres dbname=postgres' PUBLICATION everything" >/dev/null 2>&1
for _ in $(seq 1 100); do
    [ "$(q "$S2" $((PORT + 9)) -c "SELECT count(*) FROM pg_subscription_rel WHERE srsubstate <> 'r'")" = 0 ] \
        && [ "$(q "$S2" $((PORT + 9)) -c "SELECT count(*) FROM keys")" = 1000 ] && break
    sleep 0.2
done
adopted=$(q "$S2" $((PORT + 9)) -c "SELECT string_agg(seq::text, ' ') FROM snowflake_id_internal.snowflake_adopted")
errors=$(q "$S2" $((PORT + 9)) -c "SELECT apply_error_count + sync_error_count FROM pg_stat_subscription_stats")
worker=$(q "$S2" $((PORT + 9)) -c "SELECT snowflake_worker_id(nextval('counter'))")
rows=$(q "$S2" $((PORT + 9)) -c "SELECT count(*) || '/' || (SELECT count(*) FROM snowflake_convert_progress) FROM keys")
switch=$(q "$S2" $((PORT + 9)) -c "SELECT count(*) FROM snowflake_id_internal.snowflake_adopt_switch WHERE enabled")
[ "$adopted/$errors/$worker/$rows/$switch" = "counter/0/11/1000/0/1" ] \
    || die "9: the subscriber built from pg_dump -s: adopted '$adopted', $errors errors, nextval('counter') of worker $worker, $rows rows/progress rows, switch rows on: $switch"
log "   a subscriber built from pg_dump -s adopts its own counter (worker 11) and has the switch on, its 1000 rows in, no error"
# A replicated TRUNCATE ... RESTART IDENTITY restarts the subscriber's own
# sequences of the table where no hook runs: its adopted one goes back to
# its fence before the apply commits (the red-team review of 2337972, F3:
# it stayed at 1, not called, and raw draws handed out 1, 2, ...).
q "$P" $((PORT + 7)) -c "CREATE TABLE tr (id bigint PRIMARY KEY, v int)" >/dev/null
q "$S2" $((PORT + 9)) -c "CREATE TABLE tr (id bigint PRIMARY KEY, v int, k bigserial)" \
    -c "SELECT snowflake_adopt_sequence('tr_k_seq')" -c "ALTER SUBSCRIPTION s2 REFRESH PUBLICATION" >/dev/null
for _ in $(seq 1 100); do
    [ "$(q "$S2" $((PORT + 9)) -c "SELECT count(*) FROM pg_subscription_rel WHERE srsubstate <> 'r'")" = 0 ] && break
    sleep 0.2
done
# Another adopted sequence of the subscriber, changed by another session
# (its invalidation reaches the apply worker too) and held locked by a
# role's open transaction: the apply neither waits for it nor touches it
# (the red-team review of a09a81d: the worker waited on it for as long as
# the transaction stayed open).
q "$S2" $((PORT + 9)) -c "CREATE SEQUENCE other_seq" -c "SELECT snowflake_adopt_sequence('other_seq')" >/dev/null
q "$S2" $((PORT + 9)) -c "BEGIN" -c "ALTER SEQUENCE other_seq RENAME TO other_held" -c "SELECT pg_sleep(120)" >/dev/null 2>&1 &
holder=$!
for _ in $(seq 1 100); do
    [ "$(q "$S2" $((PORT + 9)) -c "SELECT count(*) FROM pg_locks WHERE relation = 'other_seq'::regclass AND mode = 'AccessExclusiveLock' AND granted")" = 1 ] && break
    sleep 0.2
done
q "$P" $((PORT + 7)) -c "TRUNCATE tr RESTART IDENTITY" -c "INSERT INTO keys (v) VALUES (1001)" >/dev/null
for _ in $(seq 1 300); do
    [ "$(q "$S2" $((PORT + 9)) -c "SELECT count(*) FROM keys")" = 1001 ] && break
    sleep 0.2
done
applied=$(q "$S2" $((PORT + 9)) -c "SELECT count(*) FROM keys")
kill "$holder" 2>/dev/null || true
q "$S2" $((PORT + 9)) -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(120)%' AND pid <> pg_backend_pid()" >/dev/null
wait "$holder" 2>/dev/null || true
[ "$applied" = 1001 ] || die "9: the second subscriber did not apply the TRUNCATE and the row after it within 60 s (another role's lock on an unrelated adopted sequence held it up?)"
counter=$(q "$S2" $((PORT + 9)) -c "SELECT format('%s %s', last_value, is_called) FROM tr_k_seq")
[ "$counter" = "9223372036854775807 t" ] \
    || die "9: a replicated TRUNCATE ... RESTART IDENTITY left the subscriber's adopted sequence at '$counter'"
log "   a replicated TRUNCATE ... RESTART IDENTITY leaves the subscriber's adopted sequence at its fence"
cluster_stop "$S2"
cluster_stop "$S"; cluster_stop "$P"
fi

# --- 10. a mark edited in a dump --------------------------------------------------------
if want 10; then
log "10. a restored mark edited 30 days ahead, then to the layout's last millisecond"
setclock "+0"
G=$(fresh g); init "$G" $((PORT + 9)); start "$G"
q "$G" $((PORT + 9)) -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
    -c "CREATE DATABASE other" >/dev/null
q "$G" $((PORT + 9)) -d other -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" >/dev/null
first=$(q "$G" $((PORT + 9)) -c "SELECT snowflake_nextval()")
# restore_mark MARK_SQL: one row of this server's worker id and layout,
# as a restore of an edited dump writes it (a superuser's INSERT; the
# trigger sees what COPY would give it).
restore_mark() {
    q "$G" $((PORT + 9)) -c "INSERT INTO snowflake_id_internal.snowflake_high_water (worker_id, epoch_ms, worker_bits, sequence_bits, mark_ms)
        SELECT worker_id, (extract(epoch FROM epoch) * 1000)::bigint, worker_bits, sequence_bits, $1 FROM snowflake_stats()" 2>&1
}
out=$(restore_mark "(extract(epoch FROM now() + interval '30 days') * 1000)::bigint")
[[ "$out" == *"ahead of the clock; not applied"* ]] || die "10: restoring a mark 30 days ahead said nothing: $out"
out=$(q "$G" $((PORT + 9)) -c "SELECT snowflake_nextval()" 2>&1) \
    && die "10: a restored mark 30 days ahead was applied by itself: the next ID is $out (the first was $first)"
[[ "$out" == *"far ahead of the clock"* ]] || die "10: not refused for the far mark: $out"
[ "$(q "$G" $((PORT + 9)) -c "SELECT snowflake_timestamp(last_id) < now() + interval '1 minute' FROM snowflake_stats()")" = t ] \
    || die "10: the generator moved to the far mark"
log "   a mark 30 days ahead is held back: $(head -1 <<< "$out")"
# It stops its own database alone (issue 55): before, every database of
# the server got 55000 until a superuser decided.
other=$(q "$G" $((PORT + 9)) -d other -c "SELECT snowflake_nextval()" 2>&1) \
    || die "10: the mark held back in one database stopped minting in another: $other"
[ "$(q "$G" $((PORT + 9)) -d other -c "SELECT snowflake_timestamp($other) < now() + interval '1 minute'")" = t ] \
    || die "10: the other database's ID is not on the clock ($other)"
[ "$(q "$G" $((PORT + 9)) -d other -c "SELECT state FROM snowflake_stats()")" = "ok; another database holds a high-water mark far ahead of the clock" ] \
    || die "10: snowflake_stats().state in the other database does not say another database holds a mark"
log "   another database mints on, on the clock ($other)"
restore_mark "(SELECT (extract(epoch FROM epoch) * 1000)::bigint + (1::bigint << timestamp_bits) - 1 FROM snowflake_stats())" >/dev/null
out=$(q "$G" $((PORT + 9)) -c "SELECT snowflake_accept_configuration()" 2>&1) \
    && die "10: a mark at the layout's last millisecond was accepted: $out"
[[ "$out" == *"would exhaust the ID space"* ]] || die "10: the refusal does not say why: $out"
log "   a mark at the layout's last millisecond cannot be accepted: $(head -1 <<< "$out")"
out=$(q "$G" $((PORT + 9)) -c "DELETE FROM snowflake_id_internal.snowflake_high_water" 2>&1) \
    && die "10: a superuser deleted the marks by hand"
[[ "$out" == *"snowflake_discard_high_water()"* ]] || die "10: the refused DELETE does not name the way out: $out"
q "$G" $((PORT + 9)) -c "SELECT snowflake_discard_high_water()" >/dev/null
id=$(q "$G" $((PORT + 9)) -c "SELECT snowflake_nextval()")
[ "$id" -gt "$first" ] && [ "$(q "$G" $((PORT + 9)) -c "SELECT snowflake_timestamp($id) < now() + interval '1 minute'")" = t ] \
    || die "10: after snowflake_discard_high_water(), IDs do not follow the clock ($id)"
[ "$(q "$G" $((PORT + 9)) -c "SELECT state FROM snowflake_stats()")" = ok ] \
    || die "10: after the discard, snowflake_stats().state is $(q "$G" $((PORT + 9)) -c "SELECT state FROM snowflake_stats()")"
[ "$(q "$G" $((PORT + 9)) -c "SELECT max(mark_ms) < (extract(epoch FROM now() + interval '1 minute') * 1000)::bigint FROM snowflake_id_internal.snowflake_high_water")" = t ] \
    || die "10: the discarded marks are still in the table"
log "   a DELETE of the marks is refused; snowflake_discard_high_water() lowers them, and IDs follow the clock, no restart ($id)"
# Marks stepped 590 s apart, 300 of them (each within reach of the one
# before), in one restore: never more than 10 minutes past the clock
# (the red-team review of issue 46: the limit moved with each raise, and
# such a restore put IDs two days ahead).
q "$G" $((PORT + 9)) -c "INSERT INTO snowflake_id_internal.snowflake_high_water (worker_id, epoch_ms, worker_bits, sequence_bits, mark_ms)
    SELECT s.worker_id, (extract(epoch FROM s.epoch) * 1000)::bigint, s.worker_bits, s.sequence_bits,
           (extract(epoch FROM clock_timestamp()) * 1000)::bigint + g * 590000
      FROM snowflake_stats() s, generate_series(1, 300) g" >/dev/null 2>&1
[ "$(q "$G" $((PORT + 9)) -c "SELECT snowflake_timestamp(last_id) < now() + interval '11 minutes' FROM snowflake_stats()")" = t ] \
    || die "10: marks stepped 590 s apart moved the generator more than 10 minutes ahead: $(q "$G" $((PORT + 9)) -c "SELECT snowflake_timestamp(last_id) FROM snowflake_stats()")"
log "   300 marks stepped 590 s apart: the generator stays within 10 minutes of the clock"
cluster_stop "$G"
fi
cluster_stop "$A"
log "toolbox: ok"
