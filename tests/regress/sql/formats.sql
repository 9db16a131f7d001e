-- Decoding IDs minted elsewhere, explicit layouts, and JavaScript-safe text.
-- Every expected timestamp is a published creation time; sources are cited.
CREATE EXTENSION IF NOT EXISTS snowflake_id;
SET timezone = 'UTC';

-- Twitter: epoch 1288834974657 (twitter-archive/snowflake IdWorker.scala).
-- Tweet 1763287703813013644 is dated 2024-02-29 in
-- https://purring.fyi/log/snowflakes-and-timestamps/ .
SELECT ts, worker_id, worker_id >> 5 AS datacenter, worker_id & 31 AS machine, sequence
  FROM snowflake_decode(1763287703813013644, 'twitter');

-- Discord: https://discord.com/developers/docs/reference#snowflakes
-- 175928847299117063 = 2016-04-30 11:18:25.796 UTC, worker 1, process 0, increment 7.
SELECT ts, worker_id >> 5 AS worker, worker_id & 31 AS process, sequence AS increment
  FROM snowflake_decode(175928847299117063, 'discord');
-- docs.rs twilight-util Snowflake: 105484726235607040 = 2015-10-19T01:58:38.546Z.
SELECT ts FROM snowflake_decode(105484726235607040, 'Discord');

-- Instagram: Stack Overflow 63683015: 2384288897814875714 = 2020-08-26T13:43:27Z,
-- 2383568809444681765 = 2020-08-25T13:52:46Z (seconds published).
SELECT date_trunc('second', ts) AS ts, worker_id AS shard, sequence
  FROM snowflake_decode(2384288897814875714, 'instagram');
SELECT date_trunc('second', ts) AS ts
  FROM snowflake_decode(2383568809444681765, 'instagram');

-- pgEdge: pgEdge/snowflake docs/snowflake_functions.md: 136169504773242881 =
-- {"id": 1, "ts": "2024-01-11 13:08:59.845-05", "count": 0}.
SELECT ts, worker_id AS node, sequence AS count
  FROM snowflake_decode(136169504773242881, 'pgedge');

-- 'default' is this server's layout and agrees with the one-argument decoder.
SELECT (SELECT row(d.*) FROM snowflake_decode(4194324487, 'default') d)
     = (SELECT row(d.*) FROM snowflake_decode(4194324487) d) AS same;
-- ... for a fresh ID too, and the explicit form spelled with the layout
-- snowflake_stats() reports gives the server's own bounds.
WITH i AS (SELECT snowflake_nextval() AS id),
     l AS (SELECT epoch, timestamp_bits, worker_bits, sequence_bits FROM snowflake_stats())
SELECT (SELECT row(d.*) FROM snowflake_decode(i.id, 'default') d)
     = (SELECT row(d.*) FROM snowflake_decode(i.id) d) AS same_fresh,
       snowflake_min_id(snowflake_timestamp(i.id), l.epoch, l.timestamp_bits,
                        l.worker_bits, l.sequence_bits)
     = snowflake_min_id(snowflake_timestamp(i.id)) AS explicit_is_server_layout
  FROM i, l;

-- Explicit layouts (IMMUTABLE): Twitter spelled out.
SELECT * FROM snowflake_decode(1763287703813013644, to_timestamp(1288834974.657), 41, 10, 12);
-- A 64-bit layout reads a negative bigint as its unsigned bit pattern.
SELECT worker_id, sequence FROM snowflake_decode(-1, '2015-01-01+00', 42, 10, 12);

-- Range bounds for an explicit layout bracket the IDs of that millisecond.
SELECT snowflake_min_id('2024-01-01 00:00:01+00', '2024-01-01+00', 41, 10, 12) AS min_id,
       snowflake_max_id('2024-01-01 00:00:01+00', '2024-01-01+00', 41, 10, 12) AS max_id;
SELECT snowflake_min_id(ts, '2024-01-01+00', 41, 10, 12) <= 4194324487
   AND 4194324487 <= snowflake_max_id(ts, '2024-01-01+00', 41, 10, 12) AS brackets
  FROM snowflake_decode(4194324487) d;

-- Volatility: explicit layouts are IMMUTABLE, presets and the server layout STABLE.
SELECT p.oid::regprocedure AS function, p.provolatile, p.proparallel, p.proisstrict
  FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'snowflake_id'
 WHERE p.proname IN ('snowflake_decode', 'snowflake_min_id', 'snowflake_max_id',
                     'snowflake_to_text', 'snowflake_to_base32', 'snowflake_from_base32')
 ORDER BY p.oid::regprocedure::text;

-- JavaScript-safe output.
SELECT snowflake_to_text(9007199254740993) AS text_form,
       (9007199254740993)::float8::numeric AS what_a_json_number_keeps;
SELECT snowflake_to_base32(0) AS zero, snowflake_to_base32(1234567890123456789) AS id,
       snowflake_to_base32(9223372036854775807) AS max;
SELECT snowflake_from_base32('128GGYHYYK08N'), snowflake_from_base32('128g-gyhy-yk08n'),
       snowflake_from_base32('7ZZZZZZZZZZZZ'), snowflake_from_base32('oIl');
-- Round trip and order over the whole valid range: 0, every power of two and
-- its neighbours, and 20,000 pseudo-random IDs spread over 0 .. 2^63-1.
WITH ids AS (
  SELECT DISTINCT v FROM (
    SELECT 0::bigint AS v UNION ALL SELECT 9223372036854775807
    UNION ALL SELECT (2::numeric ^ b + o)::bigint
      FROM generate_series(0, 62) b, generate_series(-1, 1) o
     WHERE 2::numeric ^ b + o BETWEEN 0 AND 9223372036854775807
    UNION ALL SELECT ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint & 9223372036854775807
      FROM generate_series(1, 20000) i) s)
SELECT count(*) AS ids,
       count(*) FILTER (WHERE snowflake_from_base32(snowflake_to_base32(v)) <> v) AS mismatches,
       count(*) FILTER (WHERE length(snowflake_to_base32(v)) <> 13) AS wrong_length,
       (SELECT count(*) FROM (SELECT v, row_number() OVER (ORDER BY v) AS a,
                                     row_number() OVER (ORDER BY snowflake_to_base32(v) COLLATE "C") AS b
                                FROM ids) x WHERE a <> b) AS misordered
  FROM ids;

-- Errors, shown as "SQLSTATE: message".
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
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(1, 'snowflake')$q$);
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(1, '2024-01-01+00', 43, 10, 12)$q$);
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(1, '2024-01-01+00', 0, 10, 12)$q$);
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(1, '1969-12-31+00', 41, 10, 12)$q$);
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(-1, 'twitter')$q$);
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(1::bigint << 40, '2024-01-01+00', 20, 10, 10)$q$);
-- A worker or sequence field wider than 31 bits does not fit the integer
-- columns of snowflake_decode (0.3.0 returned a 41-bit worker field of all
-- ones as -1): refused. 31 bits decode; the bounds take any width.
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(((1::bigint << 41) - 1) << 12, '2024-01-01+00', 11, 41, 12)$q$);
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(1, '2024-01-01+00', 20, 12, 32)$q$);
SELECT worker_id, sequence FROM snowflake_decode((((1::bigint << 31) - 1) << 31) | 2147483647, '2024-01-01+00', 1, 31, 31);
SELECT snowflake_min_id('2024-01-01 00:00:00.001+00', '2024-01-01+00', 11, 41, 12) = 1::bigint << 53 AS wide_bounds;
SELECT pg_temp.err($q$SELECT snowflake_min_id('2023-12-31+00', '2024-01-01+00', 41, 10, 12)$q$);
SELECT pg_temp.err($q$SELECT snowflake_max_id('infinity', '2024-01-01+00', 41, 10, 12)$q$);
SELECT pg_temp.err($q$SELECT snowflake_to_base32(-5)$q$);
SELECT pg_temp.err($q$SELECT snowflake_from_base32('')$q$);
SELECT pg_temp.err($q$SELECT snowflake_from_base32('12U4')$q$);
SELECT pg_temp.err($q$SELECT snowflake_from_base32('00000000000000')$q$);
SELECT pg_temp.err($q$SELECT snowflake_from_base32('8000000000000')$q$);
SELECT pg_temp.err($q$SELECT snowflake_from_base32('ZZZZZZZZZZZZZ')$q$);
