-- Time partitioning in ID space: PARTITION BY RANGE (id) with daily bounds
-- from snowflake_min_id. Partitions are named by their day relative to
-- today (m2 = two days ago, p0 = today), so the plans below read the same
-- on any day.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id;
RESET client_min_messages;
SET TimeZone = 'UTC';

-- What a plan prunes: the partitions it scans (whatever the scan type) and
-- the subplans it removes at run time.
CREATE FUNCTION pg_temp.plan(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    FOR r IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
        IF r."QUERY PLAN" ~ 'Subplans Removed' THEN
            RETURN NEXT trim(r."QUERY PLAN");
        ELSIF r."QUERY PLAN" ~ 'Scan on events_' AND r."QUERY PLAN" !~ 'Index Scan on events_\w+_pkey$' THEN
            RETURN NEXT 'scans ' || substring(r."QUERY PLAN" from 'on (events_\w+)');
        END IF;
    END LOOP;
END $$;

CREATE TABLE events (
    id      bigint NOT NULL DEFAULT snowflake_nextval(),
    payload text NOT NULL,
    PRIMARY KEY (id)
) PARTITION BY RANGE (id);
-- One partition per day, from three days ago to tomorrow.
DO $$
DECLARE d int; day date;
BEGIN
    FOR d IN -3..1 LOOP
        day := current_date + d;
        EXECUTE format('CREATE TABLE events_%s PARTITION OF events FOR VALUES FROM (%s) TO (%s)',
                       CASE WHEN d < 0 THEN 'm' || -d ELSE 'p' || d END,
                       snowflake_min_id(day::timestamptz), snowflake_min_id((day + 1)::timestamptz));
    END LOOP;
END $$;
-- Old rows keyed for their own time, and new ones from the default.
INSERT INTO events
SELECT snowflake_compose(current_date - d + interval '1 hour' * h, 7, h), 'day -' || d
  FROM generate_series(1, 3) d, generate_series(0, 23) h;
INSERT INTO events (payload) SELECT 'now' FROM generate_series(1, 10);
SELECT tableoid::regclass AS partition, count(*) FROM events GROUP BY 1 ORDER BY 1;

-- Plan-time pruning: constant bounds through the IMMUTABLE explicit-layout
-- form (the server's own layout spelled out) keep only yesterday.
SELECT (current_date - 1)::timestamptz AS y0, current_date::timestamptz AS y1 \gset
SELECT * FROM pg_temp.plan(format(
    'SELECT count(*) FROM events WHERE id >= snowflake_min_id(%L, ''2024-01-01+00'', 41, 10, 12)
                                   AND id <  snowflake_min_id(%L, ''2024-01-01+00'', 41, 10, 12)',
    :'y0', :'y1'));
SELECT count(*) AS yesterday FROM events
 WHERE id >= snowflake_min_id(current_date - 1) AND id < snowflake_min_id(current_date::timestamptz);

-- Run-time pruning: now()-relative bounds through the STABLE server-layout
-- form are evaluated when the scan starts, and the older partitions are
-- removed then ("Subplans Removed").
SELECT * FROM pg_temp.plan('SELECT count(*) FROM events WHERE id >= snowflake_min_id(now() - interval ''1 day'')');
-- The same in a prepared statement, generic plan: pruned at execution.
SET plan_cache_mode = force_generic_plan;
PREPARE since(timestamptz) AS SELECT count(*) FROM events WHERE id >= snowflake_min_id($1);
SELECT * FROM pg_temp.plan(format('EXECUTE since(%L)', :'y1'));
DEALLOCATE since;
RESET plan_cache_mode;

-- Retention: drop the oldest day.
ALTER TABLE events DETACH PARTITION events_m3;
DROP TABLE events_m3;
SELECT tableoid::regclass AS partition, count(*) FROM events GROUP BY 1 ORDER BY 1;
-- Nothing older than two days is left, and new IDs keep landing today.
SELECT min(snowflake_timestamp(id)) >= current_date - 2 AS retained,
       (SELECT tableoid::regclass FROM events WHERE id = (SELECT max(id) FROM events)) AS newest
  FROM events;
DROP TABLE events;
