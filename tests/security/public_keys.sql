-- The key of public IDs ($PGDATA/snowflake_id.public_keys, written by
-- run.sh; log_statement = 'all'): every role can make and read public
-- IDs, and no role but a superuser can read the key, by any route we
-- could think of. run.sh also checks that no log line holds it.
\set ON_ERROR_STOP 1
\c - mallory
SELECT sectest.check(snowflake_from_public(snowflake_to_public(42, 'orders'), 'orders') = 42,
                     'a plain role makes and reads public IDs');
-- The server's files: pg_read_file, COPY FROM a file or a program,
-- lo_import, pg_stat_file, pg_ls_dir.
SELECT sectest.refused($q$SELECT pg_read_file('snowflake_id.public_keys')$q$, '42501');
SELECT sectest.refused($q$SELECT pg_read_binary_file('snowflake_id.public_keys')$q$, '42501');
CREATE TEMP TABLE stolen (line text);
SELECT sectest.refused($q$COPY stolen FROM 'snowflake_id.public_keys'$q$, '42501');
SELECT sectest.refused($q$COPY stolen FROM PROGRAM 'cat snowflake_id.public_keys'$q$, '42501');
SELECT sectest.refused($q$SELECT lo_import('snowflake_id.public_keys')$q$, '42501');
SELECT sectest.refused($q$SELECT pg_stat_file('snowflake_id.public_keys')$q$, '42501');
SELECT sectest.refused($q$SELECT pg_ls_dir('.')$q$, '42501');
-- It is no setting: nothing in pg_settings, pg_file_settings, SHOW.
SELECT sectest.refused($q$SELECT current_setting('snowflake_id.public_keys')$q$, '42704');
SELECT sectest.check(count(*) = 0, 'pg_settings shows no key')
  FROM pg_settings WHERE name LIKE 'snowflake_id.%key%' OR setting ILIKE '%2b7e1516%';
SELECT sectest.refused($q$SELECT * FROM pg_file_settings$q$, '42501');
-- SHOW ALL lists no such setting.
CREATE TEMP TABLE shown AS SELECT * FROM pg_show_all_settings();
SELECT sectest.check(count(*) = 0, 'SHOW ALL lists no key')
  FROM shown WHERE name = 'snowflake_id.public_keys' OR setting LIKE '%2b7e1516%';
-- A plan shows the call, never the key.
CREATE TEMP TABLE plan (line text);
DO $$
DECLARE r record;
BEGIN
    FOR r IN EXECUTE $q$EXPLAIN (VERBOSE, ANALYZE, SETTINGS) SELECT snowflake_to_public(g, 'orders') FROM generate_series(1, 3) g$q$ LOOP
        INSERT INTO plan VALUES (r."QUERY PLAN");
    END LOOP;
END $$;
SELECT sectest.check(count(*) > 0 AND count(*) FILTER (WHERE line ILIKE '%2b7e1516%') = 0,
                     'EXPLAIN VERBOSE shows no key') FROM plan;
-- Error messages name the problem, never the key: a form made with an
-- unknown version.
SELECT sectest.check(msg NOT ILIKE '%2b7e1516%', 'an error message holds no key')
  FROM (SELECT sectest.refused($q$SELECT snowflake_from_public('3DQSYMPVFE544GX')$q$, '22P02') AS msg) m;
-- No session, role or database setting can point the server to another
-- key: there is none to set.
SELECT sectest.refused($q$SET snowflake_id.public_keys = '1:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f'$q$, '42602');
