-- Attack F3 (issue 39), and with hostile_online.sql F2: operators bound
-- by argument type. An
-- expression like `throttle > 0` (real, integer) or `100.0 * pages_done`
-- (numeric, bigint) has no operator of exactly those types in pg_catalog,
-- so an operator of exactly those types in any schema of search_path wins
-- over pg_catalog's, even in a schema after it (the CVE-2018-1058 class).
-- mallory plants such operators (hostile_ops.sql) and nothing of hers may
-- run as anyone else:
--   F3, fresh install: with CREATE in the schema CREATE EXTENSION installs
--      into, before it: 0.7.0 bound her *(numeric,bigint),
--      /(numeric,bigint) into the view snowflake_convert_status and her
--      =(oid,regclass) into the policy of snowflake_convert_progress, run
--      by every reader (a superuser reading the view made her one);
--   F3, upgrade: the same planted before CREATE EXTENSION ... VERSION
--      '0.7.0'; ALTER EXTENSION ... UPDATE must leave no view or policy
--      bound to her operators;
--   F2: hostile_online.sql.
\set ON_ERROR_STOP 1
\c - postgres
ALTER ROLE mallory NOSUPERUSER;

-- F3: a fresh install into a schema mallory may create in.
CREATE DATABASE hs_fresh;
\c hs_fresh postgres
\ir hostile_db.sql
GRANT CREATE ON SCHEMA public TO mallory;
\c - mallory
\set schema public
\ir hostile_ops.sql
\c - postgres
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
RESET client_min_messages;
CREATE TABLE public.hs_t (id serial PRIMARY KEY);
ALTER TABLE public.hs_t OWNER TO alice;
-- A superuser may write the progress (a restored dump does): one row.
-- Without triggers, as pg_restore --disable-triggers: the progress guard
-- refuses a superuser where mallory may create in the extension's schema
-- (attack_schema_rename_bodies.sh).
SET session_replication_role = replica;
INSERT INTO public.snowflake_convert_progress (tbl, col, rel, rel_col, new_col, not_null, phase, pages_total, pages_done)
VALUES ('public.hs_t', 'id', 'public.hs_t', 'id', 'id_snowflake_new', true, 'backfill', 10, 3);
RESET session_replication_role;
SET search_path = pg_catalog, sectest;
SELECT sectest.check(max(percent_done) = 30.0, 'a superuser reads snowflake_convert_status')
  FROM public.snowflake_convert_status;
SELECT sectest.nothing_ran('F3: a superuser read the view of a fresh install');
\c - alice
SET search_path = pg_catalog;
SELECT sectest.check(count(*) = 1, 'alice reads her row of snowflake_convert_status')
  FROM public.snowflake_convert_status;
\c - postgres
SET search_path = pg_catalog, sectest;
SELECT sectest.nothing_ran('F3: alice read the view of a fresh install (the policy)');
SELECT sectest.no_foreign_operators('F3: a fresh install');

-- F3: an upgrade of an install that bound her operators.
\c postgres postgres
CREATE DATABASE hs_upgrade;
\c hs_upgrade postgres
\ir hostile_db.sql
GRANT CREATE ON SCHEMA public TO mallory;
\c - mallory
\set schema public
\ir hostile_ops.sql
\c - postgres
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id VERSION '0.7.0';
ALTER EXTENSION snowflake_id UPDATE;
RESET client_min_messages;
CREATE TABLE public.hs_t (id serial PRIMARY KEY);
ALTER TABLE public.hs_t OWNER TO alice;
-- Without triggers, as pg_restore --disable-triggers: the progress guard
-- refuses a superuser where mallory may create in the extension's schema
-- (attack_schema_rename_bodies.sh).
SET session_replication_role = replica;
INSERT INTO public.snowflake_convert_progress (tbl, col, rel, rel_col, new_col, not_null, phase, pages_total, pages_done)
VALUES ('public.hs_t', 'id', 'public.hs_t', 'id', 'id_snowflake_new', true, 'backfill', 10, 3);
RESET session_replication_role;
SET search_path = pg_catalog, sectest;
SELECT sectest.check(extversion <> '0.7.0', 'the extension was upgraded') FROM pg_extension WHERE extname = 'snowflake_id';
SELECT sectest.no_foreign_operators('F3: an upgrade from 0.7.0 installed next to her operators');
SELECT sectest.check(max(percent_done) = 30.0, 'a superuser reads snowflake_convert_status')
  FROM public.snowflake_convert_status;
\c - alice
SET search_path = pg_catalog;
SELECT sectest.check(count(*) = 1, 'alice reads her row of snowflake_convert_status')
  FROM public.snowflake_convert_status;
\c - postgres
SET search_path = pg_catalog, sectest;
SELECT sectest.nothing_ran('F3: the view and the policy after the upgrade');

