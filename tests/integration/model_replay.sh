#!/usr/bin/env bash
# Replays the traces of the start model (issue 62) on a real server: each
# trace is a sequence of events, as the model checker prints them, run
# against a PostgreSQL 18 cluster with a fake clock (libfaketime). After
# every mint two properties must hold:
#   P1  every new ID is above every ID minted before in any database,
#       databases dropped since included (the largest is kept here, on
#       the client side);
#   P2  every new ID minted in a database is above every ID stored in
#       that database before (what `template` and `dump_restore` copy
#       comes along with the database).
# A violation stops the trace with one line: the trace, the step and its
# event, how many of the new IDs are at or below the old largest, and
# how far below it (in ms, (id >> (worker bits + sequence bits))) the
# smallest new one is. A PRIMARY KEY violation on t (an ID minted again
# where it is stored) is a violation too. Every other trace still runs;
# the script fails with the first trace's line.
#
#   bash tests/integration/model_replay.sh [TRACE_FILE...]
#   PG_VERSIONS=18 SNOWFLAKE_TEST_LAYERS=integration SNOWFLAKE_IT=model_replay bash scripts/test.sh
# Default: every tests/integration/traces/*.trace. PostgreSQL 18 only
# (select_pg 18 first when run by hand); other majors skip. Port:
# SNOWFLAKE_IT_PORT (25640), the cluster a pg_upgrade makes uses the next
# port; clusters under .run/it-model-replay. The traces there:
# 0_every_event runs every event once and keeps both properties; 1_ to
# 5_ (and 1b_) are the defects of issue 62, one each, and fail on a
# build without its fix (each file's header says how); 8_failover runs
# two failovers to a synchronous standby. About 10 s a trace.
#
# A trace: one event a line, `#` starts a comment, blank lines are
# ignored. Every trace starts with an implicit `init`: a new cluster
# (worker id 1, max_lead 1h), the clock at +0, databases a and b with the
# extension and `t (id bigint PRIMARY KEY DEFAULT snowflake_nextval())`,
# then a CHECKPOINT (so that what init made survives a `resetwal`). The
# `postgres` database has no extension; c exists once a template or a
# dump_restore makes it. The events:
#   mint D             INSERT 1,000 rows into D.t, RETURNING their IDs
#                      (kept in files: duplicates can be counted). 55000
#                      "high-water mark is not available" (the start-up
#                      read runs) is asked again every 50 ms, for 60 s;
#                      any other error is a refusal (logged), not a
#                      violation; a mint in a database that does not
#                      exist, or whose extension was dropped (the
#                      default went with it), is refused too
#   stop               pg_ctl stop -m fast
#   crash              kill -9 of the postmaster, until it and its
#                      children are gone; its postmaster.pid removed
#   start              pg_ctl start with the fake clock
#   start_lagging D    a start whose start-up read cannot read D: the
#                      server starts with its worker id unset (so the
#                      read waits), every free background-worker slot is
#                      taken by parallel workers of pg_sleep() sessions
#                      in `postgres`, then the worker id is set (reload):
#                      the read finds no slot for its readers and, after
#                      2 s, leaves EVERY database lagging, D included
#                      (the log must say so for D). Nothing is minted
#                      meanwhile. Where the start needs no read (a clean
#                      restart, a crash that replayed a reservation),
#                      nothing lags; that is logged
#   read_lagging       the slots are given back (the sessions holding
#                      them are terminated), then 3 s: the launcher
#                      reads the lagging databases again every second
#   expect_refused     the event before was refused (else a violation:
#                      a trace that must show a refusal, not only P1/P2)
#   lose_state_file    (stopped) rm $PGDATA/snowflake_id.state
#   upgrade            (stopped) pg_upgrade --link into a new PostgreSQL
#                      18 cluster, the server from then on (no state
#                      file). A pg_upgrade that fails before it links is
#                      a refusal, and the old cluster stays the server
#   resetwal           (stopped) pg_resetwal -f
#   drop_database D    DROP DATABASE D, from `postgres`; its IDs stay in
#                      P1's largest
#   drop_schema_cascade D  DROP SCHEMA public CASCADE in D: the extension
#                      (in public) goes with it, and t too (replay-only;
#                      the model's drop_extension)
#   drop_extension D   DROP EXTENSION snowflake_id CASCADE in D (t keeps
#                      its IDs; its default goes)
#   template S D       CREATE DATABASE D TEMPLATE S: D stores S's IDs
#   dump_restore S D   CREATE DATABASE D; pg_dump S | psql -d D, as a
#                      superuser: D stores S's IDs
#   hold D             a mark 30 minutes beyond the later of the clock and
#                      the largest ID so far, written into D by a
#                      superuser's INSERT (a restore of an edited dump),
#                      and one ID at that mark into D.t, in one
#                      transaction. The held ID counts for D's P2 at once
#                      (and travels with template and dump_restore); for
#                      P1 once accepted: while a mark is held the other
#                      databases mint on the clock, below it, as
#                      docs/high-water.md says they do.
#                      MODEL_REPLAY_HELD=strict counts it for P1 from
#                      the hold on
#   accept             SELECT snowflake_accept_configuration(), in a
#                      database with the extension; the held IDs of the
#                      databases that exist count for P1 from then on
#                      (those of databases dropped meanwhile are
#                      forgotten: a dropped database's hold is released)
#   discard D          SELECT snowflake_discard_high_water() in D: D's
#                      held IDs (not accepted yet) leave D's P2 (copies
#                      made by template or dump_restore stay with their
#                      database)
#   carry              3 s: the high-water launcher carries a dropped
#                      database's mark into another database
#   failover           kill -9 of the server, and its synchronous standby
#                      (pg_basebackup -R, synchronous_standby_names '*',
#                      streaming since `init` where the trace has a
#                      failover; made now if pg_upgrade or pg_resetwal
#                      took it) promoted: the server from then on
#   standby            (replay only) a synchronous standby of the server
#                      from now on (pg_upgrade and pg_resetwal leave it
#                      behind: it can no longer follow)
#   clock_back small|far, clock_forward small|far
#                      the fake clock 5 or 30 minutes back or forward
#                      (offsets add up)
#   clock_freeze       (replay only) the fake clock stops where it is: an
#                      absolute libfaketime time, so that two starts get
#                      the same start-up time to the microsecond (only
#                      the wall clock: FAKETIME_DONT_FAKE_MONOTONIC=1, and
#                      the generator's reference clock runs on). Clock
#                      steps move the frozen time
#   clock_run          (replay only) the clock runs again at its offset
#   sleep S            (replay only) S seconds of real time
#   checkpoint         (replay only) CHECKPOINT
# With MODEL_REPLAY_SAMPLES=N (default 3, 0 where traces are named), N
# random walks of the model
# (core/tests/starts_model.rs `sample`, seeds MODEL_REPLAY_SEED (62) on,
# each up to 14 events and ending at a mint) run after the named traces;
# a failing one prints its seed and its events, and
# STARTS_MODEL_TRACES=DIR STARTS_MODEL_SAMPLES=1 STARTS_MODEL_SEED=S
# cargo test -p snowflake_id_core --release --test starts_model
# write_the_traces writes it again. The walks mint only while no
# database lags or holds a mark (the model's state says when): the
# replay's P1 has no exception for those.
# An event whose server state does not hold (a start of a running
# server, a mint while stopped) fails the trace as malformed.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
[ "$PG_MAJOR" = 18 ] || skip_test "PostgreSQL 18 only (this is $PG_MAJOR; run select_pg 18 first)"
BASE=$(state_dir "$ROOT/.run/it-model-replay" it-model-replay)
PORT=${SNOWFLAKE_IT_PORT:-25640}
HOLDERS="$BASE/holders.pids"
VERDICT="$BASE/verdict"
fake_clock "$BASE/faketime"

# --- Clusters ----------------------------------------------------------------
release_holders_now() {  # the slot holders' clients, by PID (no server needed)
    local p
    [ -f "$HOLDERS" ] || return 0
    while read -r p; do kill "$p" 2>/dev/null || true; done < "$HOLDERS"
    rm -f "$HOLDERS"
}
all_stop() {
    local d
    release_holders_now
    for d in "$BASE"/*/; do [ -f "$d/data/PG_VERSION" ] && cluster_stop "${d%/}"; done
    true
}
trap all_stop EXIT
all_stop
fresh() { local d="$BASE/$1"; cluster_stop "$d"; rm -rf "$d"; mkdir -p "$d"; is_root && chown postgres:postgres "$d"; echo "$d"; }
new_cluster() {  # new_cluster DIR PORT
    cluster_init "$1" "$2" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 1" \
        "snowflake_id.max_lead = '1h'" "max_worker_processes = 8" "max_parallel_workers = 8"
}
# The server of the trace: its directory and port; whether it runs. Its
# synchronous standby, if it has one: directory and port.
SRV="" SPORT=$PORT RUNNING=0 UPGRADES=0 LOG_FROM=0 STBY="" STPORT=0
q() { pq "$SRV" "$SPORT" -At -F ' ' "$@"; }
since_start() { tail -c +"$((LOG_FROM + 1))" "$SRV/server.log"; }
start_server() {
    LOG_FROM=$(stat -c %s "$SRV/server.log" 2>/dev/null || echo 0)
    fake_start "$SRV"; RUNNING=1
}

# --- The clock ---------------------------------------------------------------
OFFSET=0 FROZEN=""  # offset in seconds; the frozen Unix time, if frozen
write_clock() {
    if [ -n "$FROZEN" ]; then setclock "$(date -d "@$FROZEN" '+%Y-%m-%d %H:%M:%S')"
    else setclock "$(printf '%+d' "$OFFSET")"; fi
}
clock_step() {  # clock_step SECONDS
    OFFSET=$((OFFSET + $1))
    if [ -n "$FROZEN" ]; then FROZEN=$((FROZEN + $1)); fi
    write_clock
}

# --- What the client saw -------------------------------------------------------
# $WORK/minted: every ID minted; $WORK/db.D: every ID stored in D (minted
# there, copied there, or held there); $WORK/held.D: D's held IDs not
# accepted or discarded yet; $WORK/accepted: the held IDs accepted;
# dropped databases' files are renamed *.dropped-at-STEP.
WORK="$BASE/work"
declare -A DB_EXT=()  # databases that exist: 1 with the extension, 0 without
SHIFT=22
existing() { local f; for f in "$@"; do [ ! -f "$f" ] || printf '%s\n' "$f"; done; }
max_of() {  # max_of FILE...: the largest ID in the files that exist (0: none)
    local fs m; mapfile -t fs < <(existing "$@")
    [ ${#fs[@]} -gt 0 ] || { echo 0; return; }
    m=$(sort -n "${fs[@]}" | tail -1); echo "${m:-0}"
}
server_max() {
    if [ "${MODEL_REPLAY_HELD:-}" = strict ]; then max_of "$WORK/minted" "$WORK/accepted" "$WORK"/held.*
    else max_of "$WORK/minted" "$WORK/accepted"; fi
}
where_is() {  # where_is ID: the databases that store it
    local f name out=""
    for f in "$WORK"/db.*; do
        if [ ! -f "$f" ] || ! grep -qx "$1" "$f"; then continue; fi
        name=${f##*/db.}
        if [[ "$name" == *.dropped-at-* ]]; then name="${name%%.*}, dropped at step ${name##*-}"; fi
        out+="${out:+, }$name"
    done
    printf '%s' "${out:-no database}"
}
ms_of() { echo $(($1 >> SHIFT)); }

TRACE="" STEP=0 EVENT=""
violation() {
    local line="$TRACE step $STEP ($EVENT): $*"
    printf '%s\n' "$line" > "$VERDICT"
    die "$line"
}
malformed() { violation "malformed trace: $*"; }
refused() { log "   [$STEP] $EVENT: refused: $*"; REFUSED_AT=$STEP; }
REFUSED_AT=0
need_running() { [ "$RUNNING" = 1 ] || malformed "the server is stopped"; }
need_stopped() { [ "$RUNNING" = 0 ] || malformed "the server runs"; }
first_error() { grep -m1 -E 'ERROR|FATAL|error:' <<< "$1" | sed -E 's/^psql:[^ ]* //' || head -1 <<< "$1"; }

# check DB NEWFILE: P2 against DB's IDs before, then P1 against every ID
# minted (or held) before; then the new IDs join both.
check() {
    local db="$1" new="$2" dbmax allmax n lo hi id below_db=0 below_all=0 dups before
    dbmax=$(max_of "$WORK/db.$db"); allmax=$(server_max)
    sort -n "$new" > "$new.sorted"
    n=$(wc -l < "$new"); lo=$(head -1 "$new.sorted"); hi=$(tail -1 "$new.sorted")
    while read -r id; do
        if [ "$id" -le "$dbmax" ]; then below_db=$((below_db + 1)); fi
        if [ "$id" -le "$allmax" ]; then below_all=$((below_all + 1)); fi
    done < "$new"
    mapfile -t before < <(existing "$WORK/minted" "$WORK/accepted" "$WORK"/held.*)
    dups=$(sort -u "${before[@]}" /dev/null | comm -12 - <(sort -u "$new") | wc -l)
    if [ "$below_db" -gt 0 ]; then
        violation "P2 violated: $below_db of $n new IDs in $db are <= the largest ID stored in $db before, down to $(( $(ms_of "$dbmax") - $(ms_of "$lo") )) ms below it (largest $dbmax; smallest new $lo; $dups equal to earlier IDs$([ "$below_all" -gt 0 ] && echo "; P1 too: $below_all <= $allmax, stored in $(where_is "$allmax")"))"
    fi
    if [ "$below_all" -gt 0 ]; then
        violation "P1 violated: $below_all of $n new IDs in $db are <= the largest ID minted before in any database, down to $(( $(ms_of "$allmax") - $(ms_of "$lo") )) ms below it (largest $allmax, stored in $(where_is "$allmax"); smallest new $lo; $dups equal to earlier IDs)"
    fi
    cat "$new" >> "$WORK/minted"; cat "$new" >> "$WORK/db.$db"
    if [ "$allmax" = 0 ]; then log "   [$STEP] $EVENT: $n IDs, $lo..$hi, the first"
    else log "   [$STEP] $EVENT: $n IDs, $lo..$hi, $(( $(ms_of "$lo") - $(ms_of "$allmax") )) ms above the largest before"; fi
}

# --- Events ------------------------------------------------------------------
ev_mint() {
    local db="$1" out t0 new="$WORK/new"
    need_running
    t0=$(date +%s)
    while ! out=$(q -d "$db" -c "INSERT INTO t SELECT FROM generate_series(1, 1000) RETURNING id" 2>&1); do
        if [[ "$out" == *"duplicate key value violates unique constraint"* ]]; then
            local key; key=$(grep -oE 'Key \(id\)=\([0-9]+\)' <<< "$out" | grep -oE '[0-9]+' | sed -n 1p)
            violation "P2 violated: a new ID in $db equals ${key:-an ID} stored in $db before (duplicate key: the INSERT failed), $(( $(ms_of "$(max_of "$WORK/db.$db")") - $(ms_of "${key:-0}") )) ms below the largest stored there ($(max_of "$WORK/db.$db"))"
        fi
        if [[ "$out" != *"high-water mark is not available"* ]] || [ $(( $(date +%s) - t0 )) -ge 60 ]; then
            refused "$(first_error "$out")"; return 0
        fi
        sleep 0.05
    done
    grep -E '^[0-9]+$' <<< "$out" > "$new" || true
    [ -s "$new" ] || violation "the INSERT returned no ID: $out"
    check "$db" "$new"
}
ev_stop() {
    need_running
    as_pg "$(pgbin)/pg_ctl" -D "$SRV/data" -m fast -w stop >/dev/null || die "pg_ctl stop failed in $SRV"
    RUNNING=0; release_holders_now
}
ev_crash() {
    need_running
    kill9 "$SRV"
    rm -f "$SRV/data/postmaster.pid"
    RUNNING=0; release_holders_now
}
ev_start() { need_stopped; start_server; }
holders_active() {
    [ "$(q -d postgres -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'model_replay_holder' AND backend_type = 'client backend' AND state = 'active' AND query LIKE '%pg_sleep%'")" = 8 ]
}
worker_id_is_1() { [ "$(q -d postgres -c "SHOW snowflake_id.worker_id")" = 1 ]; }
log_has() { since_start | grep -q "$1"; }
ev_start_lagging() {
    local db="$1"
    need_stopped
    as_pg bash -c "echo 'snowflake_id.worker_id = -1' >> '$SRV/data/postgresql.auto.conf'"
    start_server
    : > "$HOLDERS"
    for _ in $(seq 1 8); do
        PGAPPNAME=model_replay_holder "$(pgbin)/psql" -X -q -h "$SRV" -p "$SPORT" -U postgres -d postgres \
            -c "SET debug_parallel_query = on" -c "SELECT pg_sleep(3600)" >/dev/null 2>>"$BASE/holders.err" &
        echo $! >> "$HOLDERS"
    done
    poll_until 30 holders_active || die "start_lagging: the 8 sessions holding the worker slots did not start"
    sleep 0.5
    log "   [$STEP] $EVENT: $(q -d postgres -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker'") parallel workers hold every free worker slot; worker id set"
    q -d postgres -c "ALTER SYSTEM RESET snowflake_id.worker_id" -c "SELECT pg_reload_conf()" >/dev/null
    poll_until 30 worker_id_is_1 || die "start_lagging: worker_id = 1 not in effect 30 s after the reload"
    if ! poll_until 3 log_has "reading the high-water marks of every database"; then
        log "   [$STEP] $EVENT: this start reads no marks: nothing lags"; return 0
    fi
    poll_until 30 log_has "snowflake_id: read the high-water marks of" || die "start_lagging: the start-up read did not end within 30 s"
    if [ -n "${DB_EXT[$db]+x}" ] && ! log_has "could not read the high-water mark of database \"$db\""; then
        since_start | grep snowflake_id | tail -5 >&2
        die "start_lagging: database $db did not lag (the replay could not make it)"
    fi
    log "   [$STEP] $EVENT: $(since_start | grep -c 'could not read the high-water mark of database') databases lag; $(since_start | grep -o 'read the high-water marks of .*' | tail -1)"
}
parallel_workers_gone() { [ "$(q -d postgres -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker'")" = 0 ]; }
ev_read_lagging() {
    need_running
    if [ -s "$HOLDERS" ]; then
        q -d postgres -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'model_replay_holder' AND backend_type = 'client backend'" >/dev/null
        release_holders_now
        poll_until 30 parallel_workers_gone || die "read_lagging: the parallel workers did not exit"
    fi
    sleep 3
    log "   [$STEP] $EVENT: worker slots free for 3 s"
}
ev_lose_state_file() { need_stopped; rm -f "$SRV/data/snowflake_id.state"; }
ev_upgrade() {
    local new newport
    need_stopped
    drop_standby
    new=$(fresh "srv$((UPGRADES + 1))"); newport=$((PORT + (UPGRADES + 1) % 2))
    new_cluster "$new" "$newport"
    if (cd "$new" && as_pg "$(pgbin)/pg_upgrade" -b "$(pgbin)" -B "$(pgbin)" -d "$SRV/data" -D "$new/data" \
            -p "$SPORT" -P "$newport" --link >"$new/pg_upgrade.out" 2>&1); then
        log "   [$STEP] $EVENT: pg_upgrade --link $SRV -> $new (port $newport)"
        SRV=$new; SPORT=$newport; UPGRADES=$((UPGRADES + 1))
    else
        [ ! -f "$SRV/data/global/pg_control.old" ] || { tail -20 "$new/pg_upgrade.out" >&2; die "pg_upgrade failed after linking: the old cluster is gone"; }
        refused "pg_upgrade: $(grep -hm1 FATAL "$new"/data/pg_upgrade_output.d/*/log/pg_upgrade_server.log 2>/dev/null \
                               || grep -v '^$' "$new/pg_upgrade.out" | tail -3 | tr '\n' ' ')"
    fi
}
ev_resetwal() {
    need_stopped
    drop_standby
    as_pg "$(pgbin)/pg_resetwal" -f -D "$SRV/data" >/dev/null 2>"$BASE/resetwal.err" \
        || { cat "$BASE/resetwal.err" >&2; die "pg_resetwal failed"; }
}
standby_streams() {
    [ "$(q -d postgres -c "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = 'sync'")" = 1 ]
}
ev_standby() {
    local p
    need_running
    [ -z "$STBY" ] || malformed "the server has a standby already"
    for p in $((PORT + 2)) $((PORT + 3)); do [ "$p" = "$SPORT" ] || { STPORT=$p; break; }; done
    STBY=$(fresh "standby$STPORT")
    basebackup_standby "$SRV" "$SPORT" "$STBY" "$STPORT" >/dev/null 2>"$BASE/basebackup.err" \
        || { cat "$BASE/basebackup.err" >&2; die "standby: pg_basebackup failed"; }
    as_pg sed -i '/^snowflake_id.worker_id\|^synchronous_standby_names/d' "$STBY/data/postgresql.auto.conf"
    fake_start "$STBY"
    q -d postgres -c "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()" >/dev/null
    poll_until 30 standby_streams || { tail -20 "$STBY/server.log" >&2; die "standby: not a synchronous standby 30 s after its start"; }
    log "   [$STEP] $EVENT: a synchronous standby in $STBY (port $STPORT)"
}
drop_standby() {  # (server stopped) the standby can no longer follow: gone
    [ -n "$STBY" ] || return 0
    cluster_stop "$STBY"; rm -rf "$STBY"; STBY=""
    as_pg sed -i '/^synchronous_standby_names/d' "$SRV/data/postgresql.auto.conf"
}
ev_failover() {
    local old
    need_running
    [ -n "$STBY" ] || ev_standby
    kill9 "$SRV"; rm -f "$SRV/data/postmaster.pid"; release_holders_now
    LOG_FROM=$(stat -c %s "$STBY/server.log")
    as_pg "$(pgbin)/pg_ctl" -D "$STBY/data" -w -t 60 promote >/dev/null \
        || { tail -20 "$STBY/server.log" >&2; die "failover: the standby was not promoted"; }
    old=$SRV; SRV=$STBY; SPORT=$STPORT; STBY=""; rm -rf "$old"
    log "   [$STEP] $EVENT: $old killed, $SRV promoted (port $SPORT)"
}
ev_drop_database() {
    local db="$1" out
    need_running
    if out=$(q -d postgres -c "DROP DATABASE $db" 2>&1); then
        unset "DB_EXT[$db]"
        [ ! -f "$WORK/db.$db" ] || mv "$WORK/db.$db" "$WORK/db.$db.dropped-at-$STEP"
        [ ! -f "$WORK/held.$db" ] || mv "$WORK/held.$db" "$WORK/held.$db.dropped-at-$STEP"
    else
        refused "$(first_error "$out")"
    fi
}
ev_drop_extension() {  # ev_drop_extension D [SQL]: the extension goes, by SQL
    local db="$1" sql="${2:-DROP EXTENSION snowflake_id CASCADE}" out
    need_running
    if out=$(q -d "$db" -c "$sql" 2>&1); then DB_EXT[$db]=0
    else refused "$(first_error "$out")"; fi
}
copy_ids() {  # copy_ids S D: D stores what S stores
    if [ -f "$WORK/db.$1" ]; then cp "$WORK/db.$1" "$WORK/db.$2"; else rm -f "$WORK/db.$2"; fi
    if [ -f "$WORK/held.$1" ]; then cp "$WORK/held.$1" "$WORK/held.$2"; else rm -f "$WORK/held.$2"; fi
}
ev_template() {
    local s="$1" d="$2" out
    need_running
    if out=$(q -d postgres -c "CREATE DATABASE $d TEMPLATE $s" 2>&1); then
        DB_EXT[$d]=${DB_EXT[$s]:-0}; copy_ids "$s" "$d"
    else
        refused "$(first_error "$out")"
    fi
}
ev_dump_restore() {
    local s="$1" d="$2" out
    need_running
    if ! out=$(q -d postgres -c "CREATE DATABASE $d" 2>&1); then refused "$(first_error "$out")"; return 0; fi
    if ! "$(pgbin)/pg_dump" -h "$SRV" -p "$SPORT" -U postgres "$s" > "$BASE/dump.sql" 2>"$BASE/dump.err" \
        || ! q -d "$d" -f "$BASE/dump.sql" >/dev/null 2>"$BASE/restore.err"; then
        refused "$(cat "$BASE/dump.err" "$BASE/restore.err" | grep -m1 -E 'ERROR|error' || echo "pg_dump | psql failed")"
        q -d postgres -c "DROP DATABASE IF EXISTS $d" >/dev/null 2>&1 || true
        return 0
    fi
    DB_EXT[$d]=${DB_EXT[$s]:-0}; copy_ids "$s" "$d"
}
ev_hold() {
    local db="$1" out id
    need_running
    if out=$(q -d "$db" -v top="$(server_max)" 2>&1 <<'SQL'
SET client_min_messages = error;
BEGIN;
SELECT (extract(epoch FROM greatest(clock_timestamp(), snowflake_timestamp(nullif(:top::bigint, 0)))) * 1000)::bigint
       + 1800000 AS mark \gset
INSERT INTO snowflake_id_internal.snowflake_high_water (worker_id, epoch_ms, worker_bits, sequence_bits, mark_ms)
    SELECT worker_id, (extract(epoch FROM epoch) * 1000)::bigint, worker_bits, sequence_bits, :mark FROM snowflake_stats();
INSERT INTO t (id) SELECT snowflake_compose(to_timestamp(:mark / 1000.0), worker_id, 0) FROM snowflake_stats() RETURNING id;
COMMIT;
SQL
    ); then
        id=$(grep -E '^[0-9]+$' <<< "$out" | tail -1)
        echo "$id" >> "$WORK/db.$db"; echo "$id" >> "$WORK/held.$db"
        log "   [$STEP] $EVENT: a mark 30 minutes ahead and the ID $id at it, in $db"
    else
        refused "$(first_error "$out")"
    fi
}
ev_accept() {
    local db out h
    need_running
    for db in "${!DB_EXT[@]}"; do
        [ "${DB_EXT[$db]}" = 1 ] || continue
        if out=$(q -d "$db" -c "SELECT snowflake_accept_configuration()" 2>&1); then
            log "   [$STEP] $EVENT: $out"
            for h in "${!DB_EXT[@]}"; do
                [ ! -f "$WORK/held.$h" ] || cat "$WORK/held.$h" >> "$WORK/accepted"
            done
            rm -f "$WORK"/held.*
        else
            refused "$(first_error "$out")"
        fi
        return 0
    done
    refused "no database has the extension"
}
ev_discard() {
    local db="$1" out
    need_running
    if out=$(q -d "$db" -c "SELECT snowflake_discard_high_water()" 2>&1); then
        if [ -f "$WORK/held.$db" ]; then
            grep -vxF -f "$WORK/held.$db" "$WORK/db.$db" > "$WORK/db.$db.tmp" || true
            mv "$WORK/db.$db.tmp" "$WORK/db.$db"; rm -f "$WORK/held.$db"
        fi
        log "   [$STEP] $EVENT: the mark is now $out"
    else
        refused "$(first_error "$out")"
    fi
}
ev_clock() {  # ev_clock back|forward small|far
    local s
    case $2 in small) s=300 ;; far) s=1800 ;; *) malformed "clock step '$2' (small or far)" ;; esac
    [ "$1" = back ] && s=$((-s))
    clock_step "$s"
}
ev_clock_freeze() { FROZEN=$(( $(date +%s) + OFFSET )); write_clock; }
ev_clock_run() { FROZEN=""; write_clock; }
ev_checkpoint() { need_running; q -d postgres -c "CHECKPOINT" >/dev/null; }

# --- A trace -----------------------------------------------------------------
init_trace() {  # init_trace TRACE_FILE
    local db
    all_stop
    rm -rf "$WORK"; mkdir -p "$WORK"; : > "$WORK/minted"
    DB_EXT=(); OFFSET=0; FROZEN=""; write_clock; UPGRADES=0; SPORT=$PORT; STBY=""
    SRV=$(fresh srv0)
    for db in "$BASE"/srv[1-9]* "$BASE"/standby*; do [ ! -d "$db" ] || rm -rf "$db"; done
    new_cluster "$SRV" "$SPORT"
    start_server
    for db in a b; do
        q -d postgres -c "CREATE DATABASE $db" >/dev/null
        q -d "$db" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
            -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval())" >/dev/null
        DB_EXT[$db]=1
    done
    q -d postgres -c "CHECKPOINT" >/dev/null
    SHIFT=$(q -d a -c "SELECT worker_bits + sequence_bits FROM snowflake_stats()")
    if grep -qE '^[[:space:]]*failover' "$1"; then ev_standby; fi
}
ARGS=()
want() { [ $((${#ARGS[@]} - 1)) = "$1" ] || malformed "${ARGS[0]} takes $1 argument(s)"; }
replay() {
    local file="$1" line ev args=() t0=$SECONDS
    TRACE=$(basename "$file"); STEP=0; EVENT=init
    log "$TRACE"
    init_trace "$file"
    while IFS= read -r line || [ -n "$line" ]; do
        line=${line%%#*}
        read -r -a args <<< "$line"
        [ ${#args[@]} -gt 0 ] || continue
        STEP=$((STEP + 1)); ev=${args[0]}; EVENT="${args[*]}"; ARGS=("${args[@]}")
        [ "$ev" = mint ] || log "   [$STEP] $EVENT"
        case $ev in
            mint) want 1; ev_mint "${args[1]}" ;;
            stop) want 0; ev_stop ;;
            crash) want 0; ev_crash ;;
            start) want 0; ev_start ;;
            start_lagging) want 1; ev_start_lagging "${args[1]}" ;;
            read_lagging) want 0; ev_read_lagging ;;
            lose_state_file) want 0; ev_lose_state_file ;;
            upgrade) want 0; ev_upgrade ;;
            resetwal) want 0; ev_resetwal ;;
            drop_database) want 1; ev_drop_database "${args[1]}" ;;
            drop_extension) want 1; ev_drop_extension "${args[1]}" ;;
            drop_schema_cascade) want 1; ev_drop_extension "${args[1]}" "DROP SCHEMA public CASCADE" ;;
            template) want 2; ev_template "${args[1]}" "${args[2]}" ;;
            dump_restore) want 2; ev_dump_restore "${args[1]}" "${args[2]}" ;;
            carry) want 0; sleep 3 ;;
            standby) want 0; ev_standby ;;
            failover) want 0; ev_failover ;;
            hold) want 1; ev_hold "${args[1]}" ;;
            accept) want 0; ev_accept ;;
            discard) want 1; ev_discard "${args[1]}" ;;
            clock_back) want 1; ev_clock back "${args[1]}" ;;
            clock_forward) want 1; ev_clock forward "${args[1]}" ;;
            clock_freeze) want 0; ev_clock_freeze ;;
            clock_run) want 0; ev_clock_run ;;
            sleep) want 1; sleep "${args[1]}" ;;
            checkpoint) want 0; ev_checkpoint ;;
            expect_refused) want 0; [ "$REFUSED_AT" = $((STEP - 1)) ] || violation "the event before was not refused" ;;
            *) malformed "unknown event '$ev'" ;;
        esac
    done < "$file"
    log "$TRACE: ok ($STEP steps, $((SECONDS - t0)) s)"
}

if [ $# -gt 0 ]; then TRACES=("$@"); else TRACES=("$ROOT"/tests/integration/traces/*.trace); fi
# The model's samples: 3 after the named traces, none where traces are named.
SAMPLES=${MODEL_REPLAY_SAMPLES:-$([ $# -gt 0 ] && echo 0 || echo 3)}
if [ "$SAMPLES" -gt 0 ]; then
    rm -rf "$BASE/samples"
    (cd "$ROOT" && STARTS_MODEL_TRACES="$BASE/samples" STARTS_MODEL_SAMPLES="$SAMPLES" \
        STARTS_MODEL_SEED="${MODEL_REPLAY_SEED:-62}" cargo test -q -p snowflake_id_core --release \
        --test starts_model write_the_traces_for_the_replay >/dev/null) || die "the model did not write its samples"
    for f in "$BASE"/samples/sample_*.trace; do
        if grep -qvE '^(#|$)' "$f"; then TRACES+=("$f"); fi
    done
fi
[ -f "${TRACES[0]}" ] || die "no trace files (${TRACES[*]})"
FAILED=()
for f in "${TRACES[@]}"; do
    rm -f "$VERDICT"
    t0=$SECONDS
    set +e
    (set -e; replay "$f")
    rc=$?
    set -e
    if [ "$rc" != 0 ]; then
        if [[ "$f" == */samples/* ]]; then
            log "$(basename "$f"), the model's walk: $(grep -v '^#' "$f" | paste -sd ';' | sed 's/;/; /g')"
        fi
        FAILED+=("$(cat "$VERDICT" 2>/dev/null || echo "$(basename "$f"): the replay failed (see the log above)") [$((SECONDS - t0)) s]")
    fi
    all_stop
done
if [ ${#FAILED[@]} -gt 0 ]; then
    log "model_replay: ${#FAILED[@]} of ${#TRACES[@]} traces failed:"
    printf '  %s\n' "${FAILED[@]}" >&2
    die "${FAILED[0]}$([ ${#FAILED[@]} -gt 1 ] && echo " (and $((${#FAILED[@]} - 1)) more traces failed: see above)")"
fi
log "model_replay: ok (${#TRACES[@]} traces)"
