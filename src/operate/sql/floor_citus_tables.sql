-- The tables Citus distributes (distributed, reference and Citus-managed
-- local tables), run by src/operate/floor.rs only where the citus extension is
-- installed. The floor check leaves them out: a query on one is a
-- distributed query, which cannot run inside the statement that called
-- snowflake_nextval() (the first INSERT into such a table is one), and
-- their keys are in shards, most of them on other nodes. Citus hides the
-- shards on each node from catalog queries too (citus.override_table_visibility),
-- so on Citus the automatic check covers plain local tables; see
-- docs/sharding.md for the coordinator's keys.
SELECT logicalrelid::pg_catalog.oid FROM pg_catalog.pg_dist_partition
