#!/usr/bin/env bash
# Issue 39: a database owner's renamed public schema never makes a
# superuser's call of the extension's SQL and PL/pgSQL bodies run her code.
#
# The extension is not relocatable; CREATE EXTENSION froze every
# @extschema@.name(...) in its function and procedure bodies as the
# schema's NAME ("public"), and PL/pgSQL (and SQL functions without BEGIN
# ATOMIC) look names up at run time. Since PostgreSQL 15 the database
# owner owns "public" (pg_database_owner), so mallory, who owns dbm and no
# more, renames it, creates a new "public" and puts her own functions
# there under the names and argument types the bodies call. Then a
# superuser, in dbm, runs the online conversion of her table, the offline
# conversion, its plan, the index list, the abandon, the fleet check and
# snowflake_js_safe() / snowflake_to_jsonb(), each qualified by the
# extension's schema's current name. Every one of her functions records
# whom it ran as and, as a superuser, makes her one.
#
# Passes (exit 0) when none of her functions ran as another role, mallory
# is no superuser, each call either refused with 42501 or did its work
# through the extension's own functions (snowflake_js_safe and
# snowflake_to_jsonb give the right answer), and, in a second database
# without any rename, her overload snowflake_convert_as_owner(regclass,
# text) in the public schema she owns never runs in a superuser's
# snowflake_convert_column; fails (exit 1) otherwise.
# Then checks that the recommended install (a schema of its own owned by
# a superuser) runs every one of those calls for a superuser.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
failed=0
fail() { log "$*"; failed=1; }

attack_cluster rename-bodies "${SNOWFLAKE_ATTACK_PORT:-16216}" 27
as postgres postgres -c "CREATE ROLE mallory LOGIN" -c "CREATE DATABASE dbm OWNER mallory" \
    -c "CREATE DATABASE safe OWNER mallory" >/dev/null
# The extension installed by a superuser in the default schema.
as postgres dbm -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" >/dev/null
[ "$(as postgres postgres -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'")" = f ] \
    || die "mallory is a superuser already"

# The attack, as the database owner: the tables to convert, then the rename
# and her functions under the names the bodies call.
as mallory dbm >/dev/null <<'SQL'
CREATE TABLE public.t_online (id serial PRIMARY KEY, v text);
CREATE TABLE public.t_offline (id serial PRIMARY KEY, v text);
INSERT INTO public.t_online (v) SELECT 'x' FROM generate_series(1, 50);
INSERT INTO public.t_offline (v) SELECT 'x' FROM generate_series(1, 50);
ALTER SCHEMA public RENAME TO public_was;
CREATE SCHEMA public;
CREATE TABLE public.ran_as (tag text, who text, super boolean);
GRANT ALL ON public.ran_as TO PUBLIC;
CREATE FUNCTION public.pwn(tag text) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
    INSERT INTO public.ran_as
    SELECT tag, current_user, (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user);
    IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user)
       AND current_user <> 'mallory' THEN
        EXECUTE 'ALTER ROLE mallory SUPERUSER';
    END IF;
END $f$;
CREATE FUNCTION public.snowflake_convert_online_step(regclass, name, integer, interval) RETURNS text
LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.pwn('convert_online'); RETURN 'done'; END $f$;
CREATE FUNCTION public.snowflake_convert_online_run_step(oid, text, integer, interval) RETURNS text
LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.pwn('convert_online_step'); RETURN 'done'; END $f$;
CREATE FUNCTION public.snowflake_convert_online_run_abandon(oid, text, OUT action text, OUT object text)
RETURNS SETOF record LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.pwn('convert_online_abandon'); END $f$;
CREATE FUNCTION public.snowflake_convert_online_columns(regclass, name, OUT rel regclass, OUT rel_col name, OUT new_col name)
RETURNS SETOF record LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.pwn('convert_online_columns'); END $f$;
CREATE TABLE public.snowflake_convert_progress (LIKE public_was.snowflake_convert_progress);
CREATE FUNCTION public.snowflake_convert_column_steps(regclass, name, boolean,
    OUT step integer, OUT action text, OUT object text, OUT detail text)
RETURNS SETOF record LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.pwn('convert_column'); END $f$;
CREATE FUNCTION public.snowflake_convert_rewrite_rate(oid, name, OUT bytes_per_second double precision, OUT how text)
LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.pwn('convert_plan'); END $f$;
CREATE FUNCTION public.snowflake_nextval() RETURNS bigint
LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.pwn('nextval'); RETURN 9223372036854775000; END $f$;
CREATE FUNCTION public.snowflake_convert_as_owner(regclass, text) RETURNS bigint
LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.pwn('as_owner'); RETURN 0; END $f$;
CREATE FUNCTION public.snowflake_js_safe(jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.pwn('js_safe'); RETURN $1; END $f$;
SQL

# A superuser runs each entry point, qualified by the schema's current name.
calls=(
    "convert_online|CALL public_was.snowflake_convert_online('public_was.t_online', 'id')"
    "convert_online_indexes|SELECT public_was.snowflake_convert_online_indexes('public_was.t_online', 'id')"
    "convert_online_abandon|SELECT * FROM public_was.snowflake_convert_online_abandon('public_was.t_online', 'id')"
    "convert_online_step|SELECT public_was.snowflake_convert_online_step('public_was.t_online', 'id', 1000, '1s')"
    "convert_column|SELECT * FROM public_was.snowflake_convert_column('public_was.t_offline', 'id')"
    "convert_plan|SELECT * FROM public_was.snowflake_convert_plan('public_was.t_offline', 'id')"
    "fleet_check|SELECT node, problem FROM public_was.snowflake_fleet_check()"
    "js_safe|SELECT public_was.snowflake_js_safe('{\"a\": {\"b\": [383011532541268040, 1]}}')"
    "to_jsonb|SELECT public_was.snowflake_to_jsonb(ARRAY[383011532541268040, 1])"
)
# These call nothing through the schema's name: they must work, exactly.
declare -A want=(
    [js_safe]='{"a": {"b": ["383011532541268040", 1]}}'
    [to_jsonb]='["383011532541268040", 1]'
)
bad=0
for c in "${calls[@]}"; do
    tag=${c%%|*} sql=${c#*|}
    out=$(as postgres dbm -v VERBOSITY=verbose -c "$sql" 2>&1) && rc=0 || rc=$?
    log "attack (schema rename, bodies): $tag (rc $rc): $(head -c 300 <<< "$out" | tr '\n' ' ')"
    if [ -n "${want[$tag]:-}" ]; then
        [ "$rc" = 0 ] && [ "$out" = "${want[$tag]}" ] \
            || { log "attack (schema rename, bodies): $tag: expected ${want[$tag]}"; bad=1; }
    elif [ "$rc" != 0 ] && [[ "$out" != *"42501"* ]]; then
        log "attack (schema rename, bodies): $tag failed, but not with 42501"; bad=1
    fi
done
ran=$(as postgres dbm -c "SELECT string_agg(DISTINCT tag || ' as ' || who, ', ') FROM public.ran_as WHERE who <> 'mallory'")
super=$(as postgres postgres -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'")
log "attack (schema rename, bodies): her functions ran as: ${ran:-nobody}"
[ "$super" = f ] || fail "attack (schema rename, bodies) WORKS: mallory is SUPERUSER (her functions ran: ${ran:-?})"
[ -z "$ran" ] || fail "attack (schema rename, bodies) WORKS in part: her functions ran: $ran"
[ "$bad" = 0 ] || fail "attack (schema rename, bodies): a call failed other than by refusing"
[ "$failed" = 1 ] || log "attack (schema rename, bodies) refused"

# Without a rename: an owner of the extension's schema may create in it,
# and an overload of exactly the argument types a body passes wins over
# the extension's own function (regclass, not oid).
as postgres postgres -c "ALTER ROLE mallory NOSUPERUSER" -c "CREATE DATABASE dbo OWNER mallory" >/dev/null
as postgres dbo -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" >/dev/null
as mallory dbo >/dev/null <<'SQL'
CREATE TABLE public.t_offline (id serial PRIMARY KEY, v text);
INSERT INTO public.t_offline (v) SELECT 'x' FROM generate_series(1, 50);
CREATE TABLE public.ran_as (tag text, who text);
GRANT ALL ON public.ran_as TO PUBLIC;
CREATE FUNCTION public.snowflake_convert_as_owner(regclass, text) RETURNS bigint
LANGUAGE plpgsql AS $f$
BEGIN
    INSERT INTO public.ran_as VALUES ('as_owner overload', current_user);
    IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
        EXECUTE 'ALTER ROLE mallory SUPERUSER';
    END IF;
    RETURN 0;
END $f$;
SQL
out=$(as postgres dbo -v VERBOSITY=verbose -c "SELECT * FROM public.snowflake_convert_column('public.t_offline', 'id')" 2>&1) && rc=0 || rc=$?
log "attack (schema owner overload): convert_column (rc $rc): $(head -c 300 <<< "$out" | tr '\n' ' ')"
ran=$(as postgres dbo -c "SELECT string_agg(DISTINCT tag || ' as ' || who, ', ') FROM public.ran_as WHERE who <> 'mallory'")
[ "$(as postgres postgres -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'")" = f ] \
    || fail "attack (schema owner overload) WORKS: mallory is SUPERUSER (her function ran as ${ran:-?})"
[ -z "$ran" ] || fail "attack (schema owner overload) WORKS in part: her function ran as $ran"
[ "$rc" = 0 ] || [[ "$out" == *"42501"* ]] || fail "attack (schema owner overload): failed, but not with 42501"
[ "$failed" = 1 ] || log "attack (schema owner overload) refused"

# The recommended install keeps working for a superuser in her database.
as postgres safe >/dev/null <<'SQL'
SET client_min_messages = warning;
CREATE SCHEMA snowflake AUTHORIZATION postgres;
CREATE EXTENSION snowflake_id SCHEMA snowflake;
CREATE TABLE public.t_online (id serial PRIMARY KEY, v text);
CREATE TABLE public.t_offline (id serial PRIMARY KEY, v text);
ALTER TABLE public.t_online OWNER TO mallory;
ALTER TABLE public.t_offline OWNER TO mallory;
INSERT INTO public.t_online (v) SELECT 'x' FROM generate_series(1, 50);
INSERT INTO public.t_offline (v) SELECT 'x' FROM generate_series(1, 50);
SQL
as postgres safe >/dev/null <<'SQL' || die "the recommended install refused a superuser"
CALL snowflake.snowflake_convert_online('public.t_online', 'id');
SELECT snowflake.snowflake_convert_online_indexes('public.t_online', 'id') \gexec
CALL snowflake.snowflake_convert_online('public.t_online', 'id');
SELECT * FROM snowflake.snowflake_convert_plan('public.t_offline', 'id');
SELECT * FROM snowflake.snowflake_convert_column('public.t_offline', 'id');
SELECT * FROM snowflake.snowflake_fleet_check();
SELECT snowflake.snowflake_js_safe('{"a": {"b": [383011532541268040, 1]}}');
SQL
[ "$(as postgres safe -c "SELECT snowflake.snowflake_js_safe('{\"a\": {\"b\": [383011532541268040, 1]}}')")" \
    = '{"a": {"b": ["383011532541268040", 1]}}' ] || die "snowflake_js_safe gave a wrong result"
[ "$(as postgres safe -c "SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = 'public.t_online'::regclass AND attname = 'id'")" = bigint ] \
    || die "the online conversion did not finish under the recommended install"
log "attack (schema rename, bodies): the recommended install converts, checks and rewrites for a superuser"
[ "$failed" = 0 ] || die "attack (schema rename, bodies): FAILED"
