-- The server-wide high-water mark, one copy in every database that has
-- the extension: see src/mint/high_water.rs. A WAL-logged table, so that
-- crash recovery, base backups, PITR, standbys and every pg_upgrade mode
-- carry it, and a configuration table of the extension, so that pg_dump
-- of any one database carries it too. One row per configuration (worker
-- id and layout) that minted on a server that wrote into this database;
-- a server reads only the rows of its own configuration. A restore can
-- add a second row for a configuration: readers take the largest.
-- Only a superuser may write it (the extension's owner). It lives in a
-- schema of its own that no role but the database's owner may use (its
-- owner's pg_dump reads it): a role that can name a table can queue an
-- ACCESS EXCLUSIVE lock on it (CREATE RULE locks before it checks
-- ownership), which would hold up the writers; no role can name this one.
-- No index: nothing a plain role writes or owns runs when it is read.
-- A schema of that name that is not the extension's own (a database's
-- owner, or any role with CREATE on the database, may create one first)
-- can neither block the install or upgrade (CREATE SCHEMA would fail)
-- nor receive the extension's objects: it is renamed out of the way,
-- under a name nobody can guess and so take first, and the WARNING names
-- it. Renaming runs none of its owner's code (issue 46, item 7;
-- tests/security/squat_schema.sql).
DO $squat$
DECLARE
    squat record;
    moved text;
BEGIN
    SELECT n.oid, pg_catalog.pg_get_userbyid(n.nspowner) AS owner INTO squat
      FROM pg_catalog.pg_namespace n
     WHERE n.nspname OPERATOR(pg_catalog.=) 'snowflake_id_internal';
    IF FOUND THEN
        LOOP
            moved := pg_catalog.concat('snowflake_id_internal_moved_',
                         pg_catalog.substr(pg_catalog.md5(pg_catalog.concat(pg_catalog.random(), pg_catalog.clock_timestamp())), 1, 12));
            EXIT WHEN NOT EXISTS (SELECT FROM pg_catalog.pg_namespace n
                                   WHERE n.nspname OPERATOR(pg_catalog.=) moved);
        END LOOP;
        EXECUTE pg_catalog.format('ALTER SCHEMA snowflake_id_internal RENAME TO %I', moved);
        RAISE WARNING 'renamed the schema "snowflake_id_internal" of role "%" to "%"', squat.owner, moved
              USING DETAIL = 'The schema was not the extension''s own; snowflake_id creates its own under that name.',
                    HINT = 'Review the objects in it and drop the schema if nobody needs them.';
    END IF;
END
$squat$;
CREATE SCHEMA snowflake_id_internal;
REVOKE ALL ON SCHEMA snowflake_id_internal FROM PUBLIC;
GRANT USAGE ON SCHEMA snowflake_id_internal TO pg_database_owner;
COMMENT ON SCHEMA snowflake_id_internal IS
'snowflake_id''s own objects: the high-water mark';
CREATE TABLE snowflake_id_internal.snowflake_high_water (
    worker_id     integer NOT NULL,
    epoch_ms      bigint NOT NULL,
    worker_bits   integer NOT NULL,
    sequence_bits integer NOT NULL,
    mark_ms       bigint NOT NULL,
    written_at    timestamptz NOT NULL DEFAULT pg_catalog.now()
);
-- Logical replication of FOR ALL TABLES publications must be able to
-- send the writer's UPDATEs (a subscriber keeps the publisher's rows
-- apart: they carry the publisher's worker id).
ALTER TABLE snowflake_id_internal.snowflake_high_water REPLICA IDENTITY FULL;
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_internal.snowflake_high_water', '');
REVOKE ALL ON snowflake_id_internal.snowflake_high_water FROM PUBLIC;
GRANT SELECT ON snowflake_id_internal.snowflake_high_water TO pg_database_owner;
COMMENT ON TABLE snowflake_id_internal.snowflake_high_water IS
'snowflake_id''s high-water mark: no ID of a server with this configuration is later than mark_ms (Unix ms)';
-- A mark of this server's configuration written by anyone but its own
-- writers (a restore of a dump, a superuser by hand) raises the generator
-- at once, before the next round reads it: the C trigger function
-- snowflake_high_water_restored() (src/mint/high_water.rs), bound by OID here.
REVOKE ALL ON FUNCTION snowflake_high_water_restored() FROM PUBLIC;
CREATE TRIGGER raise_generator AFTER INSERT OR UPDATE ON snowflake_id_internal.snowflake_high_water
    FOR EACH ROW EXECUTE FUNCTION @extschema@.snowflake_high_water_restored();
-- Only snowflake_id writes the marks (issue 55): an UPDATE, DELETE or
-- TRUNCATE is refused, by any role, whatever session_replication_role
-- says. A mark held back as far ahead of the clock is applied with
-- snowflake_accept_configuration() or discarded with
-- snowflake_discard_high_water().
REVOKE ALL ON FUNCTION snowflake_high_water_guard() FROM PUBLIC;
REVOKE ALL ON FUNCTION snowflake_discard_high_water() FROM PUBLIC;
CREATE TRIGGER written_by_snowflake_id BEFORE UPDATE OR DELETE ON snowflake_id_internal.snowflake_high_water
    FOR EACH ROW EXECUTE FUNCTION @extschema@.snowflake_high_water_guard();
CREATE TRIGGER truncated_by_nobody BEFORE TRUNCATE ON snowflake_id_internal.snowflake_high_water
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowflake_high_water_guard();
ALTER TABLE snowflake_id_internal.snowflake_high_water ENABLE ALWAYS TRIGGER written_by_snowflake_id;
ALTER TABLE snowflake_id_internal.snowflake_high_water ENABLE ALWAYS TRIGGER truncated_by_nobody;
-- This database carries the mark from now on, not only from the next
-- round of the high-water-mark launcher.
REVOKE ALL ON FUNCTION snowflake_write_high_water() FROM PUBLIC;
SELECT snowflake_write_high_water();
