-- The user-visible surface of snowflake_id on a preloaded server with
-- snowflake_id.worker_id = 42 and the default layout (41/10/12, epoch
-- 2024-01-01 00:00:00+00). Pins: nextval as a DEFAULT, decoding of known
-- IDs, compose as the inverse of decode, min/max bounds, and that a time
-- range through the bounds is a primary-key index range scan.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id;
RESET client_min_messages;
SET TimeZone = 'UTC';

-- A primary key with snowflake_nextval() as its DEFAULT.
CREATE TABLE orders (
    id   bigint PRIMARY KEY DEFAULT snowflake_nextval(),
    n    int NOT NULL
);
INSERT INTO orders (n) SELECT g FROM generate_series(1, 10000) g;
INSERT INTO orders (n) VALUES (10001), (10002);
SELECT count(*) AS rows,
       count(DISTINCT id) AS distinct_ids,
       bool_and(snowflake_worker_id(id) = 42) AS all_worker_42,
       bool_and(id > 0) AS all_positive
  FROM orders;
-- Insertion order is ID order.
SELECT bool_and(id > prev) AS strictly_increasing
  FROM (SELECT id, lag(id) OVER (ORDER BY n) AS prev FROM orders) s
 WHERE prev IS NOT NULL;
-- IDs carry the time they were minted.
SELECT bool_and(snowflake_timestamp(id) BETWEEN now() - interval '1 minute'
                                            AND clock_timestamp() + interval '2 seconds') AS recent
  FROM orders;

-- Decoding known IDs.
SELECT * FROM snowflake_decode(0);
SELECT * FROM snowflake_decode(4194324487);
SELECT * FROM snowflake_decode(9223372036854775807);
SELECT snowflake_timestamp(4194324487), snowflake_worker_id(4194324487),
       snowflake_sequence(4194324487);

-- compose is the inverse of decode.
SELECT snowflake_compose('2024-01-01 00:00:01+00', 5, 7);
SELECT snowflake_compose('2025-03-04 05:06:07.089+00', 1023, 4095);
SELECT * FROM snowflake_decode(snowflake_compose('2025-03-04 05:06:07.089+00', 1023, 4095));
-- Sub-millisecond precision is truncated, not rounded.
SELECT snowflake_compose('2025-03-04 05:06:07.0899+00', 1, 1)
     = snowflake_compose('2025-03-04 05:06:07.089+00', 1, 1) AS truncated;
SELECT bool_and(snowflake_compose(d.ts, d.worker_id, d.sequence) = o.id) AS round_trip
  FROM orders o, snowflake_decode(o.id) d;

-- Range bounds: min and max of one millisecond, adjacent milliseconds touch.
SELECT snowflake_min_id('2024-06-01 00:00:00+00') AS min_id,
       snowflake_max_id('2024-06-01 00:00:00+00') AS max_id,
       snowflake_min_id('2024-06-01 00:00:00.001+00')
         - snowflake_max_id('2024-06-01 00:00:00+00') AS gap;
SELECT snowflake_max_id('2093-09-06 15:47:35.551+00') AS last_representable;
SELECT count(*) = 10002 AS all_in_range
  FROM orders
 WHERE id BETWEEN snowflake_min_id(now() - interval '1 hour')
              AND snowflake_max_id(clock_timestamp() + interval '1 hour');

-- A time range through the bounds is a primary-key index range scan.
ANALYZE orders;
EXPLAIN (COSTS OFF)
SELECT * FROM orders
 WHERE id BETWEEN snowflake_min_id('2024-06-01 00:00+00')
              AND snowflake_max_id('2024-06-01 01:00+00');

-- Bulk generation: snowflake_nextval(count) returns count increasing IDs
-- of this worker, after every ID issued before and before every later one.
CREATE TEMP TABLE bulk AS
SELECT id, n FROM ROWS FROM (snowflake_nextval(50000)) WITH ORDINALITY AS t(id, n);
SELECT count(*) AS ids, count(DISTINCT id) AS distinct_ids,
       bool_and(snowflake_worker_id(id) = 42) AS all_worker_42,
       min(id) > (SELECT max(id) FROM orders) AS after_earlier_ids
  FROM bulk;
SELECT bool_and(id > prev) AS increasing
  FROM (SELECT id, lag(id) OVER (ORDER BY n) AS prev FROM bulk) x WHERE prev IS NOT NULL;
SELECT snowflake_nextval() > (SELECT max(id) FROM bulk) AS later_ids_above;
-- Keys for a bulk load, and the empty and NULL requests.
INSERT INTO orders (id, n)
SELECT id, -n FROM ROWS FROM (snowflake_nextval(1000)) WITH ORDINALITY AS t(id, n);
SELECT count(*) AS bulk_rows FROM orders WHERE n < 0;
SELECT count(*) AS zero FROM snowflake_nextval(0);
SELECT count(*) AS null_count FROM snowflake_nextval(NULL);
-- count is a bigint (drivers such as sqlx, diesel and tokio-postgres bind
-- an i64); integer arguments, literals and untyped parameters still work.
SELECT count(*) AS bigint_count FROM snowflake_nextval(3::bigint);
SELECT count(*) AS integer_count FROM snowflake_nextval(3::integer);
SELECT count(*) AS literal_count FROM snowflake_nextval('3');
PREPARE bulk_untyped AS SELECT count(*) FROM snowflake_nextval($1);
EXECUTE bulk_untyped(4);
PREPARE bulk_int8(bigint) AS SELECT count(*) FROM snowflake_nextval($1);
EXECUTE bulk_int8(5);
SELECT pg_get_function_identity_arguments(p.oid) AS nextval_forms
  FROM pg_proc p WHERE p.proname = 'snowflake_nextval' ORDER BY 1;

-- snowflake_lastval(): the last ID this session's snowflake_nextval()
-- returned, with lastval()'s semantics. A new session has none (55000).
\c -
SELECT snowflake_lastval();
INSERT INTO orders (n) VALUES (-1000000) RETURNING id AS inserted \gset
SELECT snowflake_lastval() = :inserted AS after_insert;
SELECT max(id) AS bulk_last FROM snowflake_nextval(5000) id \gset
SELECT snowflake_lastval() = :bulk_last AS after_bulk;
-- Not transactional: a rolled-back insert's ID was issued, as lastval()
-- keeps a rolled-back nextval().
CREATE TEMP SEQUENCE lastval_seq;
BEGIN;
INSERT INTO orders (n) VALUES (-1000001) RETURNING id AS rolled_back \gset
SELECT nextval('lastval_seq') AS seq_rolled_back \gset
ROLLBACK;
SELECT snowflake_lastval() = :rolled_back AS after_rollback,
       lastval() = :seq_rolled_back AS lastval_agrees;
SELECT snowflake_lastval() < snowflake_nextval() AS earlier_than_next;
-- Most of 100,000 calls in one statement take the C entry point's own
-- path (issue 48), the rest pgrx's guarded wrapper: every ID unique and
-- above the one before, the worker id in each, and lastval the last.
SELECT count(*) = count(DISTINCT id) AS unique_ids,
       bool_and(id > prev) AS increasing,
       bool_and(snowflake_worker_id(id) = current_setting('snowflake_id.worker_id')::int) AS worker_id_in_each,
       max(id) = snowflake_lastval() AS lastval_is_the_last
  FROM (SELECT id, lag(id) OVER (ORDER BY n) AS prev
          FROM (SELECT n, snowflake_nextval() AS id FROM generate_series(1, 100000) n) s) t;

-- snowflake_stats() reports this server's generator: its worker id, a
-- last ID at least the one just issued, a reservation that covers it.
SELECT snowflake_nextval() AS just_issued \gset
SELECT worker_id, last_id >= :just_issued AS has_last_id,
       reserved_until >= last_id_time AS reservation_covers_it, state
  FROM snowflake_stats();

-- Volatility, parallel safety and strictness. Decoders of the server
-- layout are STABLE (they read restart-only settings), explicit-layout
-- decoders and text forms IMMUTABLE, the generator VOLATILE, DDL and
-- administration VOLATILE PARALLEL UNSAFE. (STRICT on the argument-less
-- functions is pgrx's default and has no effect.)
SELECT proname, provolatile, proparallel, proisstrict, pg_get_function_result(oid) AS result
  FROM pg_proc WHERE proname LIKE 'snowflake\_%' ORDER BY proname, pronargs;
