-- On a server that does NOT preload snowflake_id (e.g. a reporting
-- server): CREATE EXTENSION works, the decoders work, and
-- snowflake_nextval() fails with SQLSTATE 55000 and a HINT to preload.
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
RESET client_min_messages;
SET TimeZone = 'UTC';
-- This server's postgresql.conf sets epoch 2020-01-01, 5 worker bits and
-- 16 sequence bits; the decoders use them. Without preload the layout
-- parameters are reloadable (sighup): PostgreSQL cannot create
-- postmaster-only parameters after start-up.
SELECT name, setting, context FROM pg_settings
 WHERE name LIKE 'snowflake\_id.%' ORDER BY name;
-- 2097348617 = 1000 << 21 | 3 << 16 | 9: one second after the epoch,
-- worker 3, sequence 9.
SELECT * FROM snowflake_decode(2097348617);
SELECT snowflake_compose('2020-01-01 00:00:01+00', 3, 9);
SELECT * FROM snowflake_decode(4194324487);
SELECT snowflake_timestamp(4194324487), snowflake_worker_id(4194324487),
       snowflake_sequence(4194324487);
SELECT snowflake_compose('2024-01-01 00:00:01+00', 31, 7),
       snowflake_min_id('2024-06-01+00'), snowflake_max_id('2024-06-01+00');
\set VERBOSITY default
SELECT snowflake_nextval();
\set VERBOSITY sqlstate
SELECT snowflake_nextval();
\set VERBOSITY default
-- The bulk form refuses the same way.
SELECT snowflake_nextval(3);
-- Without preload the worker id is still known, and unset here.
SHOW snowflake_id.worker_id;
CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval());
INSERT INTO t DEFAULT VALUES;
