-- snowflake_fleet_check() reads only postgres_fdw servers whose owner the
-- caller can trust (issue 39, F4). In 0.7.0 it read every postgres_fdw
-- server: mallory, with nothing but USAGE on postgres_fdw, owned a server
-- pointing at this server's socket and a user mapping for PUBLIC with
-- user 'postgres'. postgres_fdw asks a superuser for no password, so a
-- superuser's fleet check connected as postgres to mallory's database,
-- where her snowflake_node view ran her function: she became SUPERUSER.
-- Run by tests/security/run.sh with -v pghost, pgport and mark.
\set ON_ERROR_STOP 1
\c - postgres
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
GRANT USAGE ON FOREIGN DATA WRAPPER postgres_fdw TO mallory;
CREATE DATABASE malapp OWNER mallory;
-- The monitoring role of the Prometheus exporter: pg_monitor, no more.
CREATE ROLE monitor LOGIN IN ROLE pg_monitor;
-- A server of the fleet, owned by a superuser: this server itself. The
-- monitor's mapping needs no password here, as trust authentication asks
-- for none (a superuser must allow that: password_required).
CREATE SERVER fleet_self FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host :'pghost', port :'pgport', dbname 'postgres');
CREATE USER MAPPING FOR postgres SERVER fleet_self OPTIONS (user 'postgres');
CREATE USER MAPPING FOR monitor SERVER fleet_self OPTIONS (user 'monitor', password_required 'false');
GRANT USAGE ON FOREIGN SERVER fleet_self TO monitor;
-- And one that cannot be reached.
CREATE SERVER fleet_down FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host '127.0.0.1', port '1', dbname 'postgres');
CREATE USER MAPPING FOR PUBLIC SERVER fleet_down OPTIONS (user 'postgres', password_required 'false');
GRANT USAGE ON FOREIGN SERVER fleet_down TO monitor;

-- mallory's database: a snowflake_node view that runs her function. As a
-- superuser it makes her one and writes the mark file.
\c malapp mallory
SELECT format($f$
CREATE FUNCTION public.payload() RETURNS integer
LANGUAGE plpgsql VOLATILE AS $body$
BEGIN
    IF (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
        ALTER ROLE mallory SUPERUSER;
        EXECUTE pg_catalog.format('COPY (SELECT current_user) TO PROGRAM %%L', 'cat >> ' || %L);
    END IF;
    RETURN 1;
END;
$body$$f$, :'mark') \gexec
CREATE VIEW public.snowflake_node AS
SELECT 1 AS worker_id, timestamptz '2024-01-01 00:00:00+00' AS epoch, 41 AS timestamp_bits,
       10 AS worker_bits, 12 AS sequence_bits, 'ok'::text AS state, 0::bigint AS system_identifier,
       pg_catalog.now() AS started_at, pg_catalog.clock_timestamp() AS server_clock
  FROM (SELECT public.payload()) p;
-- Her server in the database with the extension, and a mapping for PUBLIC
-- that names the superuser.
\c postgres mallory
SELECT format('CREATE SERVER mal_fleet FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host %L, port %L, dbname %L)',
              :'pghost', :'pgport', 'malapp') \gexec
CREATE USER MAPPING FOR PUBLIC SERVER mal_fleet OPTIONS (user 'postgres');

-- A superuser's check, as the Prometheus exporter ran it.
\c postgres postgres
SELECT sectest.check(count(*) = 1, 'the superuser''s fleet check reads the superuser''s server fleet_self')
  FROM snowflake_fleet_check() WHERE node LIKE '%fleet_self%' AND problem IS NULL;
SELECT sectest.check(NOT (SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'),
                     'mallory''s server did not make her SUPERUSER through a superuser''s fleet check');
SELECT sectest.check(count(*) = 0, 'the fleet check does not read mallory''s server unless named')
  FROM snowflake_fleet_check() WHERE node LIKE '%mal_fleet%';
-- Named, it is refused before any connection: its owner is not a superuser.
SELECT sectest.refused($$SELECT * FROM snowflake_fleet_check(servers => ARRAY['mal_fleet']::name[])$$, '42501');
SELECT sectest.check(NOT (SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'),
                     'naming mallory''s server did not make her SUPERUSER');
-- Should it have happened, take it back, so that later checks still mean something.
ALTER ROLE mallory NOSUPERUSER;

-- Errors: a superuser (and the server's owner) sees the whole message.
SELECT sectest.check(problem LIKE 'cannot read snowflake_node: could not connect to server%',
                     'a superuser sees why fleet_down cannot be read: ' || problem)
  FROM snowflake_fleet_check() WHERE node = 'fleet_down';

-- The monitoring role: pg_monitor runs the check through the servers it
-- may use. It never sees a remote server's messages, only the SQLSTATE.
\c postgres monitor
SELECT sectest.check(count(*) = 1, 'monitor (pg_monitor) reads this server through fleet_self')
  FROM snowflake_fleet_check() WHERE node LIKE '%fleet_self%' AND problem IS NULL;
SELECT sectest.check(count(*) = 0, 'monitor''s fleet check does not read mallory''s server')
  FROM snowflake_fleet_check() WHERE node LIKE '%mal_fleet%';
SELECT sectest.check(problem = 'cannot read snowflake_node (SQLSTATE 08001; the message is shown to the server''s owner)',
                     'monitor sees only the SQLSTATE of fleet_down''s error: ' || problem)
  FROM snowflake_fleet_check() WHERE node = 'fleet_down';
SELECT sectest.refused($$SELECT * FROM snowflake_fleet_check(servers => ARRAY['mal_fleet']::name[])$$, '42501');

\c postgres postgres
SELECT sectest.check(NOT (SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'),
                     'mallory is not SUPERUSER after every fleet check');
ALTER ROLE mallory NOSUPERUSER;
