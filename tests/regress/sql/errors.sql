-- Every user mistake gets a specific SQLSTATE and a clear message; none is
-- XX000 and none crashes. Each error is shown as "SQLSTATE: message".
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id;
RESET client_min_messages;
SET TimeZone = 'UTC';
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE st text; msg text; det text; hin text;
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                            det = PG_EXCEPTION_DETAIL, hin = PG_EXCEPTION_HINT;
    RETURN st || ': ' || msg
        || CASE WHEN det <> '' THEN E'\n  DETAIL: ' || det ELSE '' END
        || CASE WHEN hin <> '' THEN E'\n  HINT: ' || hin ELSE '' END;
END $$;

-- Negative IDs.
SELECT pg_temp.err('SELECT * FROM snowflake_decode(-1)');
SELECT pg_temp.err('SELECT snowflake_timestamp(-9223372036854775808)');
SELECT pg_temp.err('SELECT snowflake_worker_id(-5)');
SELECT pg_temp.err('SELECT snowflake_sequence(-5)');
-- A negative number of IDs.
SELECT pg_temp.err('SELECT snowflake_nextval(-1)');
-- More IDs than one call returns (the limit of the former integer count).
SELECT pg_temp.err('SELECT snowflake_nextval(2147483648)');
SELECT pg_temp.err('SELECT snowflake_nextval(-9223372036854775808)');
-- compose with parts out of range.
SELECT pg_temp.err($q$SELECT snowflake_compose('2025-01-01+00', 1024, 0)$q$);
SELECT pg_temp.err($q$SELECT snowflake_compose('2025-01-01+00', -1, 0)$q$);
SELECT pg_temp.err($q$SELECT snowflake_compose('2025-01-01+00', 0, 4096)$q$);
SELECT pg_temp.err($q$SELECT snowflake_compose('2025-01-01+00', 0, -1)$q$);
SELECT pg_temp.err($q$SELECT snowflake_compose('2023-12-31 23:59:59.999+00', 0, 0)$q$);
SELECT pg_temp.err($q$SELECT snowflake_compose('2093-09-06 15:47:35.552+00', 0, 0)$q$);
SELECT pg_temp.err($q$SELECT snowflake_compose('infinity', 0, 0)$q$);
-- min_id / max_id outside the representable range.
SELECT pg_temp.err($q$SELECT snowflake_min_id('2023-12-31 23:59:59.999+00')$q$);
SELECT pg_temp.err($q$SELECT snowflake_max_id('2100-01-01+00')$q$);
SELECT pg_temp.err($q$SELECT snowflake_min_id('-infinity')$q$);
SELECT pg_temp.err($q$SELECT snowflake_min_id('infinity')$q$);
SELECT pg_temp.err($q$SELECT snowflake_max_id('infinity')$q$);
-- NULL in, NULL out (STRICT).
SELECT snowflake_timestamp(NULL) IS NULL AS strict_null,
       snowflake_compose(NULL, 1, 1) IS NULL AS compose_null,
       (SELECT count(*) FROM snowflake_decode(NULL)) AS decode_rows;

-- Settings cannot be changed per session, role or database.
SELECT pg_temp.err('SET snowflake_id.worker_id = 7');
SELECT pg_temp.err('SET snowflake_id.max_lead = 10');
SELECT pg_temp.err($q$SET snowflake_id.epoch = '2020-01-01'$q$);
SELECT pg_temp.err('SET snowflake_id.worker_bits = 12');
SELECT pg_temp.err('SET snowflake_id.sequence_bits = 10');
SELECT pg_temp.err('ALTER ROLE postgres SET snowflake_id.worker_id = 7');
SELECT pg_temp.err('ALTER DATABASE postgres SET snowflake_id.worker_id = 7');
SELECT pg_temp.err('SET snowflake_id.no_such_setting = 1');
-- ALTER SYSTEM validates values before writing them (it cannot run in a
-- function, so these run directly; :SQLSTATE shows the error code).
ALTER SYSTEM SET snowflake_id.worker_id = 1024;
\echo SQLSTATE :SQLSTATE
ALTER SYSTEM SET snowflake_id.worker_id = -2;
\echo SQLSTATE :SQLSTATE
ALTER SYSTEM SET snowflake_id.epoch = 'yesterday';
\echo SQLSTATE :SQLSTATE
ALTER SYSTEM SET snowflake_id.epoch = '1969-12-31';
\echo SQLSTATE :SQLSTATE
ALTER SYSTEM SET snowflake_id.worker_bits = 0;
\echo SQLSTATE :SQLSTATE
ALTER SYSTEM SET snowflake_id.sequence_bits = 28;
\echo SQLSTATE :SQLSTATE
ALTER SYSTEM SET snowflake_id.max_lead = -1;
\echo SQLSTATE :SQLSTATE
ALTER SYSTEM SET snowflake_id.max_lead = '2h';
\echo SQLSTATE :SQLSTATE
ALTER SYSTEM SET snowflake_id.bulk_lead_share = 0;
\echo SQLSTATE :SQLSTATE
-- The keys of public IDs: an absolute path, outside the data directory.
ALTER SYSTEM SET snowflake_id.public_keys_file = 'relative/keys';
\echo SQLSTATE :SQLSTATE
SELECT current_setting('data_directory') || '/keys' AS inside \gset
\set VERBOSITY sqlstate
ALTER SYSTEM SET snowflake_id.public_keys_file = :'inside';
\set VERBOSITY default
\echo SQLSTATE :SQLSTATE
-- Nothing was written.
SELECT count(*) AS auto_conf_settings FROM pg_file_settings
 WHERE name LIKE 'snowflake\_id.%' AND sourcefile LIKE '%postgresql.auto.conf';

-- Raising the floor (superuser): above an ID 100 ms ahead, every later ID
-- is above it; a negative ID is refused. snowflake_raise_floor_from_data()
-- reports each key column (read as its owner) and applies nothing unless
-- asked; a key beyond its 10-minute limit is reported, never applied.
SELECT snowflake_compose(now() + interval '100 ms', 42, 0) AS ahead \gset
SELECT snowflake_raise_floor(:ahead) = snowflake_timestamp(:ahead) AS floor_is_its_millisecond;
SELECT snowflake_nextval() > :ahead AS above_the_floor;
SELECT snowflake_raise_floor(-1);
\echo SQLSTATE :SQLSTATE
CREATE TABLE floor_keys (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), n int);
CREATE TABLE floor_unindexed (id bigint DEFAULT snowflake_nextval());
INSERT INTO floor_keys (n) VALUES (1), (2);
SELECT relation, column_name, owner = current_user AS owner_is_me,
       largest_id = (SELECT max(id) FROM floor_keys) AS largest_is_max, beyond_limit, error
  FROM snowflake_raise_floor_from_data() WHERE relation LIKE 'public.floor%';
INSERT INTO floor_keys VALUES (snowflake_compose(now() + interval '1 hour', 42, 0), 3);
SELECT relation, largest_id < (SELECT max(id) FROM floor_keys) AS below_the_far_key, beyond_limit
  FROM snowflake_raise_floor_from_data(apply => true) WHERE relation LIKE 'public.floor%';
SELECT snowflake_timestamp(snowflake_nextval()) < now() + interval '11 minutes' AS not_moved_by_the_far_key;
DROP TABLE floor_keys, floor_unindexed;
-- The high-water mark: published, and this database holds it.
SELECT snowflake_high_water() IS NOT NULL AS has_a_mark,
       snowflake_high_water() >= snowflake_timestamp(snowflake_nextval()) AS above_the_last_id;
SELECT count(*) > 0 AS this_database_holds_it FROM snowflake_id_internal.snowflake_high_water
 WHERE worker_id = 42 AND mark_ms >= (extract(epoch FROM snowflake_timestamp(snowflake_nextval())) * 1000)::bigint - 10000;
-- Only snowflake_id writes the marks (issue 55): a superuser's UPDATE,
-- DELETE or TRUNCATE is refused, also as a replica would apply it.
UPDATE snowflake_id_internal.snowflake_high_water SET mark_ms = 0 WHERE worker_id = 42;
DELETE FROM snowflake_id_internal.snowflake_high_water WHERE worker_id = 42;
TRUNCATE snowflake_id_internal.snowflake_high_water;
SET session_replication_role = replica;
DELETE FROM snowflake_id_internal.snowflake_high_water WHERE worker_id = 42;
RESET session_replication_role;
-- A row inserted by a transaction, or a savepoint, that rolls back stays,
-- as the in-place raises do (issue 55; before, a savepoint rolled back
-- took the row with it while the backend kept minting under it, and a
-- whole transaction's rollback left none until the next ID). The row is
-- removed first with the guard turned off, as only a superuser can; a
-- new session's first ID inserts it.
ALTER TABLE snowflake_id_internal.snowflake_high_water DISABLE TRIGGER written_by_snowflake_id;
DELETE FROM snowflake_id_internal.snowflake_high_water WHERE worker_id = 42;
ALTER TABLE snowflake_id_internal.snowflake_high_water ENABLE ALWAYS TRIGGER written_by_snowflake_id;
\c -
BEGIN;
SAVEPOINT first_id;
SELECT snowflake_nextval() > 0 AS minted_in_a_savepoint_that_rolls_back;
ROLLBACK TO SAVEPOINT first_id;
COMMIT;
SELECT count(*) = 1 AS the_row_outlives_the_savepoint,
       bool_and(mark_ms >= (extract(epoch FROM snowflake_timestamp(snowflake_lastval())) * 1000)::bigint)
           AS above_the_last_id
  FROM snowflake_id_internal.snowflake_high_water WHERE worker_id = 42;
ALTER TABLE snowflake_id_internal.snowflake_high_water DISABLE TRIGGER written_by_snowflake_id;
DELETE FROM snowflake_id_internal.snowflake_high_water WHERE worker_id = 42;
ALTER TABLE snowflake_id_internal.snowflake_high_water ENABLE ALWAYS TRIGGER written_by_snowflake_id;
\c -
BEGIN;
SELECT snowflake_nextval() > 0 AS minted_in_a_transaction_that_rolls_back;
ROLLBACK;
SELECT count(*) = 1 AS the_row_outlives_the_rollback
  FROM snowflake_id_internal.snowflake_high_water WHERE worker_id = 42;
SELECT snowflake_nextval() > 0 AS minted_after_the_rollback;
SELECT count(*) = 1 AS one_row,
       bool_and(mark_ms >= (extract(epoch FROM snowflake_timestamp(snowflake_lastval())) * 1000)::bigint)
           AS above_the_last_id
  FROM snowflake_id_internal.snowflake_high_water WHERE worker_id = 42;
