#!/usr/bin/env bash
# Every start keeps every promise (issue 55): after every start path, for
# every way an ID is minted, no new ID is at or below any ID handed out
# before, stored or only seen by the client. The clock is 5 minutes
# behind the old IDs after each start (libfaketime), so that only the
# state file, the WAL and the high-water marks protect.
#
# Minting contexts, each in its own database. Before every round a reload
# gives the server a new worker id, so that each context also mints its
# database's first ID of that worker id, and so writes its row of the
# high-water table, itself:
#   top        autocommit INSERTs
#   savepoint  INSERTs in a savepoint rolled back (ROLLBACK TO)
#   exception  INSERTs in a PL/pgSQL block whose EXCEPTION clause undoes them
#   prepared   INSERTs in a PREPARE TRANSACTION, then COMMIT PREPARED or
#              ROLLBACK PREPARED after the start (before it where the
#              path allows none open: pg_upgrade, pg_dump)
#   cursor     a cursor WITH HOLD over snowflake_nextval(), fetched after
#              its transaction committed
#   trigger    a BEFORE INSERT trigger that sets the key
#   copy       COPY ... FROM STDIN into a table keyed by the default
#   parallel   a parallel query whose workers mint (after one ID in the
#              leader: a parallel worker cannot create the row)
# Start paths, one round each: a clean stop; an immediate stop; kill -9 of
# the postmaster; a start without the state file; pg_upgrade --copy
# without the state file; pg_dump of every database restored into a new
# server with the same worker id.
# Each round checks:
#   1. before the start: every database's mark of the round's worker id
#      is at or above every ID its client saw (what pg_upgrade, a lost
#      state file and a dump carry); on 68208ac the savepoint, exception
#      and prepared contexts left no row, or none another session sees;
#   2. after the start, with the clock 5 minutes behind: the first ID of
#      every database, asked for at once and all together (while the
#      start-up read runs, where there is one: 40 more databases make it
#      last; a call then fails with 55000 and a DETAIL that says how far
#      the read has got, and is made again), and 200 more, are above every
#      ID any client saw before; on 68208ac a call that waited for the
#      read returned an ID computed before it;
#   3. after an immediate stop or kill -9, crash recovery replayed a
#      reservation and the marks were not read (issue 55: a crash costs
#      no wait); after the starts without a state file they were;
#   4. the prepared transaction commits, or rolls back, after the start.
# On PostgreSQL 18 every start path; on the other majors the cheap core
# (clean, immediate, no state file). STARTS_PATHS="kill9 nofile" runs
# some of the paths only, STARTS_CONTEXTS="top prepared" some of the
# contexts (each on its own shows which fail against an older version),
# STARTS_FILLERS=1000 the start-up read of 1,000 databases and more.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
BASE=$(state_dir "$ROOT/.run/it-starts" it-starts)
PORT=${SNOWFLAKE_IT_PORT:-15300}
fake_clock "$BASE/faketime"
all_stop() { for d in "$BASE"/*/; do [ -f "$d/data/PG_VERSION" ] && cluster_stop "${d%/}"; done; true; }
trap all_stop EXIT
all_stop
if [ "$PG_MAJOR" = 18 ]; then
    PATHS=${STARTS_PATHS:-"clean immediate kill9 nofile upgrade dump"}
else
    PATHS=${STARTS_PATHS:-"clean immediate nofile"}
fi
CONTEXTS=${STARTS_CONTEXTS:-"top savepoint exception prepared cursor trigger copy parallel"}
# STARTS_FILLERS=1000: that many more databases (the start-up read's
# size); each one's first ID is asked for at once, so max_connections
# grows with it.
FILLERS=${STARTS_FILLERS:-40}

fresh() { local d="$BASE/$1"; cluster_stop "$d"; rm -rf "$d"; mkdir -p "$d"; is_root && chown postgres:postgres "$d"; echo "$d"; }
start() { fake_start "$1"; }  # start DIR: with the fake clock
init() {  # init DIR PORT WORKER
    cluster_init "$1" "$2" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = $3" \
        "snowflake_id.max_lead = '1h'" "max_prepared_transactions = 10" \
        "max_connections = $((FILLERS > 40 ? FILLERS + 100 : 100))"
}
q() { local d="$1" p="$2"; shift 2; pq "$d" "$p" -At -F ' ' "$@"; }

# setup DIR PORT: a template with the extension and the contexts' objects,
# a database per context and FILLERS more made from it.
setup() {
    local d="$1" p="$2" c i
    q "$d" "$p" -c "CREATE DATABASE tmpl" >/dev/null
    q "$d" "$p" -d tmpl -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" >/dev/null
    q "$d" "$p" -d tmpl >/dev/null <<'SQL'
CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), v int);
CREATE FUNCTION undone() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE m bigint;
BEGIN
    BEGIN
        WITH ins AS (INSERT INTO t (v) SELECT g FROM generate_series(1, 100) g RETURNING id)
        SELECT max(id) INTO m FROM ins;
        RAISE EXCEPTION 'undo';
    EXCEPTION WHEN raise_exception THEN
        RETURN m;
    END;
END $$;
CREATE TABLE tt (id bigint PRIMARY KEY, v int);
CREATE FUNCTION set_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.id := snowflake_nextval(); RETURN NEW; END $$;
CREATE TRIGGER set_id BEFORE INSERT ON tt FOR EACH ROW EXECUTE FUNCTION set_id();
CREATE TABLE big AS SELECT g FROM generate_series(1, 100000) g;
ANALYZE big;
SQL
    for c in $CONTEXTS; do q "$d" "$p" -c "CREATE DATABASE c_$c TEMPLATE tmpl" >/dev/null; done
    for i in $(seq 1 "$FILLERS"); do q "$d" "$p" -c "CREATE DATABASE f$i TEMPLATE tmpl" >/dev/null; done
}

# set_worker DIR PORT W: the server's worker id is W from now on (reload).
set_worker() {
    q "$1" "$2" -c "ALTER SYSTEM SET snowflake_id.worker_id = $3" -c "SELECT pg_reload_conf()" >/dev/null
    worker_is() { [ "$(q "$1" "$2" -c "SHOW snowflake_id.worker_id")" = "$3" ]; }
    poll_until 60 worker_is "$1" "$2" "$3" || die "worker_id = $3 not in effect 60 s after the reload"
}

# mint DIR PORT CONTEXT ROUND: mint in CONTEXT's database as it does;
# prints every ID its client saw, one a line.
mint() {
    local d="$1" p="$2" c="$3" r="$4" db="c_$3"
    case $c in
        top) q "$d" "$p" -d "$db" -c "INSERT INTO t (v) SELECT g FROM generate_series(1, 100) g RETURNING id" ;;
        savepoint) q "$d" "$p" -d "$db" -c "BEGIN" -c "SAVEPOINT s" \
            -c "INSERT INTO t (v) SELECT g FROM generate_series(1, 100) g RETURNING id" \
            -c "ROLLBACK TO SAVEPOINT s" -c "COMMIT" ;;
        exception) q "$d" "$p" -d "$db" -c "SELECT undone()" ;;
        prepared) q "$d" "$p" -d "$db" -c "BEGIN" \
            -c "INSERT INTO t (v) SELECT g FROM generate_series(1, 100) g RETURNING id" \
            -c "PREPARE TRANSACTION 'p$r'" ;;
        cursor) q "$d" "$p" -d "$db" -c "BEGIN" \
            -c "DECLARE c CURSOR WITH HOLD FOR SELECT snowflake_nextval() FROM generate_series(1, 100)" \
            -c "COMMIT" -c "FETCH ALL FROM c" -c "CLOSE c" ;;
        trigger) q "$d" "$p" -d "$db" -c "INSERT INTO tt (id, v) SELECT 0, g FROM generate_series(1, 100) g RETURNING id" ;;
        copy) seq 1 100 | q "$d" "$p" -d "$db" -c "COPY t (v) FROM STDIN"
            q "$d" "$p" -d "$db" -c "SELECT max(id) FROM t" ;;
        parallel) q "$d" "$p" -d "$db" -c "SELECT snowflake_nextval()"
            q "$d" "$p" -d "$db" -c "SET parallel_setup_cost = 0" -c "SET parallel_tuple_cost = 0" \
                -c "SET min_parallel_table_scan_size = 0" -c "SET max_parallel_workers_per_gather = 2" \
                -c "SELECT max(snowflake_nextval() + g * 0) FROM big" ;;
    esac
}

# covered DIR PORT CONTEXT W ID: CONTEXT's database holds a mark of worker
# id W at or above ID's millisecond, as any other session sees it.
covered() {
    [ "$(q "$1" "$2" -d "c_$3" -c "SELECT coalesce(max(mark_ms), -1) >= (extract(epoch FROM snowflake_timestamp($5)) * 1000)::bigint
        FROM snowflake_id_internal.snowflake_high_water WHERE worker_id = $4")" = t ]
}

# first_calls DIR PORT OUT: the first ID of every database, all at once
# (each asks again while the start-up read runs: mint_when_ready); the
# DETAIL of a call refused during the read, if any, in OUT.detail.
# databases: the context databases and the fillers, a name a line.
databases() { for c in $CONTEXTS; do echo "c_$c"; done; [ "$FILLERS" = 0 ] || seq -f 'f%g' 1 "$FILLERS"; }
first_calls() {
    local d="$1" p="$2" out="$3" db pids=()
    rm -f "$out".*
    for db in $(databases); do
        { mint_when_ready "$d" "$p" "$db" > "$out.$db" 2>&1
          [ -z "$READ_DETAIL" ] || echo "$READ_DETAIL" > "$out.detail.$db"; } & pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || true; done
}

# after DIR PORT LABEL MAX: checks 2 and 4.
after() {
    local d="$1" p="$2" label="$3" max="$4" f db id lo c
    first_calls "$d" "$p" "$BASE/first"
    refused=$(cat "$BASE"/first.detail.* 2>/dev/null | head -1 || true)
    for db in $(databases); do
        f="$BASE/first.$db"
        id=$(grep -E '^[0-9]+$' "$f" 2>/dev/null | tail -1 || true)
        [ -n "$id" ] || die "$label: no first ID in $db: $(cat "$f" 2>/dev/null)"
        [ "$id" -gt "$max" ] || die "$label: the first ID of $db, $id, is not above $max, an ID handed out before"
    done
    for c in $CONTEXTS; do
        lo=$(q "$d" "$p" -d "c_$c" -c "WITH ins AS (INSERT INTO t (v) SELECT g FROM generate_series(1, 200) g RETURNING id)
                                        SELECT min(id) FROM ins") || die "$label: inserting in c_$c failed (a key minted again?)"
        [ "$lo" -gt "$max" ] || die "$label: a new ID in c_$c ($lo) is not above $max"
    done
    if [ -n "$refused" ]; then
        [[ "$refused" == *"the read has got through "*" of "*" databases"* || "$refused" == *"has not listed the databases yet"* ]] \
            || die "$label: a call refused during the start-up read does not say how far it has got: $refused"
        log "   $label: calls during the start-up read were refused (55000): $refused"
    fi
    log "   $label: the first IDs of $(databases | wc -l) databases, taken at once, and 200 more in each context, all above $max"
}

# finish_prepared DIR PORT ROUND WHEN: COMMIT PREPARED or ROLLBACK
# PREPARED, in turn, if the round left one open.
finish_prepared() {
    local verb=COMMIT
    [[ " $CONTEXTS " == *" prepared "* ]] || return 0
    if [ $(($3 % 2)) = 1 ]; then verb=ROLLBACK; fi
    if [ "$(q "$1" "$2" -d c_prepared -c "SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'p$3'")" = 1 ]; then
        q "$1" "$2" -d c_prepared -c "$verb PREPARED 'p$3'" >/dev/null || die "round $3: $verb PREPARED failed"
        log "   round $3: $verb PREPARED $4 the start"
    fi
}

setclock "+0"
S=$(fresh s); init "$S" "$PORT" 10; start "$S"; SPORT=$PORT
setup "$S" "$SPORT"
log "$(wc -w <<< "$CONTEXTS") context databases and $FILLERS more, PostgreSQL $PG_MAJOR; start paths: $PATHS"
round=0
SEEN="$BASE/seen.ids"; : > "$SEEN"
for path in $PATHS; do
    round=$((round + 1)); w=$((10 + round)); label="$round. $path"
    log "$label (worker id $w)"
    setclock "+0"
    set_worker "$S" "$SPORT" "$w"
    for c in $CONTEXTS; do
        ids=$(mint "$S" "$SPORT" "$c" "$round" | grep -E '^[0-9]+$' || true)
        [ -n "$ids" ] || die "$label: the $c context minted nothing"
        sort -n <<< "$ids" | tail -1 >> "$SEEN"
        covered "$S" "$SPORT" "$c" "$w" "$(sort -n <<< "$ids" | tail -1)" \
            || die "$label: the $c context's IDs are above its database's mark of worker id $w (the mark a pg_upgrade, a lost state file or a dump carries)"
    done
    max=$(sort -n "$SEEN" | tail -1)
    log "   every context's database holds a mark above its IDs; the largest ID handed out is $max"
    case $path in
        upgrade|dump) finish_prepared "$S" "$SPORT" "$round" before ;;
    esac
    log_from=$(stat -c %s "$S/server.log")
    case $path in
        clean) cluster_stop "$S"; setclock "-5m"; start "$S" ;;
        immediate) as_pg "$(pgbin)/pg_ctl" -D "$S/data" -m immediate -w stop >/dev/null; setclock "-5m"; start "$S" ;;
        kill9) kill9 "$S"; setclock "-5m"; start "$S" ;;
        nofile) cluster_stop "$S"; rm -f "$S/data/snowflake_id.state"; setclock "-5m"; start "$S" ;;
        upgrade)
            cluster_stop "$S"
            N=$(fresh "u$round"); init "$N" $((PORT + round)) "$w"
            (cd "$N" && as_pg "$(pgbin)/pg_upgrade" -b "$(pgbin)" -B "$(pgbin)" -d "$S/data" -D "$N/data" \
                >"$N/pg_upgrade.out" 2>&1) || { tail -30 "$N/pg_upgrade.out" >&2; die "$label: pg_upgrade failed"; }
            S=$N; SPORT=$((PORT + round)); log_from=0
            setclock "-5m"; start "$S" ;;
        dump)
            N=$(fresh "d$round"); init "$N" $((PORT + round)) "$w"; setclock "-5m"; start "$N"
            for db in tmpl $(for c in $CONTEXTS; do echo "c_$c"; done); do
                q "$N" $((PORT + round)) -c "CREATE DATABASE $db" >/dev/null
                "$(pgbin)/pg_dump" -h "$S" -p "$SPORT" -U postgres "$db" \
                    | q "$N" $((PORT + round)) -d "$db" -v ON_ERROR_STOP=1 >/dev/null 2>"$N/restore.err" \
                    || { cat "$N/restore.err" >&2; die "$label: restoring $db failed"; }
            done
            # The other databases hold no mark of this round's worker id.
            for i in $(seq 1 "$FILLERS"); do q "$N" $((PORT + round)) -c "CREATE DATABASE f$i TEMPLATE tmpl" >/dev/null; done
            cluster_stop "$S"; S=$N; SPORT=$((PORT + round)); log_from=0 ;;
    esac
    after "$S" "$SPORT" "$label" "$max"
    since=$(tail -c +"$((log_from + 1))" "$S/server.log")
    case $path in
        immediate|kill9)
            grep -q "crash recovery replayed the reservation" <<< "$since" \
                || die "$label: crash recovery did not say it replayed a reservation"
            ! grep -q "reading the high-water marks of every database" <<< "$since" \
                || die "$label: the marks were read after a crash that the WAL covered"
            log "   crash recovery replayed a reservation: no read of the marks" ;;
        nofile|upgrade)
            grep -q "read the high-water marks of" <<< "$since" || die "$label: the marks were not read"
            log "   $(grep -o "read the high-water marks of.*" <<< "$since" | tail -1)" ;;
    esac
    finish_prepared "$S" "$SPORT" "$round" after
    q "$S" "$SPORT" -d "c_${CONTEXTS%% *}" -c "SELECT snowflake_nextval()" >> "$SEEN"
done
log "starts: ok"
