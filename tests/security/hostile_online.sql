-- Attack F2 (issue 39): operators bound by argument type at run time
-- (see hostile_install.sql for the class). mallory owns database app, so
-- she may create in its public schema (PostgreSQL 15 and later). A
-- superuser converts her table online: 0.7.0's procedure (no pinned
-- search_path: it commits, so it cannot have SET) ran her
-- >(real,integer) once per back-fill batch, and her
-- *(double precision,numeric) and +(numeric,double precision) on every
-- retry, as the superuser. Tried with her operators (hostile_ops.sql) in a
-- schema after public in search_path, then in public too, before every
-- step; and on the retries of a step that waits for a lock. The extension
-- is installed in a superuser's schema, snowflake: in public, which
-- mallory owns, the conversion refuses a superuser outright (42501,
-- attack_schema_rename_bodies.sh), so her operators are tried in the
-- caller's search_path around it.
\set ON_ERROR_STOP 1
\c postgres postgres
ALTER ROLE mallory NOSUPERUSER;

-- Her operators in a schema after public first.
CREATE DATABASE app OWNER mallory;
\c app postgres
\ir hostile_db.sql
SET client_min_messages = warning;
CREATE SCHEMA snowflake AUTHORIZATION postgres;
GRANT USAGE ON SCHEMA snowflake TO PUBLIC;
CREATE EXTENSION snowflake_id SCHEMA snowflake;
RESET client_min_messages;
\c - mallory
CREATE SCHEMA mal_late;
GRANT USAGE ON SCHEMA mal_late TO PUBLIC;
\set schema mal_late
\ir hostile_ops.sql
CREATE TABLE public.t (id serial PRIMARY KEY, v integer);
INSERT INTO public.t (v) SELECT g FROM generate_series(1, 2000) g;
CREATE TABLE public.t2 (id serial PRIMARY KEY, v integer);
INSERT INTO public.t2 (v) SELECT g FROM generate_series(1, 2000) g;
\c - postgres
SET search_path = "$user", public, mal_late, snowflake;
SET client_min_messages = warning;
CALL snowflake_convert_online('public.t', 'id', batch_pages => 2);
SET search_path = pg_catalog, sectest;
SELECT sectest.nothing_ran('F2: prepare and back-fill, her operators later in search_path');
SET search_path = "$user", public, mal_late, snowflake;
SELECT snowflake_convert_online_indexes('public.t', 'id') \gexec
SET search_path = pg_catalog, sectest;
SELECT sectest.nothing_ran('F2: the indexes, her operators later in search_path');
-- Now in public too, before the next steps.
\c - mallory
\set schema public
\ir hostile_ops.sql
\c - postgres
SET search_path = "$user", public, snowflake;
SET client_min_messages = warning;
CALL snowflake_convert_online('public.t', 'id');
SET search_path = pg_catalog, sectest;
SELECT sectest.check(phase = 'done', 'the online conversion of mallory''s public.t is done')
  FROM snowflake.snowflake_convert_status WHERE "table" = 'public.t'::regclass;
SELECT sectest.nothing_ran('F2: constraints and swap, her operators in public');
-- Retries: prepared by one step, then a lock held by another session
-- makes the back-fill's UPDATE wait, and the procedure retry.
SELECT snowflake.snowflake_convert_online_step('public.t2', 'id', 1000, '1s');
\! "$PSQL" -X -q -d app -c "BEGIN; LOCK TABLE public.t2 IN SHARE MODE; SELECT pg_sleep(1.5); COMMIT" >/dev/null 2>&1 &
DO $$
BEGIN
    FOR i IN 1 .. 400 LOOP
        EXIT WHEN EXISTS (SELECT 1 FROM pg_locks l WHERE l.relation = 'public.t2'::regclass AND l.granted
                                                      AND l.pid <> pg_backend_pid());
        PERFORM pg_sleep(0.01);
    END LOOP;
END;
$$;
SET search_path = "$user", public, mal_late, snowflake;
CALL snowflake_convert_online('public.t2', 'id', lock_wait => '10ms', max_retries => 10000);
SET search_path = pg_catalog, sectest;
SELECT sectest.check(batches > 0 AND rows_done = 2000, 'the back-fill of public.t2 ran after the lock was released')
  FROM snowflake.snowflake_convert_status WHERE "table" = 'public.t2'::regclass;
SELECT sectest.nothing_ran('F2: retries of the back-fill, her operators in public');
RESET client_min_messages;
