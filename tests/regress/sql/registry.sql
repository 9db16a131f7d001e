-- The worker-id registry's SQL surface (src/mint/sql/registry.sql): what
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
-- Idempotent with the same layout; 55000 with another.
SELECT snowflake_registry_init(worker_bits => 2);
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
-- of the pool; put back, it can be claimed again.
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
