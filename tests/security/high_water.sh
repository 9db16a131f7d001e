#!/usr/bin/env bash
# The high-water-mark attacks of issue 38 (S29-S33): nothing a plain role
# writes or owns runs as another role, blocks another role's first ID
# after a restart, or moves the server's IDs. 0.7.0 planned max() over
# every key column as the bootstrap superuser at each database's first
# snowflake_nextval() since start-up; each attack below got through there.
# One database per attack, so that each meets its own first call:
#   S29 db29  mallory's partial index WHERE mal.pred(1): her IMMUTABLE
#             function calls a VOLATILE one that runs ALTER ROLE mallory
#             SUPERUSER and writes the mark file when it runs as a
#             superuser (and an index-expression variant)
#   S30 db30  her predicate raises an error unless current_user is her:
#             bob's first INSERT must still work
#   S31 db31  one explicit key 23 h ahead in her own table: bob's IDs must
#             stay on the clock, after a restart, and (db31b) with none
#   S32 db32  her open session holds a TEMP table with a key default
#   S33 db33  her open transaction holds LOCK TABLE on her key table
#   dbm       a database she owns, with the extension: her ALTER DATABASE
#             settings (role, session_authorization, read-only
#             transactions, timeouts) must not stop the high-water writer
#             there, nor minting elsewhere; and when she holds up the
#             writer there with a queued lock on the table (her own
#             database: she may read the table), only her database stops
#             handing out IDs (55000), the others go on
#   eve       a role with no privilege: she cannot even name the table,
#             so she cannot queue a lock on it (CREATE RULE locks before
#             it checks ownership)
# Run by tests/security/run.sh; also alone: bash tests/security/high_water.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
BASE=$(state_dir "$ROOT/.run/security-hw" security-hw)
PORT=${SNOWFLAKE_SECURITY_HW_PORT:-16150}
DIR="$BASE/hw" MARK="$BASE/pwned-by-mallory"
mkdir -p "$DIR"; is_root && chown postgres:postgres "$DIR"
holders=()
cleanup() { for p in "${holders[@]}"; do kill "$p" 2>/dev/null || true; done; cluster_stop "$DIR"; }
trap cleanup EXIT
cluster_stop "$DIR"
rm -f "$MARK"
failed=()
fail() { failed+=("$1"); log "security (high-water): FAILED: $1: $2"; }
ok() { log "security (high-water): $1"; }

# as ROLE DB SQL...: psql as ROLE in DB, tuples only.
as() {
    local role="$1" db="$2"; shift 2
    "$(pgbin)/psql" -X -q -h "$DIR" -p "$PORT" -U "$role" -d "$db" -v ON_ERROR_STOP=1 -At "$@"
}

cluster_init "$DIR" "$PORT" "shared_preload_libraries = 'snowflake_id'" "snowflake_id.worker_id = 13"
cluster_up "$DIR"
as postgres postgres -c "CREATE ROLE mallory LOGIN" -c "CREATE ROLE bob LOGIN" >/dev/null
for db in db29 db30 db31 db32 db33; do
    as postgres postgres -c "CREATE DATABASE $db" >/dev/null
    as postgres "$db" -v mark="$MARK" >/dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
CREATE SCHEMA mal AUTHORIZATION mallory;
CREATE SCHEMA b AUTHORIZATION bob;
-- Where mallory's payload writes when it runs as a superuser.
CREATE TABLE public.mark_path (p text);
INSERT INTO public.mark_path VALUES (:'mark');
GRANT SELECT ON public.mark_path TO PUBLIC;
SET ROLE bob;
CREATE TABLE b.orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);
RESET ROLE;
SET ROLE mallory;
-- The payload: superuser for mallory, and a line in the mark file naming
-- whose rights it ran with. Harmless when it runs as mallory.
CREATE FUNCTION mal.escalate() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $f$
BEGIN
    IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
        EXECUTE 'ALTER ROLE mallory SUPERUSER';
        EXECUTE format('COPY (SELECT %L) TO %L', current_user, (SELECT p FROM public.mark_path));
    END IF;
    RETURN true;
END $f$;
CREATE FUNCTION mal.pred(integer) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN RETURN mal.escalate(); END $f$;
CREATE FUNCTION mal.expr(bigint) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN PERFORM mal.escalate(); RETURN $1; END $f$;
-- S30's predicate: an error for everyone but her.
CREATE FUNCTION mal.only_me(integer) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN
    IF current_user <> 'mallory' THEN RAISE EXCEPTION 'mallory says no to %', current_user; END IF;
    RETURN true;
END $f$;
CREATE TABLE mal.keys (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), v int);
INSERT INTO mal.keys (v) VALUES (1);
SQL
done
as mallory db29 -c "CREATE INDEX ON mal.keys (id) WHERE mal.pred(1)" \
    -c "CREATE TABLE mal.keys2 (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), v bigint)" \
    -c "CREATE INDEX ON mal.keys2 (id, (mal.expr(v)))" >/dev/null
as mallory db30 -c "CREATE INDEX ON mal.keys (id) WHERE mal.only_me(1)" >/dev/null
FUTURE="snowflake_compose(now() + interval '23 hours', 13, 0)"
as mallory db31 -c "INSERT INTO mal.keys (id, v) VALUES ($FUTURE, 2)" >/dev/null
[ "$(as postgres postgres -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'")" = f ] \
    || die "the setup made mallory a superuser already"

# dbm: her own database. Its settings apply to every session there,
# the high-water writer's included.
as postgres postgres -c "CREATE DATABASE dbm OWNER mallory" >/dev/null
as postgres dbm -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" >/dev/null
as mallory dbm -c "ALTER DATABASE dbm SET role = 'mallory'" \
    -c "ALTER DATABASE dbm SET session_authorization = 'mallory'" \
    -c "ALTER DATABASE dbm SET default_transaction_read_only = on" \
    -c "ALTER DATABASE dbm SET statement_timeout = '1ms'" -c "ALTER DATABASE dbm SET lock_timeout = '1ms'" \
    -c "ALTER DATABASE dbm SET search_path = mal_nowhere" >/dev/null

# A restart: every database meets its first call again.
cluster_stop "$DIR"; cluster_up "$DIR"

# S32 and S33: mallory's sessions, held open while bob inserts (10 min,
# far longer than bob's statement timeout below; stopped by the cleanup).
as mallory db32 -c "CREATE TEMP TABLE tkeys (id bigint PRIMARY KEY DEFAULT snowflake_nextval())" \
    -c "SELECT pg_sleep(600)" >/dev/null 2>&1 & holders+=($!)
as mallory db33 -c "BEGIN" -c "LOCK TABLE mal.keys" -c "SELECT pg_sleep(600)" >/dev/null 2>&1 & holders+=($!)
mallory_holds() {
    [ "$(as postgres postgres -c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'mallory' AND wait_event = 'PgSleep'")" = 2 ]
}
poll_until 60 mallory_holds || die "mallory's sessions did not start"

# bob_first DB: bob's first INSERT in DB since the restart, within 60 s (a
# bound only a hung machine reaches, yet far below the 10 minutes
# mallory's sessions hold: an INSERT blocked by them fails).
# Prints its ID; any error or warning text goes to BASE/DB.err.
bob_first() {
    as bob "$1" -c "SET statement_timeout = '60s'" \
        -c "INSERT INTO b.orders (item) VALUES ('book') RETURNING id" 2>"$BASE/$1.err"
}
# on_clock ID: the ID's time is within a minute of the server's clock.
on_clock() {
    [ "$(as postgres db31 -c "SELECT (snowflake_decode($1)).ts < now() + interval '1 minute'")" = t ]
}

for db in db29 db30 db32 db33; do
    if id=$(bob_first "$db"); then
        ok "$db: bob's first INSERT after the restart: $id"
    else
        fail "$db" "bob's first INSERT after the restart failed: $(tr '\n' ' ' < "$BASE/$db.err")"
    fi
    if grep -q "mal\." "$BASE/$db.err"; then
        fail "$db" "bob was told the names of mallory's tables: $(tr '\n' ' ' < "$BASE/$db.err")"
    fi
done
# S29: whose rights her code ran with.
if [ "$(as postgres postgres -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'")" != f ]; then
    fail S29 "mallory is a superuser"
    as postgres postgres -c "ALTER ROLE mallory NOSUPERUSER" >/dev/null
else
    ok "S29: mallory is not a superuser"
fi
if [ -e "$MARK" ]; then
    fail S29 "mallory's code ran as $(sort -u "$MARK" | tr '\n' ' ')and wrote $MARK"
    rm -f "$MARK"
else
    ok "S29: no code of mallory's ran with another role's rights"
fi

# snowflake_raise_floor_from_data(), by a superuser, in the database of
# her partial index and index expression: each table is read as its
# owner, so her code runs as her; she stays no superuser, no mark file.
# (0.7.0 read them as the bootstrap superuser: S29's mechanism.)
owners=$(as postgres db29 -c "SELECT string_agg(relation || ' ' || owner, ', ' ORDER BY relation)
                               FROM snowflake_raise_floor_from_data() WHERE relation LIKE 'mal.%'")
if [ "$(as postgres postgres -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'")" != f ] || [ -e "$MARK" ]; then
    fail S29 "snowflake_raise_floor_from_data() ran mallory's code with a superuser's rights"
    as postgres postgres -c "ALTER ROLE mallory NOSUPERUSER" >/dev/null; rm -f "$MARK"
elif [ "$owners" != "mal.keys mallory, mal.keys2 mallory" ]; then
    fail S29 "snowflake_raise_floor_from_data() did not report her tables as hers: $owners"
else
    ok "S29: snowflake_raise_floor_from_data() read her tables as her ($owners)"
fi

# S31 after a restart: her key 23 h ahead does not move bob's IDs.
if id=$(bob_first db31) && on_clock "$id"; then
    ok "S31: after a restart bob's ID $id is on the clock, not 23 h ahead"
else
    fail S31 "after a restart bob's ID ${id:-none} is not on the clock: $(tr '\n' ' ' < "$BASE/db31.err")"
fi
# S31 without a restart, in a database no one has minted in yet.
as postgres postgres -c "CREATE DATABASE db31b" >/dev/null
as postgres db31b -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" \
    -c "CREATE SCHEMA mal AUTHORIZATION mallory" -c "CREATE SCHEMA b AUTHORIZATION bob" >/dev/null
as mallory db31b -c "CREATE TABLE mal.keys (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), v int)" \
    -c "INSERT INTO mal.keys (id, v) VALUES ($FUTURE, 2)" >/dev/null
as bob db31b -c "CREATE TABLE b.orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text)" >/dev/null
if id=$(bob_first db31b) && on_clock "$id"; then
    ok "S31: with no restart bob's ID $id is on the clock"
else
    fail S31 "with no restart bob's ID ${id:-none} is not on the clock: $(tr '\n' ' ' < "$BASE/db31b.err")"
fi
# Every ID the server mints now is on the clock, in any database.
id=$(as postgres db30 -c "SELECT snowflake_nextval()" 2>/dev/null || true)
if [ -n "$id" ] && on_clock "$id"; then
    ok "S31: the server's next ID $id is on the clock"
else
    fail S31 "the server's next ID ${id:-none} is not on the clock"
fi

# dbm: minting goes on elsewhere for more than two marks' worth (a mark
# runs 5 s ahead), and in her database, under her settings (read-only
# transactions, 1 ms lock timeout, her search_path), a session mints and
# the database holds a mark above its last ID.
last=""
for _ in $(seq 1 16); do
    last=$(as bob db29 -c "SELECT snowflake_nextval()" 2>&1) || break
    sleep 0.5
done
if [[ "$last" =~ ^[0-9]+$ ]]; then
    ok "dbm: her database's settings did not stop minting ($last)"
else
    fail dbm "minting stopped: $last"
fi
last=$(PGOPTIONS="-c role=none -c statement_timeout=0" as postgres dbm -c "SELECT public.snowflake_nextval()" 2>&1 || true)
held=$(PGOPTIONS="-c role=none -c statement_timeout=0 -c lock_timeout=0 -c search_path=public" \
       as postgres dbm -c "SELECT max(mark_ms) FROM snowflake_id_internal.snowflake_high_water" 2>&1 || true)
want=$(as postgres db29 -c "SELECT (extract(epoch FROM snowflake_timestamp(${last:-0})) * 1000)::bigint" 2>/dev/null || echo x)
if [[ "$held" =~ ^[0-9]+$ && "$want" =~ ^[0-9]+$ ]] && [ "$held" -ge "$want" ]; then
    ok "dbm: her database holds a mark above the last ID"
else
    fail dbm "her database holds no mark above the last ID (holds $held, needs $want)"
fi

# eve: no privilege at all; she cannot name the table to queue a lock.
as postgres postgres -c "CREATE ROLE eve LOGIN" >/dev/null
out=$(as eve db29 -c "CREATE RULE r AS ON INSERT TO snowflake_id_internal.snowflake_high_water DO INSTEAD NOTHING" 2>&1) \
    && fail eve "eve created a rule on the table"
if [[ "$out" == *"permission denied for schema snowflake_id_internal"* ]]; then
    ok "eve: cannot name the table, so cannot queue a lock on it"
else
    fail eve "eve's CREATE RULE was not refused before locking: $out"
fi

# mallory holds up the writer in her own database: a lock she holds, and
# an ACCESS EXCLUSIVE request queued behind it. Her database stops handing
# out IDs; bob's goes on for longer than the mark and the wait allow.
PGOPTIONS="-c role=mallory -c statement_timeout=0 -c lock_timeout=0 -c default_transaction_read_only=off" as mallory dbm -c "BEGIN" \
    -c "SELECT count(*) FROM snowflake_id_internal.snowflake_high_water" -c "SELECT pg_sleep(60)" >/dev/null 2>&1 & holders+=($!)
sleep 0.5
PGOPTIONS="-c role=mallory -c statement_timeout=0 -c lock_timeout=0 -c default_transaction_read_only=off" as mallory dbm -c "BEGIN" \
    -c "CREATE RULE r AS ON INSERT TO snowflake_id_internal.snowflake_high_water DO INSTEAD NOTHING" >/dev/null 2>&1 & holders+=($!)
queued=0
for _ in $(seq 1 100); do
    queued=$(as postgres postgres -c "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
                                       WHERE d.datname = 'dbm' AND NOT l.granted AND l.mode = 'AccessExclusiveLock'")
    [ "$queued" -ge 1 ] && break; sleep 0.1
done
[ "$queued" -ge 1 ] || die "mallory's lock request did not queue"
bob_ok=1
for _ in $(seq 1 30); do
    as bob db29 -c "SELECT snowflake_nextval()" >/dev/null 2>&1 || { bob_ok=0; break; }
    sleep 0.5
done
if [ $bob_ok = 1 ]; then
    ok "dbm: with the writer held up in her database, bob minted for 15 s in his"
else
    fail dbm "the writer held up in her database stopped bob's minting in his"
fi
out=$(PGOPTIONS="-c role=none -c statement_timeout=0" as postgres dbm -c "SELECT public.snowflake_nextval()" 2>&1) \
    && fail dbm "an ID was handed out in her database while its mark could not be written: $out"
if [[ "$out" == *"could not raise the snowflake_id high-water mark in this database"* ]]; then
    ok "dbm: her own database hands out no ID while its mark cannot be written"
else
    fail dbm "her database did not refuse as expected: $out"
fi
for p in "${holders[@]}"; do kill "$p" 2>/dev/null || true; done
as postgres postgres -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'mallory'" >/dev/null 2>&1
resumed=0
for _ in $(seq 1 100); do
    PGOPTIONS="-c role=none -c statement_timeout=0" as postgres dbm -c "SELECT public.snowflake_nextval()" >/dev/null 2>&1 \
        && { resumed=1; break; }
    sleep 0.2
done
if [ $resumed = 1 ]; then
    ok "dbm: once her locks were gone, her database handed out IDs again"
else
    fail dbm "her database did not resume handing out IDs"
fi

[ ${#failed[@]} = 0 ] || die "the high-water-mark attacks got through: ${failed[*]}"
ok "every high-water-mark attack refused"
