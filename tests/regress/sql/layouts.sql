-- Every Snowflake-family layout: time units, field orders, the presets
-- added in 0.7.0, composition and range bounds for foreign layouts.
-- Each example ID was made by the real library (cited) or is worked
-- through from the project's published layout in the comment.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id;
RESET client_min_messages;
SET timezone = 'UTC';

-- Sonyflake (Go sony/sonyflake; PyPI sonyflake-py 1.3.0 made this ID on
-- 2026-11-24 with machine_id 0x2a7b, and its decompose() gave time
-- 38596237155 ticks of 10 ms since 2014-09-01, sequence 1, machine 10875).
SELECT ts, worker_id AS machine, sequence FROM snowflake_decode(647537407536736891, 'sonyflake');
-- ... spelled out: 39 bits of 10 ms, then 8 of sequence, then 16 of machine.
SELECT * FROM snowflake_decode(647537407536736891, '2014-09-01+00', 39, 16, 8, '10 ms', 'time,sequence,worker');

-- Baidu uid-generator (DefaultUidGenerator: the sign bit, 28 bits of
-- seconds since 1463673600 = 2016-05-20 00:00 +08:00, 22 of worker, 13 of
-- sequence). 2023-11-14 12:00:00 +08:00 is 236260800 s after the epoch;
-- worker 1234, sequence 56: (236260800 << 35) | (1234 << 13) | 56.
SELECT (236260800::bigint << 35) | (1234 << 13) | 56 AS baidu_id;
SELECT * FROM snowflake_decode(8117859274624483384, 'baidu');

-- Mastodon (lib/mastodon/snowflake.rb: Unix ms << 16, then 16 bits of a
-- hash-seeded sequence). 2022-11-15 12:34:56.789 UTC with sequence 0xbeef.
SELECT (1668515696789::bigint << 16) | 48879 AS mastodon_id;
SELECT * FROM snowflake_decode(109347844704812783, 'mastodon');
-- worker_bits = 0 is allowed: the same layout spelled out.
SELECT * FROM snowflake_decode(109347844704812783, '1970-01-01+00', 48, 0, 16);

-- Seata IdWorker (the sign bit, 10 bits of worker, then 41 bits of ms
-- since 1588435200000 = 2020-05-03 00:00 +08:00, then 12 of sequence).
-- Worker 7 at 2024-01-01 00:00 UTC (115632000000 ms), sequence 5.
SELECT (7::bigint << 53) | (115632000000::bigint << 12) | 5 AS seata_id;
SELECT * FROM snowflake_decode(63524023455186949, 'seata');
SELECT snowflake_compose('2024-01-01+00', 7, 5, 'seata') AS seata_composed;

-- npm sonyflake 1.1.2 (milliseconds, Sonyflake's field order: its
-- generateCustomId is ((ts - epoch) << 24) | (sequence << 16) | machineId).
-- With the Discord epoch at 2026-11-24 03:46:11.55 UTC, sequence 3,
-- machine 0x2a7b: (375421571550 << 24) | (3 << 16) | 10875.
SELECT * FROM snowflake_decode(6298528796954012283, '2015-01-01+00', 39, 16, 8, '1 ms', 'time,sequence,worker');

-- Twitter status IDs from before Snowflake (status 20, 2006) carry no
-- timestamp: refused, where 0.6.0 returned the epoch. An explicit layout
-- has no such range.
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
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(20, 'twitter')$q$);
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(29700859247, 'twitter')$q$);
SELECT ts FROM snowflake_decode(29700859248, 'twitter');
SELECT ts FROM snowflake_decode(20, to_timestamp(1288834974.657), 41, 10, 12);

-- Every preset, spelled out as a description, decodes alike.
CREATE TEMP TABLE presets (name text, epoch timestamptz, t int, w int, s int, unit interval, field_order text);
INSERT INTO presets VALUES
    ('twitter',   to_timestamp(1288834974.657), 41, 10, 12, '1 ms',  'time,worker,sequence'),
    ('discord',   '2015-01-01+00',              42, 10, 12, '1 ms',  'time,worker,sequence'),
    ('instagram', to_timestamp(1314220021.721), 41, 13, 10, '1 ms',  'time,worker,sequence'),
    ('pgedge',    '2023-01-01+00',              41, 10, 12, '1 ms',  'time,sequence,worker'),
    ('sonyflake', '2014-09-01+00',              39, 16,  8, '10 ms', 'time,sequence,worker'),
    ('baidu',     '2016-05-20+08',              28, 22, 13, '1 s',   'time,worker,sequence'),
    ('mastodon',  '1970-01-01+00',              48,  0, 16, '1 ms',  'time,worker,sequence'),
    ('seata',     '2020-05-03+08',              41, 10, 12, '1 ms',  'worker,time,sequence');
-- Round trips at the boundaries of each: the first and the last tick,
-- all-ones and zero fields, and a time inside a tick a third of the way
-- through the range (ts is the start of the tick). Twitter's first tick lies below its first snowflake ID, so
-- its round trips start a day in.
WITH cases AS (
    SELECT p.*, c.at, c.worker, c.seq,
           p.epoch + p.unit * floor(extract(epoch FROM c.at - p.epoch) * 1000
                                    / (extract(epoch FROM p.unit) * 1000)) AS tick_start
      FROM presets p,
      LATERAL (VALUES
          (p.epoch + CASE WHEN p.name = 'twitter' THEN interval '1 day' ELSE interval '0' END, 0, 0),
          (p.epoch + p.unit * ((2::numeric ^ p.t) - 1) + p.unit - interval '1 ms',
           (2 ^ p.w)::int - 1, (2 ^ p.s)::int - 1),
          (p.epoch + p.unit * floor((2::numeric ^ p.t - 1) / 3) + least(p.unit - interval '1 ms', interval '7 ms'),
           (2 ^ p.w)::int / 3, 1)) c(at, worker, seq)
     WHERE c.at < '9999-01-01'),
composed AS (
    SELECT c.*, snowflake_compose(c.at, c.worker, c.seq, c.name) AS by_name,
           snowflake_compose(c.at, c.worker, c.seq, c.epoch, c.t, c.w, c.s, c.unit, c.field_order) AS described
      FROM cases c)
SELECT c.name, count(*) AS cases,
       count(*) FILTER (WHERE c.by_name <> c.described) AS forms_differ,
       count(*) FILTER (WHERE (d.ts, d.worker_id, d.sequence) IS DISTINCT FROM (c.tick_start, c.worker, c.seq)) AS bad_round_trips,
       count(*) FILTER (WHERE (d.ts, d.worker_id, d.sequence) IS DISTINCT FROM (e.ts, e.worker_id, e.sequence)) AS decoders_differ,
       count(*) FILTER (WHERE c.by_name < 0) AS above_2_63
  FROM composed c,
       LATERAL snowflake_decode(c.by_name, c.name) d,
       LATERAL snowflake_decode(c.by_name, c.epoch, c.t, c.w, c.s, c.unit, c.field_order) e
 GROUP BY c.name ORDER BY c.name;

-- Range bounds for presets and descriptions: every ID composed in a tick
-- lies between the tick's bounds, and none of the next tick does.
SELECT p.name,
       bool_and(snowflake_compose(at, 0, 0, p.name) = snowflake_min_id(at, p.name)) AS min_is_first,
       bool_and(snowflake_min_id(at, p.name) = snowflake_min_id(at, p.epoch, p.t, p.w, p.s, p.unit, p.field_order)
            AND snowflake_max_id(at, p.name) = snowflake_max_id(at, p.epoch, p.t, p.w, p.s, p.unit, p.field_order)) AS forms_agree,
       bool_and(snowflake_max_id(at, p.name) < snowflake_min_id(at + p.unit, p.name)) AS ticks_disjoint,
       bool_and(snowflake_compose(at, (2 ^ p.w)::int - 1, (2 ^ p.s)::int - 1, p.name) = snowflake_max_id(at, p.name)) AS max_is_last
  FROM presets p, generate_series(timestamptz '2024-01-01+00', '2024-01-01 00:00:05+00', '1.25 s') at
 WHERE p.name <> 'seata'
 GROUP BY p.name ORDER BY p.name;
-- Seata's IDs do not sort by time: no bounds.
SELECT pg_temp.err($q$SELECT snowflake_min_id('2024-01-01+00', 'seata')$q$);
SELECT pg_temp.err($q$SELECT snowflake_max_id('2024-01-01+00', '2020-05-03+08', 41, 10, 12, '1 ms', 'worker,time,sequence')$q$);
-- 'default' is this server's layout in every form.
SELECT snowflake_min_id('2026-01-01+00', 'default') = snowflake_min_id('2026-01-01+00') AS min_default,
       snowflake_max_id('2026-01-01+00', 'default') = snowflake_max_id('2026-01-01+00') AS max_default,
       snowflake_compose('2026-01-01+00', 42, 7, 'default') = snowflake_compose('2026-01-01+00', 42, 7) AS compose_default;

-- A merged table of foreign IDs gets primary-key range scans.
CREATE TEMP TABLE discord_messages (id bigint PRIMARY KEY);
INSERT INTO discord_messages
SELECT snowflake_compose(timestamptz '2026-11-21 09:00+00' + i * interval '1 s', i % 1024, i % 4096, 'discord')
  FROM generate_series(0, 10799) i;
CREATE TEMP TABLE sonyflake_rows (id bigint PRIMARY KEY);
INSERT INTO sonyflake_rows
SELECT snowflake_compose(timestamptz '2026-11-21 09:00+00' + i * interval '1 s', i % 65536, i % 256, 'sonyflake')
  FROM generate_series(0, 10799) i;
ANALYZE discord_messages, sonyflake_rows;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF)
SELECT count(*) FROM discord_messages
 WHERE id BETWEEN snowflake_min_id('2026-11-21 10:00+00', 'discord')
              AND snowflake_max_id('2026-11-21 10:59:59.999+00', 'discord');
EXPLAIN (COSTS OFF)
SELECT count(*) FROM sonyflake_rows
 WHERE id BETWEEN snowflake_min_id('2026-11-21 10:00+00', '2014-09-01+00', 39, 16, 8, '10 ms', 'time,sequence,worker')
              AND snowflake_max_id('2026-11-21 10:59:59.999+00', '2014-09-01+00', 39, 16, 8, '10 ms', 'time,sequence,worker');
RESET enable_seqscan;
SELECT (SELECT count(*) FROM discord_messages
         WHERE id BETWEEN snowflake_min_id('2026-11-21 10:00+00', 'discord')
                      AND snowflake_max_id('2026-11-21 10:59:59.999+00', 'discord')) AS discord_by_bounds,
       (SELECT count(*) FROM discord_messages, snowflake_decode(id, 'discord') d
         WHERE d.ts >= '2026-11-21 10:00+00' AND d.ts < '2026-11-21 11:00+00') AS discord_by_decode,
       (SELECT count(*) FROM sonyflake_rows
         WHERE id BETWEEN snowflake_min_id('2026-11-21 10:00+00', 'sonyflake')
                      AND snowflake_max_id('2026-11-21 10:59:59.999+00', 'sonyflake')) AS sonyflake_by_bounds,
       (SELECT count(*) FROM sonyflake_rows, snowflake_decode(id, 'sonyflake') d
         WHERE d.ts >= '2026-11-21 10:00+00' AND d.ts < '2026-11-21 11:00+00') AS sonyflake_by_decode;

-- Time units: any whole number of milliseconds from 1 ms to 1 day.
SELECT unit, (SELECT ts FROM snowflake_decode((12345::bigint << 22) | 5, '2024-01-01+00', 41, 10, 12, unit, 'time,worker,sequence')) AS ts
  FROM (VALUES (interval '1 ms'), ('10 ms'), ('1 s'), ('1 minute'), ('1 day')) u(unit);
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(1, '2024-01-01+00', 41, 10, 12, '1 month', 'time,worker,sequence')$q$);
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(1, '2024-01-01+00', 41, 10, 12, '0.5 ms', 'time,worker,sequence')$q$);
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(1, '2024-01-01+00', 41, 10, 12, '0', 'time,worker,sequence')$q$);
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(1, '2024-01-01+00', 41, 10, 12, '-10 ms', 'time,worker,sequence')$q$);
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(1, '2024-01-01+00', 41, 10, 12, '1 day 1 ms', 'time,worker,sequence')$q$);
-- Field orders: the three fields, high to low, in one of three orders.
SELECT field_order, (SELECT row(d.*) FROM snowflake_decode(snowflake_compose('2024-01-01 00:00:01+00', 3, 9, '2024-01-01+00', 41, 10, 12, '1 ms', field_order),
                                                         '2024-01-01+00', 41, 10, 12, '1 ms', field_order) d) AS round_trip,
       snowflake_compose('2024-01-01 00:00:01+00', 3, 9, '2024-01-01+00', 41, 10, 12, '1 ms', field_order) AS id
  FROM (VALUES ('time,worker,sequence'), ('time|sequence|worker'), (' Worker Time Sequence ')) o(field_order);
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(1, '2024-01-01+00', 41, 10, 12, '1 ms', 'sequence,time,worker')$q$);
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(1, '2024-01-01+00', 41, 10, 12, '1 ms', 'time,worker')$q$);
-- Fields that do not fit in 64 bits, and worker or sequence fields wider
-- than 31 bits (the integer columns of snowflake_decode).
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(1, '2024-01-01+00', 43, 10, 12, '10 ms', 'time,sequence,worker')$q$);
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(1, '2024-01-01+00', 20, 32, 12, '1 s', 'worker,time,sequence')$q$);
SELECT pg_temp.err($q$SELECT * FROM snowflake_decode(1, '2024-01-01+00', 20, 12, 32, '1 s', 'time,worker,sequence')$q$);
-- Composition checks the fields against the layout.
SELECT pg_temp.err($q$SELECT snowflake_compose('2024-01-01+00', 65536, 0, 'sonyflake')$q$);
SELECT pg_temp.err($q$SELECT snowflake_compose('2024-01-01+00', 0, 256, 'sonyflake')$q$);
SELECT pg_temp.err($q$SELECT snowflake_compose('2014-08-31+00', 0, 0, 'sonyflake')$q$);
SELECT pg_temp.err($q$SELECT snowflake_compose('2024-01-01+00', 0, 0, 'snowflake')$q$);
-- A 64-bit layout composes IDs above 2^63 - 1 as negative bigints, which
-- decode back.
SELECT id, (SELECT row(d.*) FROM snowflake_decode(id, 'discord') d) AS decoded
  FROM snowflake_compose('2154-01-01+00', 1023, 4095, 'discord') id;
