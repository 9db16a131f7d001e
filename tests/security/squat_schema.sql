-- Issue 46, item 7: a database's owner creates a schema named
-- snowflake_id_internal, with objects under the extension's names in it,
-- before the extension's 0.7.0 -> 0.8.0 upgrade, and before a fresh
-- install. On 0.8.0 as first written the upgrade failed there ("schema
-- snowflake_id_internal already exists"): her database stayed on 0.7.0.
-- Now the install and the upgrade go through, her schema is renamed out
-- of the way (a WARNING names it), the extension's schema and table are
-- the superuser's and members of the extension, and nothing of hers ran
-- as anyone else.
\set ON_ERROR_STOP 1
\c postgres postgres
ALTER ROLE mallory NOSUPERUSER;
CREATE DATABASE sq_upgrade OWNER mallory;
CREATE DATABASE sq_fresh OWNER mallory;

\c sq_upgrade postgres
\ir hostile_db.sql
\c - mallory
-- Her schema and table under the extension's names, and a trigger that
-- would make her a superuser if it ever ran as one.
CREATE SCHEMA snowflake_id_internal;
CREATE TABLE snowflake_id_internal.snowflake_high_water (worker_id integer, epoch_ms bigint,
    worker_bits integer, sequence_bits integer, mark_ms bigint, written_at timestamptz);
CREATE FUNCTION snowflake_id_internal.pwn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    ALTER ROLE mallory SUPERUSER;
    RETURN NEW;
END $$;
CREATE TRIGGER pwn BEFORE INSERT OR UPDATE ON snowflake_id_internal.snowflake_high_water
    FOR EACH ROW EXECUTE FUNCTION snowflake_id_internal.pwn();
\c - postgres
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id VERSION '0.7.0';
RESET client_min_messages;
ALTER EXTENSION snowflake_id UPDATE;
SET search_path = pg_catalog, sectest;
SELECT sectest.check(extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'snowflake_id'),
                     'the upgrade went through in a database whose owner took snowflake_id_internal first')
  FROM pg_extension WHERE extname = 'snowflake_id';
\ir squat_checks.sql

\c sq_fresh postgres
\ir hostile_db.sql
\c - mallory
CREATE SCHEMA snowflake_id_internal;
CREATE TABLE snowflake_id_internal.snowflake_high_water (worker_id integer);
\c - postgres
CREATE EXTENSION snowflake_id;
SET search_path = pg_catalog, sectest;
\ir squat_checks.sql
