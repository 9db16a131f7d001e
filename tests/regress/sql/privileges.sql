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
 WHERE proname IN ('snowflake_accept_configuration', 'snowflake_raise_floor', 'snowflake_raise_floor_from_data')
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
RESET ROLE;
-- Nothing changed.
SHOW snowflake_id.worker_id;
SELECT count(*) AS role_or_db_settings FROM pg_db_role_setting
 WHERE array_to_string(setconfig, ',') LIKE '%snowflake_id%';
DROP OWNED BY snowflake_app;
DROP ROLE snowflake_app;
