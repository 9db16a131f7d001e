-- snowflake_fleet_check() and the snowflake_node view on one server
-- (worker_id 42, no Citus): one row for this server, no problem; servers
-- that cannot be read are reported, not skipped. The multi-server cases
-- (duplicate worker ids, clocks apart, other layouts, Citus nodes) run on
-- real clusters: tests/integration/multinode.sh and citus.sh.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id;
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
RESET client_min_messages;
SET TimeZone = 'UTC';

SELECT worker_id, epoch, timestamp_bits, worker_bits, sequence_bits, state,
       system_identifier <> 0 AS has_system_identifier,
       started_at <= now() AS started_before_now,
       abs(extract(epoch FROM server_clock - clock_timestamp())) < 5 AS clock_is_now
  FROM snowflake_node;

-- This server alone: no problem.
SELECT node, source, worker_id, epoch, timestamp_bits, worker_bits, sequence_bits,
       clock_offset_ms, state, problem
  FROM snowflake_fleet_check();
-- Twice in one transaction (its scratch table is dropped at commit).
BEGIN;
SELECT count(*) AS nodes FROM snowflake_fleet_check();
SELECT count(*) AS nodes FROM snowflake_fleet_check();
COMMIT;

-- A foreign server that cannot be reached, and a name that is not a
-- postgres_fdw server: both reported as problems.
CREATE SERVER fleet_down FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host '127.0.0.1', port '1', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER fleet_down OPTIONS (user 'postgres');
SELECT node, source, worker_id, problem ~ '^cannot read snowflake_node: could not connect' AS unreachable
  FROM snowflake_fleet_check() WHERE node <> 'local';
SELECT node, problem FROM snowflake_fleet_check(servers => ARRAY['no_such_server']::name[])
 WHERE node <> 'local';
-- Only the named servers are read.
SELECT count(*) AS nodes FROM snowflake_fleet_check(servers => ARRAY[]::name[]);
DROP SERVER fleet_down CASCADE;

-- A negative skew is an error.
\set VERBOSITY sqlstate
SELECT * FROM snowflake_fleet_check(interval '-1 second');
\set VERBOSITY default
