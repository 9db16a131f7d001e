-- The worker-id registry's SQL surface (src/lease/sql/registry.sql): what
-- the lease workers of the servers call, driven here by hand with made-up
-- tokens. The layout is the default one (10 worker bits, 12 sequence
-- bits, epoch 2024-01-01 = 1704067200000 ms). Times are compared, never
-- printed.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id;
RESET client_min_messages;
\set VERBOSITY terse
-- Not initialized yet: 55000.
SELECT * FROM snowflake_registry_claim('00000000-0000-4000-8000-000000000001', 'h', 1, 's', '/d', -1, 10, 12, 1704067200000, 600000, 0);
\echo :LAST_ERROR_SQLSTATE
-- Bad arguments: 22023.
SELECT snowflake_registry_init(worker_bits => 17);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_registry_init(worker_bits => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_registry_init(max_ahead => '0'::interval);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_registry_init(worker_bits => 2);
\echo :LAST_ERROR_SQLSTATE
-- Idempotent with the same layout (and a new max_ahead: one hour, for
-- the 10-minute TTLs below); 55000 with another.
SELECT snowflake_registry_init(worker_bits => 2, max_ahead => '1 hour');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_registry_init(worker_bits => 3);
\echo :LAST_ERROR_SQLSTATE
SELECT worker_id, state FROM snowflake_registry_holders ORDER BY 1;

-- A layout that is not the registry's: 22023.
SELECT * FROM snowflake_registry_claim('00000000-0000-4000-8000-000000000001', 'h', 1, 's', '/d', -1, 10, 12, 1704067200000, 600000, 0);
\echo :LAST_ERROR_SQLSTATE
-- A TTL out of range, a server far ahead of the registry's clock: 22023.
SELECT * FROM snowflake_registry_claim('00000000-0000-4000-8000-000000000001', 'h', 1, 's', '/d', -1, 2, 12, 1704067200000, 999, 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_registry_claim('00000000-0000-4000-8000-000000000001', 'h', 1, 's', '/d', -1, 2, 12, 1704067200000, 3000,
    (extract(epoch FROM now() + interval '2 hours') * 1000)::bigint);
\echo :LAST_ERROR_SQLSTATE

-- Server A claims: the oldest free id (0), epoch 1, floor 0 (never
-- held); its reservation runs a TTL beyond its frontier.
CREATE TEMP TABLE f AS SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms;
SELECT worker_id, lease_epoch, floor_ms, reserved_until_ms = (SELECT ms FROM f) + 600000 AS one_ttl_ahead
  FROM snowflake_registry_claim('00000000-0000-4000-8000-00000000000a', 'ha', 5432, 'sa', '/a', -1, 2, 12, 1704067200000, 600000, (SELECT ms FROM f));
-- B prefers id 2 and gets it; C, without a preference, gets 1.
SELECT worker_id, lease_epoch FROM snowflake_registry_claim('00000000-0000-4000-8000-00000000000b', 'hb', 5432, 'sb', '/b', 2, 2, 12, 1704067200000, 600000, (SELECT ms FROM f));
SELECT worker_id, lease_epoch FROM snowflake_registry_claim('00000000-0000-4000-8000-00000000000c', 'hc', 5432, 'sc', '/c', -1, 2, 12, 1704067200000, 600000, (SELECT ms FROM f));
-- A claims again with the same token (its lease worker restarted): the
-- row it holds, not another.
SELECT worker_id, lease_epoch FROM snowflake_registry_claim('00000000-0000-4000-8000-00000000000a', 'ha', 5432, 'sa', '/a', -1, 2, 12, 1704067200000, 600000, (SELECT ms FROM f));
SELECT worker_id, state, holder_host, lease_epoch FROM snowflake_registry_holders ORDER BY 1;

-- Renewal is a compare-and-set on (token, epoch): the right pair renews
-- and raises the reservation; a stale epoch or another token gets no row.
SELECT reserved_until_ms = (SELECT ms FROM f) + 10000 + 600000 AS raised
  FROM snowflake_registry_renew(0, '00000000-0000-4000-8000-00000000000a', 2, 600000, (SELECT ms FROM f) + 10000);
SELECT count(*) AS stale_epoch FROM snowflake_registry_renew(0, '00000000-0000-4000-8000-00000000000a', 1, 600000, 0);
SELECT count(*) AS other_token FROM snowflake_registry_renew(0, '00000000-0000-4000-8000-00000000000b', 2, 600000, 0);
-- A frontier below the reservation never lowers it.
SELECT reserved_until_ms = (SELECT ms FROM f) + 610000 AS kept
  FROM snowflake_registry_renew(0, '00000000-0000-4000-8000-00000000000a', 2, 600000, 0);

-- D finds id 3 free; E finds every id held: no row (the server says 55000).
SELECT worker_id FROM snowflake_registry_claim('00000000-0000-4000-8000-00000000000d', 'hd', 5432, 'sd', '/d', -1, 2, 12, 1704067200000, 600000, (SELECT ms FROM f));
SELECT count(*) AS exhausted FROM snowflake_registry_claim('00000000-0000-4000-8000-00000000000e', 'he', 5432, 'se', '/e', -1, 2, 12, 1704067200000, 600000, (SELECT ms FROM f));

-- A releases id 0 (a clean shutdown): its reservation stays, and E, whose
-- clock is far behind, gets id 0 with that reservation as its floor.
SELECT snowflake_registry_release(0, '00000000-0000-4000-8000-00000000000a', 2);
SELECT snowflake_registry_release(0, '00000000-0000-4000-8000-00000000000a', 2) AS again_is_harmless;
SELECT snowflake_registry_release(1, '00000000-0000-4000-8000-00000000000a', 2) AS not_its_row;
SELECT worker_id, lease_epoch, floor_ms = (SELECT ms FROM f) + 610000 AS floor_is_old_reservation,
       reserved_until_ms = (SELECT ms FROM f) + 610000 + 600000 AS above_it
  FROM snowflake_registry_claim('00000000-0000-4000-8000-00000000000e', 'he', 5432, 'se', '/e', -1, 2, 12, 1704067200000, 600000, 0);
-- A's old lease is gone: its renewal fails.
SELECT count(*) AS lost FROM snowflake_registry_renew(0, '00000000-0000-4000-8000-00000000000a', 2, 600000, 0);

-- A restarted A (new token, same host, port, system identifier and data
-- directory) gets its previous id back once it expired, before older ones.
SELECT snowflake_registry_release(0, '00000000-0000-4000-8000-00000000000e', 3);
SELECT snowflake_registry_release(3, '00000000-0000-4000-8000-00000000000d', 1);
SELECT worker_id FROM snowflake_registry_claim('00000000-0000-4000-8000-0000000000a2', 'he', 5432, 'se', '/e', -1, 2, 12, 1704067200000, 600000, 0);

-- Retiring an id stops its holder at its next renewal and keeps it out
-- of the pool; put back, it is "ending" (nobody may claim it) until the
-- old holder's lease has run out, and its old holder has no claim on it.
SELECT snowflake_registry_retire(2);
SELECT count(*) AS retired_renewal FROM snowflake_registry_renew(2, '00000000-0000-4000-8000-00000000000b', 1, 600000, 0);
SELECT snowflake_registry_retire(2, false);
SELECT count(*) AS renewal_after_put_back FROM snowflake_registry_renew(2, '00000000-0000-4000-8000-00000000000b', 1, 600000, 0);
SELECT snowflake_registry_retire(9);
\echo :LAST_ERROR_SQLSTATE
SELECT worker_id, state FROM snowflake_registry_holders ORDER BY 1;

-- Who may call what: members get EXECUTE from the administrator; the
-- rest of the world gets nothing, and nobody but the owner reads the table.
CREATE ROLE regress_registry_member;
CREATE ROLE regress_registry_stranger;
GRANT EXECUTE ON FUNCTION snowflake_registry_claim(uuid, text, integer, text, text, integer, integer, integer, bigint, integer, bigint),
                          snowflake_registry_renew(integer, uuid, bigint, integer, bigint),
                          snowflake_registry_release(integer, uuid, bigint)
   TO regress_registry_member;
SET ROLE regress_registry_stranger;
SELECT count(*) FROM snowflake_registry_renew(0, '00000000-0000-4000-8000-00000000000e', 3, 600000, 0);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM snowflake_registry_holders;
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_registry_init(worker_bits => 2);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE regress_registry_member;
SELECT count(*) FROM snowflake_id_internal.snowflake_registry;
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_registry_retire(3);
\echo :LAST_ERROR_SQLSTATE
-- A member's reservation is bounded by the registry's clock + max_ahead.
SELECT count(*) AS too_far FROM snowflake_registry_renew(1, '00000000-0000-4000-8000-00000000000c', 1, 600000, 9000000000000);
RESET ROLE;
SELECT reserved_until_ms < (extract(epoch FROM now() + interval '1 hour 1 minute') * 1000)::bigint AS bounded
  FROM snowflake_id_internal.snowflake_registry WHERE worker_id = 1;
REVOKE ALL ON FUNCTION snowflake_registry_claim(uuid, text, integer, text, text, integer, integer, integer, bigint, integer, bigint),
                       snowflake_registry_renew(integer, uuid, bigint, integer, bigint),
                       snowflake_registry_release(integer, uuid, bigint)
   FROM regress_registry_member;
DROP ROLE regress_registry_member;
DROP ROLE regress_registry_stranger;

-- Issue 47. In a registry of its own (3 worker bits, the default
-- max_ahead of one minute): a login role holds one live lease, even for
-- the same holder with a new token (its postmaster died and came back:
-- its old lease counts until it runs out), or what a superuser allows;
-- a claim's frontier is bounded;
-- leases expire by the registry's monotonic clock, not its wall clock.
\set orig_db :DBNAME
CREATE DATABASE regress_registry_limits;
\c regress_registry_limits
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
RESET client_min_messages;
SELECT snowflake_registry_init(worker_bits => 3);
SELECT max_ahead_ms FROM snowflake_id_internal.snowflake_registry_config;
CREATE ROLE regress_greedy;
GRANT EXECUTE ON FUNCTION snowflake_registry_claim(uuid, text, integer, text, text, integer, integer, integer, bigint, integer, bigint)
   TO regress_greedy;
SET SESSION AUTHORIZATION regress_greedy;
SELECT worker_id FROM snowflake_registry_claim('00000000-0000-4000-8000-000000000101', 'g', 1, 's', '/g1', -1, 3, 12, 1704067200000, 600000, 0);
-- A second holder: 53400.
SELECT worker_id FROM snowflake_registry_claim('00000000-0000-4000-8000-000000000102', 'g', 1, 's', '/g2', -1, 3, 12, 1704067200000, 600000, 0);
\echo :LAST_ERROR_SQLSTATE
-- The same holder with a new token: refused too.
SELECT worker_id FROM snowflake_registry_claim('00000000-0000-4000-8000-000000000103', 'g', 1, 's', '/g1', -1, 3, 12, 1704067200000, 600000, 0);
\echo :LAST_ERROR_SQLSTATE
-- The same token again (a crash restart of the same postmaster): its own row.
SELECT worker_id FROM snowflake_registry_claim('00000000-0000-4000-8000-000000000101', 'g', 1, 's', '/g1', -1, 3, 12, 1704067200000, 600000, 0);
-- A frontier two minutes ahead of the registry's clock: 22023.
SELECT worker_id FROM snowflake_registry_claim('00000000-0000-4000-8000-000000000105', 'g', 1, 's', '/g1', -1, 3, 12, 1704067200000, 600000,
    (extract(epoch FROM clock_timestamp() + interval '2 minutes') * 1000)::bigint);
\echo :LAST_ERROR_SQLSTATE
-- A holder description too long to store (a member filling the
-- registry's WAL with her claims): 22001.
SELECT worker_id FROM snowflake_registry_claim('00000000-0000-4000-8000-000000000101', repeat('h', 1025), 1, 's', '/g1', -1, 3, 12, 1704067200000, 600000, 0);
\echo :LAST_ERROR_SQLSTATE
-- Only a superuser sets a role's limit.
SELECT snowflake_registry_role_limit('regress_greedy', 100);
\echo :LAST_ERROR_SQLSTATE
RESET SESSION AUTHORIZATION;
SELECT snowflake_registry_role_limit('regress_greedy', 3);
SELECT snowflake_registry_role_limit('regress_greedy', -1);
\echo :LAST_ERROR_SQLSTATE
SET SESSION AUTHORIZATION regress_greedy;
SELECT worker_id FROM snowflake_registry_claim('00000000-0000-4000-8000-000000000106', 'g', 1, 's', '/g6', -1, 3, 12, 1704067200000, 600000, 0);
SELECT worker_id FROM snowflake_registry_claim('00000000-0000-4000-8000-000000000107', 'g', 1, 's', '/g7', -1, 3, 12, 1704067200000, 600000, 0);
SELECT worker_id FROM snowflake_registry_claim('00000000-0000-4000-8000-000000000104', 'g', 1, 's', '/g4', -1, 3, 12, 1704067200000, 600000, 0);
\echo :LAST_ERROR_SQLSTATE
RESET SESSION AUTHORIZATION;
SELECT holder_role, count(*) FROM snowflake_registry_holders WHERE state = 'held' GROUP BY 1;
-- Every reservation within the registry's clock plus max_ahead.
SELECT max(reserved_until_ms) <= (extract(epoch FROM clock_timestamp()) * 1000)::bigint + 60000 AS bounded
  FROM snowflake_id_internal.snowflake_registry;
-- A lease whose wall-clock expiry is a day ago is still live: the
-- registry's monotonic clock says so.
UPDATE snowflake_id_internal.snowflake_registry SET lease_expires = now() - interval '1 day' WHERE worker_id = 0;
SELECT worker_id, state FROM snowflake_registry_holders WHERE worker_id = 0;
-- A lease timed by another clock (a failover of the registry) is live,
-- and a claim records when this clock first saw it: it runs a full TTL
-- from then, with no lock taken on its row.
UPDATE snowflake_id_internal.snowflake_registry SET lease_clock = 'another-host', lease_clock_ns = 0 WHERE worker_id = 0;
SELECT worker_id, state FROM snowflake_registry_holders WHERE worker_id = 0;
SELECT worker_id <> 0 AS not_the_adopted_one
  FROM snowflake_registry_claim('00000000-0000-4000-8000-000000000108', 'su', 1, 's', '/su', 0, 3, 12, 1704067200000, 600000, 0);
SELECT seen_clock = snowflake_id_internal.snowflake_registry_boot() AS seen_here,
       snowflake_id_internal.snowflake_registry_ns() - seen_ns < 60000000000 AS from_now
  FROM snowflake_id_internal.snowflake_registry_adopted WHERE worker_id = 0;
SELECT worker_id, state FROM snowflake_registry_holders WHERE worker_id = 0;
-- Seen once: a later claim adds no row.
SELECT worker_id <> 0 AS not_it_either FROM snowflake_registry_claim('00000000-0000-4000-8000-000000000109', 'su', 1, 's', '/su9', 0, 3, 12, 1704067200000, 600000, 0);
SELECT count(*) AS still_one FROM snowflake_id_internal.snowflake_registry_adopted WHERE worker_id = 0;
-- Released: free at once (by the monotonic clock too).
SELECT snowflake_registry_release(0, '00000000-0000-4000-8000-000000000101', 2);
SELECT worker_id, state FROM snowflake_registry_holders WHERE worker_id = 0;
-- A released lease is not renewed: only a live one is (its holder
-- claims anew), so that no renewal locks a row that is free to claim.
SELECT count(*) AS renewed FROM snowflake_registry_renew(0, '00000000-0000-4000-8000-000000000101', 2, 600000, 0);
-- Only in READ COMMITTED: an older snapshot would count none of a role's
-- newer leases (issue 56's second review).
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT worker_id FROM snowflake_registry_claim('00000000-0000-4000-8000-00000000010a', 'rr', 1, 's', '/rr', -1, 3, 12, 1704067200000, 600000, 0);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
\c :orig_db
DROP DATABASE regress_registry_limits;
DROP ROLE regress_greedy;
