-- A preloaded server whose snowflake_id.worker_id was never set refuses to
-- mint IDs (a silent default of 0 on every node is how shards collide):
-- SQLSTATE 55000 with a HINT saying how to set it. Decoding still works.
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
RESET client_min_messages;
SHOW snowflake_id.worker_id;
SELECT snowflake_nextval();
\set VERBOSITY sqlstate
SELECT snowflake_nextval();
\set VERBOSITY default
-- The bulk form refuses the same way.
SELECT snowflake_nextval(3);
SELECT snowflake_worker_id(4194324487);
