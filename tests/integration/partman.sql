-- pg_partman 4.7 (Debian's postgresql-15-partman): daily partitions in ID
-- space. One day of IDs is 86,400,000 ms shifted past the worker and
-- sequence fields: 86400000 << 22 = 362387865600000. With the default
-- epoch at a UTC midnight, multiples of it are exactly UTC days.
CREATE SCHEMA partman;
CREATE EXTENSION pg_partman SCHEMA partman;

CREATE TABLE events (
    id      bigint NOT NULL DEFAULT snowflake_nextval(),
    payload text NOT NULL
) PARTITION BY RANGE (id);
CREATE INDEX ON events (id);

SELECT partman.create_parent(
    p_parent_table    => 'public.events',
    p_control         => 'id',
    p_type            => 'native',
    p_interval        => (86400000::bigint << 22)::text,   -- one day of IDs
    p_premake         => 2,                                -- two days ahead
    p_start_partition => snowflake_min_id(current_date - 3)::text);

-- Retention: drop partitions that end more than two days of IDs below the
-- largest ID in the table, at every run_maintenance().
UPDATE partman.part_config
   SET retention = (2 * (86400000::bigint << 22))::text,
       retention_keep_table = false
 WHERE parent_table = 'public.events';
