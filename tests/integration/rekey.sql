-- Re-key a legacy shard: serial keys -> collision-free snowflake IDs built
-- from each row's created_at, foreign keys kept consistent. This is the
-- recipe in the README ("Re-keying legacy rows"), run verbatim by
-- tests/integration/multinode.sh on two shards whose serial keys overlap.
--
-- :import_worker is a worker id reserved for this import: different for
-- every legacy shard, and never a live server's snowflake_id.worker_id.
\set ON_ERROR_STOP on
BEGIN;

-- 1. bigint keys with Snowflake defaults (their sequences kept, adopted);
--    FK columns widen too.
SELECT action, object, detail FROM snowflake_convert_column('legacy_users', 'id');
SELECT action, object, detail FROM snowflake_convert_column('legacy_orders', 'id');

-- 2. Old key -> new ID. Rows are numbered k = 1, 2, ... in (created_at, id)
--    order and packed as p = millisecond * 2^sequence_bits + sequence; the
--    new p is k + max(ms_j * 2^sequence_bits - j) over the rows j <= k. So
--    new IDs are strictly increasing, never earlier than the row's
--    created_at, and a millisecond with more rows than sequence numbers
--    carries into the next millisecond instead of into the worker bits.
CREATE TEMP TABLE user_keys ON COMMIT DROP AS
WITH per AS (SELECT snowflake_sequence(snowflake_max_id(now())) + 1 AS per_ms),
     ranked AS (
       SELECT id AS old_id, floor(extract(epoch FROM created_at) * 1000)::bigint AS ms,
              row_number() OVER (ORDER BY created_at, id) AS k
         FROM legacy_users),
     packed AS (
       SELECT old_id, k + max(ms * per_ms - k) OVER (ORDER BY k) AS p, per_ms FROM ranked, per)
SELECT old_id,
       snowflake_compose(timestamptz 'epoch' + (p / per_ms) * interval '1 ms',
                         :import_worker, (p % per_ms)::int) AS new_id
  FROM packed;

CREATE TEMP TABLE order_keys ON COMMIT DROP AS
WITH per AS (SELECT snowflake_sequence(snowflake_max_id(now())) + 1 AS per_ms),
     ranked AS (
       SELECT id AS old_id, floor(extract(epoch FROM created_at) * 1000)::bigint AS ms,
              row_number() OVER (ORDER BY created_at, id) AS k
         FROM legacy_orders),
     packed AS (
       SELECT old_id, k + max(ms * per_ms - k) OVER (ORDER BY k) AS p, per_ms FROM ranked, per)
SELECT old_id,
       snowflake_compose(timestamptz 'epoch' + (p / per_ms) * interval '1 ms',
                         :import_worker, (p % per_ms)::int) AS new_id
  FROM packed;

-- New IDs must not land on an old key while keys are swapped in place.
SELECT (SELECT min(new_id) FROM user_keys) > (SELECT max(old_id) FROM user_keys)
   AND (SELECT min(new_id) FROM order_keys) > (SELECT max(old_id) FROM order_keys) AS disjoint \gset
\if :disjoint
\else
  \echo 'new IDs overlap old keys: re-key into a new table instead'
  ROLLBACK;
  \quit
\endif

-- 3. Swap the keys with the foreign key dropped; adding it back re-checks
--    every row.
ALTER TABLE legacy_orders DROP CONSTRAINT legacy_orders_user_id_fkey;
UPDATE legacy_users u SET id = k.new_id FROM user_keys k WHERE u.id = k.old_id;
UPDATE legacy_orders o SET user_id = k.new_id FROM user_keys k WHERE o.user_id = k.old_id;
UPDATE legacy_orders o SET id = k.new_id FROM order_keys k WHERE o.id = k.old_id;
ALTER TABLE legacy_orders ADD CONSTRAINT legacy_orders_user_id_fkey
    FOREIGN KEY (user_id) REFERENCES legacy_users;
COMMIT;
