-- Privileges: a non-superuser can mint and decode IDs and read the stats,
-- but cannot change any snowflake_id.* setting (SET, ALTER ROLE ... SET,
-- ALTER DATABASE ... SET, ALTER SYSTEM) and cannot run the administrative
-- function, whose EXECUTE is revoked from PUBLIC by the install script.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id;
DROP ROLE IF EXISTS snowflake_app;
CREATE ROLE snowflake_app LOGIN;
GRANT CREATE ON SCHEMA public TO snowflake_app;
RESET client_min_messages;
SELECT count(*) AS public_can_execute_admin
  FROM pg_proc, aclexplode(proacl) a
 WHERE proname IN ('snowflake_accept_configuration', 'snowflake_raise_floor', 'snowflake_raise_floor_from_data',
                   'snowflake_write_high_water', 'snowflake_high_water_restored')
   AND a.grantee = 0;
SET ROLE snowflake_app;
SELECT snowflake_worker_id(snowflake_nextval()) AS worker;
SELECT worker_id, state FROM snowflake_stats();
SET snowflake_id.worker_id = 7;
SET snowflake_id.max_lead = 10;
SET snowflake_id.bulk_lead_share = 100;
SET snowflake_id.epoch = '2020-01-01';
ALTER ROLE snowflake_app SET snowflake_id.worker_id = 7;
ALTER DATABASE postgres SET snowflake_id.worker_id = 7;
ALTER SYSTEM SET snowflake_id.worker_id = 7;
SELECT snowflake_accept_configuration();
-- Raising the floor could use up the ID space: superusers only.
SELECT snowflake_raise_floor(snowflake_compose(now() + interval '1000 years', 0, 0));
SELECT * FROM snowflake_raise_floor_from_data();
-- The high-water mark: no plain role can read, write or even name its
-- table (a role that can name a table can queue a lock on it: CREATE RULE
-- locks before it checks ownership), nor own anything on it; nor read
-- the mark through snowflake_high_water() (issue 55: it showed it to
-- every role that could connect), unless she may read the stats.
SELECT snowflake_high_water() IS NOT NULL AS sees_the_mark;
RESET ROLE;
GRANT pg_read_all_stats TO snowflake_app;
SET ROLE snowflake_app;
SELECT snowflake_high_water() IS NOT NULL AS pg_read_all_stats_sees_the_mark;
RESET ROLE;
REVOKE pg_read_all_stats FROM snowflake_app;
SET ROLE snowflake_app;
SELECT count(*) FROM snowflake_id_internal.snowflake_high_water;
INSERT INTO snowflake_id_internal.snowflake_high_water (worker_id, epoch_ms, worker_bits, sequence_bits, mark_ms)
VALUES (42, 1704067200000, 10, 12, 9000000000000);
UPDATE snowflake_id_internal.snowflake_high_water SET mark_ms = mark_ms + 86400000;
DELETE FROM snowflake_id_internal.snowflake_high_water;
TRUNCATE snowflake_id_internal.snowflake_high_water;
BEGIN;
LOCK TABLE snowflake_id_internal.snowflake_high_water IN SHARE MODE;
ROLLBACK;
BEGIN;
CREATE RULE r AS ON INSERT TO snowflake_id_internal.snowflake_high_water DO INSTEAD NOTHING;
ROLLBACK;
CREATE INDEX ON snowflake_id_internal.snowflake_high_water (mark_ms);
CREATE TRIGGER t BEFORE INSERT ON snowflake_id_internal.snowflake_high_water FOR EACH ROW EXECUTE FUNCTION snowflake_high_water_restored();
CREATE POLICY p ON snowflake_id_internal.snowflake_high_water USING (true);
COMMENT ON TABLE snowflake_id_internal.snowflake_high_water IS 'mine';
SELECT snowflake_write_high_water();
-- Nor can she hang the mark's trigger function on a table of hers.
CREATE TABLE mine (worker_id integer, epoch_ms bigint, worker_bits integer, sequence_bits integer, mark_ms bigint);
CREATE TRIGGER t AFTER INSERT ON mine FOR EACH ROW EXECUTE FUNCTION snowflake_high_water_restored();
DROP TABLE mine;
RESET ROLE;
-- Nothing changed.
SHOW snowflake_id.worker_id;
SELECT count(*) AS role_or_db_settings FROM pg_db_role_setting
 WHERE array_to_string(setconfig, ',') LIKE '%snowflake_id%';
DROP OWNED BY snowflake_app;
DROP ROLE snowflake_app;
