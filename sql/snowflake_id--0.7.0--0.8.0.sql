\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.8.0'" to load this file. \quit
/* snowflake_id 0.7.0 -> 0.8.0: security fixes.
 * - The high-water mark lives in the databases: the table
 *   snowflake_high_water (src/mint/sql/high_water.sql), written by the
 *   library's high-water launcher in every database that has the
 *   extension; snowflake_high_water() shows the server's mark and
 *   snowflake_write_high_water() (superuser only) writes it now. No
 *   snowflake_nextval() reads user tables any more.
 * - snowflake_nextval() points at its own C entry point,
 *   snowflake_nextval_entry, which takes the common case before pgrx's
 *   call machinery (issue 48); replaced in place, so defaults and grants
 *   stay.
 * - snowflake_raise_floor_from_data(apply boolean DEFAULT false): reads
 *   each table as its owner and reports owner and error; applies nothing
 *   unless asked.
 * - F1 (issue 39): the online conversion adds and validates its new
 *   constraints, and sets NOT NULL in the swap, as the table's owner in a
 *   security-restricted operation (snowflake_convert_as_owner), never as
 *   the caller; a referencing table whose owner may not reference the
 *   converted table is refused (42501). Replaces
 *   snowflake_convert_online_step_body().
 * - F2 (issue 39): CALL snowflake_convert_online(), which commits and so
 *   cannot pin search_path, qualifies every type, function and operator
 *   (OPERATOR(pg_catalog.>)) and types every constant exactly: an operator
 *   of exactly (real, integer) in any schema of the caller's search_path
 *   no longer runs as the caller. snowflake_convert_new_name() pins
 *   search_path.
 * - F3 (issue 39): the policy owner_only on snowflake_convert_progress and
 *   the view snowflake_convert_status name pg_catalog's operators and
 *   cast exactly: recreated here, they no longer use an operator that a
 *   role with CREATE in the extension's schema placed there before the
 *   install or this upgrade.
 * - The online conversion's first step, when a lock was not granted in
 *   time, left its progress rows behind, and the retry back-filled
 *   columns that had been rolled back; it now forgets them and prepares
 *   again (in snowflake_convert_online_step_body()).
 * - snowflake_fleet_check() reads only postgres_fdw servers owned by a
 *   superuser (or, for a caller who is not one, by a role whose privileges
 *   it has); a named server that fails this is refused (42501). Only a
 *   server's owner sees a remote error's message. snowflake_node is
 *   readable by pg_monitor, so a monitoring role runs the check (issue 39,
 *   F4). The view is replaced by an identical one.
 * - The extension's schema (issue 39): a database owner owns "public"
 *   (PostgreSQL 15+), could rename it and create her own functions under
 *   the names the bodies call through @extschema@, to run as a superuser
 *   who runs them. snowflake_js_safe() and snowflake_to_jsonb() call
 *   nothing by that name any more; snowflake_convert_column(),
 *   snowflake_convert_online_step() and snowflake_convert_online_abandon()
 *   are BEGIN ATOMIC (bound by OID); every PL/pgSQL body that calls
 *   through @extschema@ (the conversions) refuses (42501) when the schema
 *   was renamed, or when a role whose rights the caller exceeds can
 *   create in it.
 * - No SQL, in the library (restart): snowflake_id.bulk_lead_share caps one
 *   snowflake_nextval(count) call's share of max_lead (F7);
 *   snowflake_id.public_keys_file keeps the keys of public IDs outside the
 *   data directory (F8).
 * - Worker ids leased from a registry (issue 41): the registry's tables
 *   (snowflake_id_internal.snowflake_registry and _config, empty until
 *   snowflake_registry_init()), its functions snowflake_registry_init,
 *   _claim, _renew, _release and _retire, and the view
 *   snowflake_registry_holders (src/mint/sql/registry.sql).
 *   snowflake_stats() gains the columns worker_id_source, lease_worker_id,
 *   lease_expires, lease_reserved_until, registry_errors,
 *   registry_last_error and old_version_databases: it is dropped and
 *   created again, with the view
 *   snowflake_node that reads it (a view of yours that reads either
 *   stops the upgrade with 2BP01, naming it: drop it first, and create it
 *   again after).
 * - Adopted sequences (issue 57, src/adopt/sql/adopt.sql):
 *   snowflake_adopt_sequence(regclass) (superuser only), the
 *   configuration table snowflake_id_internal.snowflake_adopted, the
 *   functions the library's planner hook puts in place of nextval(),
 *   currval(), setval() and lastval() in a database with adopted
 *   sequences, and the event trigger snowflake_adopt_forget_dropped.
 * The functions after the generated-from line are generated from the
 * files under src/sql; statements written by hand come before it.
 * Restart to run the 0.8.0 library first, then run ALTER EXTENSION
 * snowflake_id UPDATE in every database that has the extension: until
 * then a database without the table carries no mark.
 */
-- F3: the policy and the view of src/convert/sql/convert_online_progress.sql,
-- rebound (the view keeps its grants and comment).
ALTER POLICY owner_only ON snowflake_convert_progress
    USING (pg_catalog.pg_has_role(current_user,
               (SELECT c.relowner FROM pg_catalog.pg_class c
                 WHERE c.oid OPERATOR(pg_catalog.=) tbl::pg_catalog.oid),
               'USAGE'::pg_catalog.text));
CREATE OR REPLACE VIEW snowflake_convert_status WITH (security_invoker = true) AS
SELECT p.tbl AS "table", p.col AS "column", p.rel AS relation, p.rel_col AS relation_column,
       p.phase, p.pages_done, p.pages_total,
       pg_catalog.round((100.0::pg_catalog.numeric OPERATOR(pg_catalog.*) p.pages_done::pg_catalog.numeric)
                        OPERATOR(pg_catalog./) greatest(p.pages_total, 1::pg_catalog.int8)::pg_catalog.numeric,
                        1::pg_catalog.int4) AS percent_done,
       p.rows_done, p.batches, p.started_at, p.updated_at
  FROM snowflake_convert_progress p;
CREATE FUNCTION snowflake_high_water() RETURNS timestamp with time zone
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_high_water_wrapper';

CREATE FUNCTION snowflake_write_high_water() RETURNS timestamp with time zone
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_write_high_water_wrapper';

CREATE FUNCTION snowflake_high_water_restored() RETURNS trigger
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_high_water_restored_wrapper';

CREATE FUNCTION snowflake_high_water_guard() RETURNS trigger
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_high_water_guard_wrapper';

CREATE FUNCTION snowflake_discard_high_water() RETURNS timestamp with time zone
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_discard_high_water_wrapper';

DROP FUNCTION snowflake_raise_floor_from_data();
CREATE FUNCTION snowflake_raise_floor_from_data(
	"apply" bool DEFAULT false
) RETURNS TABLE (
	"relation" TEXT,
	"column_name" TEXT,
	"owner" TEXT,
	"largest_id" bigint,
	"beyond_limit" bool,
	"error" TEXT
)
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_raise_floor_from_data_wrapper';
REVOKE ALL ON FUNCTION snowflake_raise_floor_from_data(boolean) FROM PUBLIC;

-- Issue 57: the conversion keeps and adopts its column's sequence
-- (src/adopt/mod.rs).
CREATE FUNCTION snowflake_convert_adopt_sequence(seq regclass) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_convert_adopt_sequence_wrapper';

-- snowflake_nextval()'s C entry point takes the common case before pgrx's
-- call machinery (issue 48; src/mint/nextval.rs). Replaced in place: the
-- defaults that call it, and its grants, stay.
CREATE OR REPLACE FUNCTION snowflake_nextval() RETURNS bigint
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_nextval_entry';

-- snowflake_stats() with the lease's columns; snowflake_node, which reads
-- it, is created again below (src/operate/sql/fleet_check.sql).
DROP VIEW snowflake_node;
DROP FUNCTION snowflake_stats();
CREATE FUNCTION snowflake_stats() RETURNS TABLE (
	"worker_id" INT,
	"epoch" timestamp with time zone,
	"timestamp_bits" INT,
	"worker_bits" INT,
	"sequence_bits" INT,
	"max_lead_ms" INT,
	"last_id" bigint,
	"last_id_time" timestamp with time zone,
	"lead_ms" double precision,
	"reserved_until" timestamp with time zone,
	"sequence_overflows" bigint,
	"clock_steps_back" bigint,
	"largest_step_back_ms" double precision,
	"backpressure_waits" bigint,
	"reservation_waits" bigint,
	"reservations_written" bigint,
	"state" TEXT,
	"worker_id_source" TEXT,
	"lease_worker_id" INT,
	"lease_expires" timestamp with time zone,
	"lease_reserved_until" timestamp with time zone,
	"registry_errors" bigint,
	"registry_last_error" TEXT,
	"old_version_databases" INT
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_stats_wrapper';

-- Generated by scripts/upgrade_script.py from: src/high_water/sql/high_water.sql src/convert/sql/convert_online.sql:snowflake_convert_online_step_body src/convert/sql/convert_online.sql:snowflake_convert_new_name src/convert/sql/convert_online.sql:snowflake_convert_online src/operate/sql/fleet_check.sql src/convert/sql/convert_online.sql:snowflake_convert_progress_guard src/convert/sql/convert_online.sql:snowflake_convert_online_columns src/convert/sql/convert_online.sql:snowflake_convert_online_indexes src/convert/sql/convert_online.sql:snowflake_convert_online_step src/convert/sql/convert_online.sql:snowflake_convert_online_abandon_body src/convert/sql/convert_online.sql:snowflake_convert_online_abandon src/convert/sql/convert_column.sql src/read/sql/js_safe.sql src/lease/sql/registry.sql src/adopt/sql/adopt.sql

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

CREATE OR REPLACE FUNCTION snowflake_convert_online_step_body(tbl regclass, col name, batch_pages integer, lock_wait interval)
RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $step$
#variable_conflict use_variable
DECLARE
    main     record;
    p        record;
    c        record;
    d        record;
    rel_rec  record;
    ph       text;
    n        bigint;
    a        bigint;
    b        bigint;
    sets     text;
    cond     text;
    args     text;
    newname  text;
    stmts    text[] := '{}';
    cons     text[] := '{}';
    con      text[];
    oldnn    name;
    pat      text;
    s        text;
    max_val  bigint;
    next_id  bigint;
    target   regprocedure;
    keep_seq   regclass;  -- the key's sequence, kept and adopted (issue 57)
    keep_name  text;
    keep_opts  text;
    keep_start bigint;
    keep_ident "char";
    keep_acl   aclitem[];  -- an identity's sequence's grants and comment,
    keep_comment text;     -- made again with it
BEGIN
    -- Before any @extschema@ name is looked up (docs/security.md, "The
    -- extension's schema"): every role that can create in the extension's
    -- schema must be a superuser, the caller, or (for a caller who is not
    -- a superuser) a role whose privileges the caller has; and the schema
    -- must still have the name this body was created with.
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension sfg_e
                     JOIN pg_catalog.pg_namespace sfg_n ON sfg_n.oid OPERATOR(pg_catalog.=) sfg_e.extnamespace
                    WHERE sfg_e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name
                      AND pg_catalog.quote_ident(sfg_n.nspname::pg_catalog.text) OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.text)
       OR EXISTS (SELECT FROM pg_catalog.pg_extension sfg_e
                    JOIN pg_catalog.pg_namespace sfg_n ON sfg_n.oid OPERATOR(pg_catalog.=) sfg_e.extnamespace
                   CROSS JOIN LATERAL (SELECT sfg_n.nspowner AS sfg_who
                                       UNION ALL
                                       SELECT sfg_a.grantee FROM pg_catalog.aclexplode(sfg_n.nspacl) sfg_a
                                        WHERE sfg_a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'::pg_catalog.text) sfg_c
                    LEFT JOIN pg_catalog.pg_roles sfg_o
                      ON sfg_o.oid OPERATOR(pg_catalog.=)
                         CASE WHEN sfg_c.sfg_who OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole::pg_catalog.oid
                              THEN (SELECT sfg_d.datdba FROM pg_catalog.pg_database sfg_d
                                     WHERE sfg_d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                              ELSE sfg_c.sfg_who END
                   WHERE sfg_e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name
                     AND NOT (COALESCE(sfg_o.rolsuper, false)
                              OR COALESCE(sfg_o.rolname OPERATOR(pg_catalog.=) CURRENT_USER, false)
                              OR (sfg_o.oid IS NOT NULL
                                  AND NOT (SELECT sfg_r.rolsuper FROM pg_catalog.pg_roles sfg_r
                                            WHERE sfg_r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
                                  AND pg_catalog.pg_has_role(sfg_o.oid, 'USAGE'::pg_catalog.text))))
    THEN
        RAISE EXCEPTION '%: the schema of snowflake_id is renamed, or a role whose rights you exceed can create in it', 'snowflake_convert_online_step_body'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'This function calls the extension''s functions by the schema''s name, so that role could make it run its own code with your rights.',
                  HINT = 'Install snowflake_id in a schema that only a superuser can create in (CREATE SCHEMA snowflake AUTHORIZATION postgres; CREATE EXTENSION snowflake_id SCHEMA snowflake), or run this as the schema''s owner. See docs/security.md, "The extension''s schema".';
    END IF;
    target := '@extschema@.snowflake_nextval()'::regprocedure;
    IF batch_pages < 1 THEN
        RAISE EXCEPTION 'batch_pages must be at least 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Every lock is requested with a timeout below deadlock_timeout: a
    -- session of the application that queues behind the conversion then
    -- waits less than deadlock_timeout, so neither side ever runs the
    -- deadlock check, and no application transaction is ever the victim of
    -- a deadlock with the conversion. Timed out, the step is retried.
    PERFORM set_config('lock_timeout',
                       greatest(1, least(extract(epoch FROM lock_wait) * 1000,
                                         0.8 * extract(epoch FROM pg_catalog.current_setting('deadlock_timeout')::interval) * 1000))::bigint::text,
                       true);
    SELECT g.phase INTO ph FROM @extschema@.snowflake_convert_progress g
     WHERE g.tbl = $1 AND g.col = $2 AND g.rel = $1 AND g.rel_col = $2;

    -- The recorded columns must be the ones the catalog says this
    -- conversion widens, under the names it gives them: then acting on
    -- the rows is acting on the catalog's answer.
    IF ph IS NOT NULL AND ph <> 'done' AND EXISTS (
           (SELECT g.rel, g.rel_col, g.new_col FROM @extschema@.snowflake_convert_progress g
             WHERE g.tbl = $1 AND g.col = $2
            EXCEPT SELECT * FROM @extschema@.snowflake_convert_online_columns($1, $2))
           UNION ALL
           (SELECT * FROM @extschema@.snowflake_convert_online_columns($1, $2)
            EXCEPT SELECT g.rel, g.rel_col, g.new_col FROM @extschema@.snowflake_convert_progress g
             WHERE g.tbl = $1 AND g.col = $2)) THEN
        RAISE EXCEPTION 'the recorded online conversion of column "%" of relation "%" does not match the catalog', $2, $1
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'The foreign keys that reference the column changed since the conversion started.',
                  HINT = 'Back out with snowflake_convert_online_abandon() and start again.';
    END IF;

    -- Prepare: check, add the new columns and the triggers, record them.
    IF ph IS NULL THEN
        -- The offline conversion's checks and plan, carried out by nobody
        -- and read once: its refusals (ownership, partitions, types,
        -- defaults, rules, materialized views) come first, then the views
        -- it would recreate (first in its plan), then the columns to widen
        -- (the key first).
        FOR p IN
            SELECT x.action, x.relid AS rel, a2.attname AS rel_col, a2.attnum, a2.attnotnull
              FROM @extschema@.snowflake_convert_column_steps($1, $2, true) x
              LEFT JOIN pg_attribute a2 ON x.action = 'widen' AND a2.attrelid = x.relid
                                       AND a2.attnum > 0 AND NOT a2.attisdropped
                                       AND format('%s.%I', x.relid::regclass, a2.attname) = x.object
             WHERE x.action IN ('widen', 'drop view')
             ORDER BY x.step
        LOOP
            IF p.action = 'drop view' THEN
                RAISE EXCEPTION 'cannot convert column "%" of relation "%" online because views depend on it', $2, $1
                    USING ERRCODE = 'feature_not_supported',
                          HINT = 'Use snowflake_convert_column(), which recreates the views, or drop the views and create them again after the online conversion.';
            END IF;
            IF p.rel = $1::oid AND (SELECT c2.relkind FROM pg_class c2 WHERE c2.oid = $1) = 'p' THEN
                RAISE EXCEPTION 'cannot convert column "%" of partitioned table "%" online', $2, $1
                    USING ERRCODE = 'feature_not_supported',
                          HINT = 'Indexes of partitioned tables cannot be built concurrently; use snowflake_convert_column().';
            END IF;
            -- What an online swap cannot carry, first found first: one
            -- query, one refusal.
            pat := '\m' || regexp_replace(p.rel_col, '(\W)', '\\\1', 'g') || '\M';
            SELECT x.msg, x.hint INTO d FROM (
                -- Indexes of partitioned tables cannot be built
                -- concurrently; a back-fill by ctid would not reach
                -- inheritance children.
                SELECT 1 AS ord, format('column %s.%I belongs to a partitioned table or one with inheritance children',
                                        p.rel::regclass, p.rel_col) AS msg,
                       'Use snowflake_convert_column().' AS hint
                 WHERE (SELECT c3.relkind FROM pg_class c3 WHERE c3.oid = p.rel) = 'p'
                    OR EXISTS (SELECT 1 FROM pg_inherits ih WHERE ih.inhparent = p.rel)
              UNION ALL
                -- Only references one level deep.
                SELECT 2, format('column %s.%I is referenced in turn', p.rel::regclass, p.rel_col),
                       'Use snowflake_convert_column().'
                 WHERE p.rel <> $1 AND EXISTS (
                       SELECT 1 FROM pg_constraint k
                        WHERE k.contype = 'f' AND k.confrelid = p.rel AND p.attnum = ANY (k.confkey))
              UNION ALL
                SELECT 3, format('constraint "%s" on relation "%s" uses column "%s" with other columns or in an expression',
                                 k.conname, p.rel::regclass, p.rel_col),
                       'Drop the constraint and add it again after the conversion, or use snowflake_convert_column().'
                  FROM pg_constraint k
                 WHERE k.conrelid = p.rel AND p.attnum = ANY (k.conkey)
                   AND (k.contype NOT IN ('p', 'u', 'f', 'n') OR cardinality(k.conkey) > 1)
              UNION ALL
                SELECT 4, format('foreign key "%s" references column %s.%I with other columns', k.conname, p.rel::regclass, p.rel_col),
                       'Use snowflake_convert_column().'
                  FROM pg_constraint k
                 WHERE k.contype = 'f' AND k.confrelid = p.rel AND p.attnum = ANY (k.confkey)
                   AND cardinality(k.confkey) > 1
              UNION ALL
                -- Anything else that dropping the old column would take
                -- along: views' rules, triggers with column lists,
                -- policies, statistics, generated columns.
                SELECT 5, format('%s depends on column %s.%I', pg_describe_object(dp.classid, dp.objid, dp.objsubid),
                                 p.rel::regclass, p.rel_col),
                       'Drop it and create it again after the conversion, or use snowflake_convert_column().'
                  FROM pg_depend dp
                 WHERE dp.refclassid = 'pg_class'::regclass AND dp.refobjid = p.rel AND dp.refobjsubid = p.attnum
                   AND dp.deptype IN ('n', 'a')
                   AND dp.classid <> 'pg_constraint'::regclass
                   AND NOT (dp.classid = 'pg_attrdef'::regclass
                            AND (SELECT ad.adnum FROM pg_attrdef ad WHERE ad.oid = dp.objid) = p.attnum)
                   AND NOT (dp.classid = 'pg_class'::regclass
                            AND (SELECT c3.relkind FROM pg_class c3 WHERE c3.oid = dp.objid) IN ('S', 'i'))
              UNION ALL
                -- An expression or a predicate would be copied with the
                -- old column's name in it.
                SELECT 6, format('index %s uses column "%s" in an expression or a predicate', i.indexrelid::regclass, p.rel_col),
                       'Drop the index and create it again after the conversion, or use snowflake_convert_column().'
                  FROM pg_index i
                 WHERE i.indrelid = p.rel
                   AND (pg_get_expr(i.indexprs, i.indrelid) ~ pat OR pg_get_expr(i.indpred, i.indrelid) ~ pat)
            ) x ORDER BY x.ord, x.msg LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'cannot convert column "%" of relation "%" online: %', $2, $1, d.msg
                    USING ERRCODE = 'feature_not_supported', HINT = d.hint;
            END IF;
            newname := @extschema@.snowflake_convert_new_name(p.rel_col);
            INSERT INTO @extschema@.snowflake_convert_progress
                   (tbl, col, rel, rel_col, new_col, not_null, phase, pages_total)
            VALUES ($1, $2, p.rel, p.rel_col, newname, p.attnotnull, 'backfill', 0);
        END LOOP;
        IF NOT EXISTS (SELECT 1 FROM @extschema@.snowflake_convert_progress g
                        WHERE g.tbl = $1 AND g.col = $2 AND g.rel = $1 AND g.rel_col = $2) THEN
            RAISE EXCEPTION 'column "%" of relation "%" is already bigint', $2, $1
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Use snowflake_convert_column(): it rewrites only the narrow foreign-key columns, if any, and otherwise just changes the default.';
        END IF;
        -- A referencing column that is already bigint would keep its
        -- foreign key on the old column's index.
        SELECT k.conname, k.conrelid::regclass AS on_rel INTO c
          FROM pg_constraint k JOIN pg_attribute a2 ON a2.attrelid = $1 AND a2.attname = $2
         WHERE k.contype = 'f' AND k.confrelid = $1 AND k.confkey = ARRAY[a2.attnum]
           AND NOT EXISTS (SELECT 1 FROM @extschema@.snowflake_convert_progress g
                            JOIN pg_attribute a3 ON a3.attrelid = g.rel AND a3.attname = g.rel_col
                           WHERE g.tbl = $1 AND g.col = $2 AND g.rel = k.conrelid AND k.conkey = ARRAY[a3.attnum])
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'cannot convert column "%" of relation "%" online: foreign key "%" on relation "%" is already bigint', $2, $1, c.conname, c.on_rel
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'Drop the foreign key and add it again after the conversion, or use snowflake_convert_column().';
        END IF;
        -- The names the conversion gives its indexes and constraints must
        -- be free: one that exists would be taken for its own. (Columns and
        -- triggers need no check: adding them fails if the name is taken.)
        SELECT x.what INTO d FROM (
            SELECT format('relation "%s"', ic.oid::regclass) AS what
              FROM @extschema@.snowflake_convert_progress g
              JOIN pg_index i ON i.indrelid = g.rel
              JOIN pg_class rc ON rc.oid = g.rel
              JOIN pg_class ic ON ic.relname = 'snowflake_new_' || i.indexrelid AND ic.relnamespace = rc.relnamespace
             WHERE g.tbl = $1 AND g.col = $2
          UNION ALL
            SELECT format('constraint "%s" on relation "%s"', k.conname, k.conrelid::regclass)
              FROM @extschema@.snowflake_convert_progress g
              JOIN pg_constraint k ON k.conrelid = g.rel AND k.conname LIKE 'snowflake\_new\_%'
             WHERE g.tbl = $1 AND g.col = $2
        ) x ORDER BY x.what LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'cannot convert column "%" of relation "%" online: % already exists', $2, $1, d.what
                USING ERRCODE = 'duplicate_object',
                      DETAIL = 'The online conversion names its new indexes snowflake_new_<index oid> and its new constraints snowflake_new_...',
                      HINT = 'Rename or drop that object, then CALL the procedure again.';
        END IF;
        PERFORM @extschema@.snowflake_convert_cancel_autovacuum(
            ARRAY(SELECT g.rel::oid FROM @extschema@.snowflake_convert_progress g WHERE g.tbl = $1 AND g.col = $2));
        BEGIN
            FOR rel_rec IN SELECT g.rel, array_agg(g.rel_col ORDER BY g.rel_col) AS olds,
                                  array_agg(g.new_col ORDER BY g.rel_col) AS news
                             FROM @extschema@.snowflake_convert_progress g
                            WHERE g.tbl = $1 AND g.col = $2 GROUP BY g.rel
            LOOP
                args := ''; cond := '';
                FOR n IN 1 .. cardinality(rel_rec.olds) LOOP
                    EXECUTE format('ALTER TABLE %s ADD COLUMN %I bigint', rel_rec.rel, rel_rec.news[n]);
                    args := args || format('%s%L, %L', CASE WHEN n > 1 THEN ', ' ELSE '' END, rel_rec.olds[n], rel_rec.news[n]);
                    cond := cond || format('%sNEW.%I IS DISTINCT FROM NEW.%I', CASE WHEN n > 1 THEN ' OR ' ELSE '' END,
                                           rel_rec.olds[n], rel_rec.news[n]);
                END LOOP;
                EXECUTE format('CREATE TRIGGER snowflake_convert_sync BEFORE INSERT OR UPDATE ON %s FOR EACH ROW WHEN (%s) EXECUTE FUNCTION @extschema@.snowflake_convert_sync(%s)',
                               rel_rec.rel, cond, args);
                -- Measured now, under the lock: every row in a later page
                -- is written after the trigger exists.
                UPDATE @extschema@.snowflake_convert_progress g
                   SET pages_total = pg_relation_size(g.rel) / current_setting('block_size')::bigint
                 WHERE g.tbl = $1 AND g.col = $2 AND g.rel = rel_rec.rel;
            END LOOP;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            -- Every column and trigger added above is rolled back: forget
            -- the rows recorded before them too, so that the retry
            -- prepares again rather than back-filling columns that are not
            -- there.
            DELETE FROM @extschema@.snowflake_convert_progress g WHERE g.tbl = $1 AND g.col = $2;
            RETURN 'retry';
        END;
        RETURN 'backfill';
    END IF;

    -- Back-fill: one batch of pages of the first table not done yet.
    IF ph = 'backfill' THEN
        SELECT g.rel, min(g.pages_done) AS pages_done, min(g.pages_total) AS pages_total,
               string_agg(format('%I = %I', g.new_col, g.rel_col), ', ' ORDER BY g.rel_col) AS sets,
               string_agg(format('%I IS DISTINCT FROM %I', g.new_col, g.rel_col), ' OR ' ORDER BY g.rel_col) AS cond
          INTO rel_rec
          FROM @extschema@.snowflake_convert_progress g
         WHERE g.tbl = $1 AND g.col = $2 AND g.pages_done < g.pages_total
         GROUP BY g.rel ORDER BY g.rel = $1 DESC, g.rel::text LIMIT 1;
        IF NOT FOUND THEN
            UPDATE @extschema@.snowflake_convert_progress g SET phase = 'indexes', updated_at = clock_timestamp()
             WHERE g.tbl = $1 AND g.col = $2;
            RETURN 'backfilled';
        END IF;
        a := rel_rec.pages_done;
        b := least(a + batch_pages, rel_rec.pages_total);
        BEGIN
            -- As the table's owner: the UPDATE fires the owner's triggers
            -- and evaluates the owner's index expressions.
            n := @extschema@.snowflake_convert_as_owner(rel_rec.rel,
                     format('UPDATE %s SET %s WHERE ctid >= ''(%s,0)''::tid AND ctid < ''(%s,0)''::tid AND (%s)',
                            rel_rec.rel, rel_rec.sets, a, b, rel_rec.cond));
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            RETURN 'retry';
        END;
        UPDATE @extschema@.snowflake_convert_progress g
           SET pages_done = b, rows_done = g.rows_done + n, batches = g.batches + 1, updated_at = clock_timestamp()
         WHERE g.tbl = $1 AND g.col = $2 AND g.rel = rel_rec.rel;
        RETURN 'backfill';
    END IF;

    -- Indexes: built by the caller at the top level; check they are there.
    IF ph = 'indexes' THEN
        IF EXISTS (SELECT 1 FROM @extschema@.snowflake_convert_online_indexes($1, $2)) THEN
            RETURN 'indexes';
        END IF;
        UPDATE @extschema@.snowflake_convert_progress g SET phase = 'constraints', updated_at = clock_timestamp()
         WHERE g.tbl = $1 AND g.col = $2;
        RETURN 'constraints';
    END IF;

    -- Constraints: each added NOT VALID in one step (a short lock), then
    -- validated in another (SHARE UPDATE EXCLUSIVE: reads and writes go on).
    IF ph = 'constraints' THEN
        -- What the new columns need: NOT NULL as a validated CHECK (so that
        -- SET NOT NULL in the swap does not scan), and every foreign key
        -- of an old column again on the new one.
        FOR p IN SELECT * FROM @extschema@.snowflake_convert_progress g
                  WHERE g.tbl = $1 AND g.col = $2 ORDER BY g.rel = g.tbl DESC, g.rel::text, g.rel_col
        LOOP
            IF p.not_null THEN
                cons := cons || ARRAY[[p.rel::text,
                                       'snowflake_new_nn_' || p.rel::oid || '_' ||
                                       (SELECT a2.attnum FROM pg_attribute a2 WHERE a2.attrelid = p.rel AND a2.attname = p.rel_col),
                                       format('CHECK (%I IS NOT NULL)', p.new_col), NULL, NULL]];
            END IF;
            FOR c IN
                SELECT k.oid, k.confrelid, k.confkey, k.confupdtype, k.confdeltype, k.confmatchtype,
                       k.condeferrable, k.condeferred
                  FROM pg_constraint k JOIN pg_attribute a2 ON a2.attrelid = k.conrelid AND a2.attname = p.rel_col
                 WHERE k.contype = 'f' AND k.conrelid = p.rel AND k.conkey = ARRAY[a2.attnum]
                 ORDER BY k.conname
            LOOP
                cons := cons || ARRAY[[p.rel::text, 'snowflake_new_fk_' || c.oid,
                    format('FOREIGN KEY (%I) REFERENCES %s (%I)%s ON UPDATE %s ON DELETE %s%s',
                    p.new_col, c.confrelid::regclass,
                    CASE WHEN c.confrelid = $1::oid AND (SELECT a3.attname FROM pg_attribute a3
                                                          WHERE a3.attrelid = c.confrelid AND a3.attnum = c.confkey[1]) = $2
                         THEN @extschema@.snowflake_convert_new_name($2)
                         ELSE (SELECT a3.attname FROM pg_attribute a3 WHERE a3.attrelid = c.confrelid AND a3.attnum = c.confkey[1]) END,
                    CASE c.confmatchtype WHEN 'f' THEN ' MATCH FULL' ELSE '' END,
                    CASE c.confupdtype WHEN 'a' THEN 'NO ACTION' WHEN 'r' THEN 'RESTRICT' WHEN 'c' THEN 'CASCADE'
                                       WHEN 'n' THEN 'SET NULL' ELSE 'SET DEFAULT' END,
                    CASE c.confdeltype WHEN 'a' THEN 'NO ACTION' WHEN 'r' THEN 'RESTRICT' WHEN 'c' THEN 'CASCADE'
                                       WHEN 'n' THEN 'SET NULL' ELSE 'SET DEFAULT' END,
                    CASE WHEN c.condeferrable THEN ' DEFERRABLE' || CASE WHEN c.condeferred THEN ' INITIALLY DEFERRED' ELSE '' END
                         ELSE '' END),
                    c.confrelid::regclass::text,
                    CASE WHEN c.confrelid = $1::oid AND (SELECT a3.attname FROM pg_attribute a3
                                                          WHERE a3.attrelid = c.confrelid AND a3.attnum = c.confkey[1]) = $2
                         THEN @extschema@.snowflake_convert_new_name($2)
                         ELSE (SELECT a3.attname FROM pg_attribute a3 WHERE a3.attrelid = c.confrelid AND a3.attnum = c.confkey[1]) END]];
            END LOOP;
        END LOOP;
        BEGIN
            FOREACH con SLICE 1 IN ARRAY cons LOOP
                SELECT k.oid, k.convalidated INTO c FROM pg_constraint k
                 WHERE k.conrelid = con[1]::regclass AND k.conname = con[2];
                IF c.oid IS NULL OR NOT c.convalidated THEN
                    PERFORM @extschema@.snowflake_convert_cancel_autovacuum(ARRAY[con[1]::regclass::oid, $1::oid]);
                END IF;
                -- A foreign key is added and validated as the referencing
                -- table's owner, who must be allowed to reference the other
                -- table: never with the caller's rights instead.
                IF con[4] IS NOT NULL AND (c.oid IS NULL OR NOT c.convalidated) THEN
                    SELECT pg_get_userbyid(rc.relowner) AS owner,
                           (SELECT ns.nspname FROM pg_class fc JOIN pg_namespace ns ON ns.oid = fc.relnamespace
                             WHERE fc.oid = con[4]::regclass) AS nsp
                      INTO d FROM pg_class rc WHERE rc.oid = con[1]::regclass;
                    IF NOT (has_schema_privilege(d.owner, d.nsp, 'USAGE')
                            AND has_column_privilege(d.owner, con[4]::regclass, con[5], 'REFERENCES')
                            AND has_column_privilege(d.owner, con[4]::regclass, con[5], 'SELECT')) THEN
                        RAISE EXCEPTION 'role "%", the owner of relation "%", may not reference column "%" of relation "%"',
                                        d.owner, con[1], con[5], con[4]
                            USING ERRCODE = 'insufficient_privilege',
                                  DETAIL = 'The conversion adds and validates each new foreign key as the owner of the referencing table, never with the caller''s privileges.',
                                  HINT = format('GRANT USAGE ON SCHEMA %I TO %I; GRANT SELECT, REFERENCES ON %s TO %I; then CALL the procedure again.',
                                                d.nsp, d.owner, con[4], d.owner);
                    END IF;
                END IF;
                -- As the table's owner, in a security-restricted operation:
                -- validating plans a query over the table (and the one it
                -- references), which evaluates the owner's index predicates
                -- and expressions.
                IF c.oid IS NULL THEN
                    PERFORM @extschema@.snowflake_convert_as_owner(con[1]::regclass,
                                format('ALTER TABLE %s ADD CONSTRAINT %I %s NOT VALID', con[1], con[2], con[3]));
                    RETURN 'constraints';
                ELSIF NOT c.convalidated THEN
                    PERFORM @extschema@.snowflake_convert_as_owner(con[1]::regclass,
                                format('ALTER TABLE %s VALIDATE CONSTRAINT %I', con[1], con[2]));
                    RETURN 'constraints';
                END IF;
            END LOOP;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            RETURN 'retry';
        END;
        UPDATE @extschema@.snowflake_convert_progress g SET phase = 'swap', updated_at = clock_timestamp()
         WHERE g.tbl = $1 AND g.col = $2;
        RETURN 'swap';
    END IF;

    -- The swap: one short transaction under ACCESS EXCLUSIVE locks.
    IF ph = 'swap' THEN
        PERFORM @extschema@.snowflake_convert_cancel_autovacuum(
            ARRAY(SELECT g.rel::oid FROM @extschema@.snowflake_convert_progress g WHERE g.tbl = $1 AND g.col = $2));
        BEGIN
            FOR rel_rec IN SELECT DISTINCT g.rel, g.rel = g.tbl AS is_main FROM @extschema@.snowflake_convert_progress g
                            WHERE g.tbl = $1 AND g.col = $2 ORDER BY 2 DESC, 1 LOOP
                EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', rel_rec.rel);
            END LOOP;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            RETURN 'retry';
        END;
        FOR rel_rec IN SELECT DISTINCT g.rel FROM @extschema@.snowflake_convert_progress g
                        WHERE g.tbl = $1 AND g.col = $2 LOOP
            EXECUTE format('DROP TRIGGER snowflake_convert_sync ON %s', rel_rec.rel);
        END LOOP;
        -- Referencing columns first: dropping them drops the foreign keys
        -- that hold on to the old key's index.
        FOR p IN SELECT g.*, a2.attnum, a2.attacl, col_description(g.rel, a2.attnum) AS comment
                   FROM @extschema@.snowflake_convert_progress g
                   JOIN pg_attribute a2 ON a2.attrelid = g.rel AND a2.attname = g.rel_col
                  WHERE g.tbl = $1 AND g.col = $2
                  ORDER BY g.rel = g.tbl AND g.rel_col = g.col, g.rel::text, g.rel_col
        LOOP
            IF p.not_null THEN
                -- As the owner: proving NOT NULL from the CHECK constraints
                -- const-folds every CHECK constraint of the table.
                PERFORM @extschema@.snowflake_convert_as_owner(p.rel,
                            format('ALTER TABLE %s ALTER COLUMN %I SET NOT NULL', p.rel, p.new_col));
                EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', p.rel, 'snowflake_new_nn_' || p.rel::oid || '_' || p.attnum);
            END IF;
            -- Remember what the old column's constraints and indexes are
            -- called, and what replaces each of them.
            stmts := '{}';
            FOR c IN SELECT k.conname, k.contype, k.oid, k.conindid FROM pg_constraint k
                      WHERE k.conrelid = p.rel AND k.conkey = ARRAY[p.attnum] AND k.contype IN ('p', 'u', 'f')
            LOOP
                IF c.contype = 'f' THEN
                    stmts := stmts || format('ALTER TABLE %s RENAME CONSTRAINT %I TO %I', p.rel, 'snowflake_new_fk_' || c.oid, c.conname);
                ELSE
                    stmts := stmts || format('ALTER TABLE %s ADD CONSTRAINT %I %s USING INDEX %I', p.rel, c.conname,
                                             CASE c.contype WHEN 'p' THEN 'PRIMARY KEY' ELSE 'UNIQUE' END,
                                             'snowflake_new_' || c.conindid);
                END IF;
            END LOOP;
            FOR c IN SELECT i.indexrelid, ic.relname FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
                      WHERE i.indrelid = p.rel AND p.attnum = ANY (i.indkey::int2[])
                        AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid AND k.conrelid = p.rel
                                           AND k.contype IN ('p', 'u'))
            LOOP
                stmts := stmts || format('ALTER INDEX %I.%I RENAME TO %I',
                                         (SELECT nspname FROM pg_namespace ns JOIN pg_class rc ON rc.relnamespace = ns.oid WHERE rc.oid = p.rel),
                                         'snowflake_new_' || c.indexrelid, c.relname);
            END LOOP;
            IF p.comment IS NOT NULL THEN
                stmts := stmts || format('COMMENT ON COLUMN %s.%I IS %L', p.rel, p.rel_col, p.comment);
            END IF;
            stmts := stmts || ARRAY(
                SELECT format('GRANT %s (%I) ON %s TO %s%s', x.privilege_type, p.rel_col, p.rel,
                              CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(x.grantee)) END,
                              CASE WHEN x.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)
                  FROM aclexplode(p.attacl) x ORDER BY x.grantee, x.privilege_type);
            -- PostgreSQL 18 names NOT NULL constraints; keep the old name.
            SELECT k.conname INTO oldnn FROM pg_constraint k
             WHERE k.conrelid = p.rel AND k.contype = 'n' AND k.conkey = ARRAY[p.attnum];
            IF NOT (p.rel = $1 AND p.rel_col = $2)
               AND (SELECT a2.attidentity FROM pg_attribute a2 WHERE a2.attrelid = p.rel AND a2.attnum = p.attnum) = 'a' THEN
                RAISE NOTICE 'column %.% no longer rejects explicit values', p.rel, p.rel_col
                    USING DETAIL = 'It was GENERATED ALWAYS AS IDENTITY; a DEFAULT lets an INSERT supply its own value.',
                          HINT = 'Revoke INSERT on the column from roles that must not choose keys, if that protection mattered.';
            END IF;
            -- The key's own sequence stays, as after the offline
            -- conversion (issue 57): a serial's, if nothing else uses it,
            -- is let go by the old column first; an identity's goes with
            -- the column and the new column is made an identity of its
            -- name, kind and bounds.
            IF p.rel = $1 AND p.rel_col = $2 THEN
                keep_seq := pg_get_serial_sequence(p.rel::text, p.rel_col)::regclass;
                SELECT a2.attidentity INTO keep_ident FROM pg_attribute a2
                 WHERE a2.attrelid = p.rel AND a2.attnum = p.attnum;
                IF keep_seq IS NOT NULL AND keep_ident = '' AND EXISTS (
                       SELECT FROM pg_depend kd
                        WHERE kd.refclassid = 'pg_class'::regclass AND kd.refobjid = keep_seq AND kd.deptype = 'n'
                          AND NOT (kd.classid = 'pg_attrdef'::regclass AND kd.objid IN (
                              SELECT kad.oid FROM pg_attrdef kad WHERE kad.adrelid = p.rel AND kad.adnum = p.attnum))) THEN
                    keep_seq := NULL;   -- other objects use it: it stays as it is
                END IF;
                IF keep_seq IS NOT NULL THEN
                    keep_name := keep_seq::text;
                    -- Made again, with the identity's bounds
                    -- (the fourth review of issue 57).
                    -- A bound that was its type's own becomes bigint's, as
                    -- ALTER COLUMN ... TYPE bigint makes it.
                    SELECT format('INCREMENT BY %s %s %s %s', kq.seqincrement,
                                  CASE WHEN kq.seqincrement < 0 AND kq.seqmin = CASE kq.seqtypid WHEN 'int2'::regtype THEN -32768
                                                                                                 WHEN 'int4'::regtype THEN -2147483648
                                                                                                 ELSE -9223372036854775808 END
                                       THEN 'NO MINVALUE' ELSE format('MINVALUE %s', kq.seqmin) END,
                                  CASE WHEN kq.seqincrement > 0 AND kq.seqmax = CASE kq.seqtypid WHEN 'int2'::regtype THEN 32767
                                                                                                 WHEN 'int4'::regtype THEN 2147483647
                                                                                                 ELSE 9223372036854775807 END
                                       THEN 'NO MAXVALUE' ELSE format('MAXVALUE %s', kq.seqmax) END,
                                  CASE WHEN kq.seqcycle THEN 'CYCLE' ELSE 'NO CYCLE' END)
                           || format(' CACHE %s', kq.seqcache), kq.seqstart
                      INTO keep_opts, keep_start FROM pg_sequence kq WHERE kq.seqrelid = keep_seq;
                    SELECT kc.relacl, obj_description(keep_seq, 'pg_class') INTO keep_acl, keep_comment
                      FROM pg_class kc WHERE kc.oid = keep_seq;
                    IF keep_ident = '' THEN
                        PERFORM @extschema@.snowflake_convert_as_owner(keep_seq,
                            format('ALTER SEQUENCE %s OWNED BY NONE', keep_seq));
                    END IF;
                END IF;
            END IF;
            EXECUTE format('ALTER TABLE %s DROP COLUMN %I', p.rel, p.rel_col);
            EXECUTE format('ALTER TABLE %s RENAME COLUMN %I TO %I', p.rel, p.new_col, p.rel_col);
            SELECT k.conname INTO newname FROM pg_constraint k
              JOIN pg_attribute a2 ON a2.attrelid = k.conrelid AND a2.attname = p.rel_col
             WHERE k.conrelid = p.rel AND k.contype = 'n' AND k.conkey = ARRAY[a2.attnum];
            IF oldnn IS NOT NULL AND newname IS NOT NULL AND newname <> oldnn THEN
                EXECUTE format('ALTER TABLE %s RENAME CONSTRAINT %I TO %I', p.rel, newname, oldnn);
            END IF;
            oldnn := NULL; newname := NULL;
            -- Quietly: PostgreSQL's NOTICE that ADD CONSTRAINT ... USING
            -- INDEX renames the index would name our temporary index.
            PERFORM set_config('client_min_messages', 'warning', true);
            FOREACH s IN ARRAY stmts LOOP
                EXECUTE s;
            END LOOP;
            PERFORM set_config('client_min_messages', 'notice', true);
            -- Index columns keep the name they were built with.
            FOR c IN SELECT i.indexrelid FROM pg_index i
                       JOIN pg_attribute ia ON ia.attrelid = i.indexrelid AND ia.attname = p.new_col
                      WHERE i.indrelid = p.rel
            LOOP
                EXECUTE format('ALTER TABLE %s RENAME COLUMN %I TO %I', c.indexrelid::regclass, p.new_col, p.rel_col);
            END LOOP;
        END LOOP;
        IF keep_seq IS NULL THEN
            EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %s()', $1, $2, target::regproc);
        ELSE
            -- The key keeps the generator the application gave it (issue
            -- 63: the catalog is the application's): an identity again,
            -- with the old one's kind, name and bounds, or
            -- nextval() of its own sequence; adopted.
            IF keep_ident <> '' THEN
                EXECUTE format('ALTER TABLE %s ALTER COLUMN %I ADD GENERATED %s AS IDENTITY (SEQUENCE NAME %s %s START WITH %s)', $1, $2,
                               CASE keep_ident WHEN 'a' THEN 'ALWAYS' ELSE 'BY DEFAULT' END, keep_name, keep_opts, keep_start);
                -- Its counter is not carried over: the sequence is adopted
                -- below (by the switch already, if it is on), and adoption
                -- puts the counter at the end of its range (the fence).
                keep_seq := to_regclass(keep_name);
                -- Its grants and comment, as the old one had them (the
                -- red-team review of the kept identities: an application
                -- role's currval() needs its grant).
                FOREACH s IN ARRAY ARRAY(
                    SELECT format('GRANT %s ON SEQUENCE %s TO %s%s', x.privilege_type, keep_seq,
                                  CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(x.grantee)) END,
                                  CASE WHEN x.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)
                      FROM aclexplode(keep_acl) x
                     WHERE x.grantee <> (SELECT kc.relowner FROM pg_class kc WHERE kc.oid = keep_seq)
                     ORDER BY x.grantee, x.privilege_type) LOOP
                    PERFORM @extschema@.snowflake_convert_as_owner(keep_seq, s);
                END LOOP;
                IF keep_comment IS NOT NULL THEN
                    PERFORM @extschema@.snowflake_convert_as_owner(keep_seq,
                        format('COMMENT ON SEQUENCE %s IS %L', keep_seq, keep_comment));
                END IF;
            ELSE
                IF (SELECT kq.seqtypid FROM pg_sequence kq WHERE kq.seqrelid = keep_seq) <> 'bigint'::regtype THEN
                    PERFORM @extschema@.snowflake_convert_as_owner(keep_seq, format('ALTER SEQUENCE %s AS bigint', keep_seq));
                END IF;
                PERFORM @extschema@.snowflake_convert_as_owner(keep_seq,
                    format('ALTER SEQUENCE %s OWNED BY %s.%I', keep_seq, $1, $2));
                EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT nextval(%L::regclass)', $1, $2, keep_seq::oid);
            END IF;
            PERFORM @extschema@.snowflake_convert_adopt_sequence(keep_seq);
        END IF;
        max_val := @extschema@.snowflake_convert_as_owner($1, format('SELECT max(%I)::bigint FROM %s', $2, $1));
        next_id := @extschema@.snowflake_nextval();
        IF max_val IS NOT NULL AND max_val >= next_id THEN
            RAISE EXCEPTION 'existing values of column "%" of relation "%" are not below the next snowflake ID', $2, $1
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('The largest existing value is %s; the next ID would be %s.', max_val, next_id),
                      HINT = 'Re-key the existing rows with snowflake_compose() first, or check the clocks of the servers that minted them.';
        END IF;
        UPDATE @extschema@.snowflake_convert_progress g SET phase = 'done', updated_at = clock_timestamp()
         WHERE g.tbl = $1 AND g.col = $2;
        RETURN 'done';
    END IF;
    RETURN 'done';
END;
$step$;
COMMENT ON FUNCTION snowflake_convert_online_step_body(regclass, name, integer, interval) IS
'The body of snowflake_convert_online_step(), which alone may let it write the progress';

CREATE OR REPLACE FUNCTION snowflake_convert_new_name(col name) RETURNS name
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT left(col::text, 40) || '_snowflake_new' $$;

CREATE OR REPLACE PROCEDURE snowflake_convert_online(tbl regclass, col name,
                                          batch_pages integer DEFAULT 1000,
                                          throttle real DEFAULT 0.25,
                                          lock_wait interval DEFAULT '1s',
                                          max_retries integer DEFAULT 100)
LANGUAGE plpgsql
AS $proc$
DECLARE
    r        pg_catalog.text;
    retries  pg_catalog.int4 := 0;
    t0       pg_catalog.timestamptz;
BEGIN
    -- Before any @extschema@ name is looked up (docs/security.md, "The
    -- extension's schema"): every role that can create in the extension's
    -- schema must be a superuser, the caller, or (for a caller who is not
    -- a superuser) a role whose privileges the caller has; and the schema
    -- must still have the name this body was created with.
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension sfg_e
                     JOIN pg_catalog.pg_namespace sfg_n ON sfg_n.oid OPERATOR(pg_catalog.=) sfg_e.extnamespace
                    WHERE sfg_e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name
                      AND pg_catalog.quote_ident(sfg_n.nspname::pg_catalog.text) OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.text)
       OR EXISTS (SELECT FROM pg_catalog.pg_extension sfg_e
                    JOIN pg_catalog.pg_namespace sfg_n ON sfg_n.oid OPERATOR(pg_catalog.=) sfg_e.extnamespace
                   CROSS JOIN LATERAL (SELECT sfg_n.nspowner AS sfg_who
                                       UNION ALL
                                       SELECT sfg_a.grantee FROM pg_catalog.aclexplode(sfg_n.nspacl) sfg_a
                                        WHERE sfg_a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'::pg_catalog.text) sfg_c
                    LEFT JOIN pg_catalog.pg_roles sfg_o
                      ON sfg_o.oid OPERATOR(pg_catalog.=)
                         CASE WHEN sfg_c.sfg_who OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole::pg_catalog.oid
                              THEN (SELECT sfg_d.datdba FROM pg_catalog.pg_database sfg_d
                                     WHERE sfg_d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                              ELSE sfg_c.sfg_who END
                   WHERE sfg_e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name
                     AND NOT (COALESCE(sfg_o.rolsuper, false)
                              OR COALESCE(sfg_o.rolname OPERATOR(pg_catalog.=) CURRENT_USER, false)
                              OR (sfg_o.oid IS NOT NULL
                                  AND NOT (SELECT sfg_r.rolsuper FROM pg_catalog.pg_roles sfg_r
                                            WHERE sfg_r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
                                  AND pg_catalog.pg_has_role(sfg_o.oid, 'USAGE'::pg_catalog.text))))
    THEN
        RAISE EXCEPTION '%: the schema of snowflake_id is renamed, or a role whose rights you exceed can create in it', 'snowflake_convert_online'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'This function calls the extension''s functions by the schema''s name, so that role could make it run its own code with your rights.',
                  HINT = 'Install snowflake_id in a schema that only a superuser can create in (CREATE SCHEMA snowflake AUTHORIZATION postgres; CREATE EXTENSION snowflake_id SCHEMA snowflake), or run this as the schema''s owner. See docs/security.md, "The extension''s schema".';
    END IF;
    IF tbl IS NULL OR col IS NULL OR batch_pages IS NULL OR throttle IS NULL OR lock_wait IS NULL OR max_retries IS NULL THEN
        RAISE EXCEPTION 'the arguments of snowflake_convert_online must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    LOOP
        t0 := pg_catalog.clock_timestamp();
        r := @extschema@.snowflake_convert_online_step(tbl, col, batch_pages, lock_wait);
        COMMIT;
        IF r OPERATOR(pg_catalog.=) 'retry'::pg_catalog.text THEN
            retries := retries OPERATOR(pg_catalog.+) 1::pg_catalog.int4;
            IF retries OPERATOR(pg_catalog.>) max_retries THEN
                RAISE EXCEPTION 'could not lock the tables of column "%" of relation "%" within % after % attempts', col, tbl, lock_wait, max_retries
                    USING ERRCODE = 'lock_not_available',
                          HINT = 'A long-running transaction holds a conflicting lock: see pg_locks. CALL the procedure again to resume.';
            END IF;
            PERFORM pg_catalog.pg_sleep(0.05::pg_catalog.float8 OPERATOR(pg_catalog.+)
                                        (pg_catalog.random() OPERATOR(pg_catalog.*) 0.2::pg_catalog.float8));
            CONTINUE;
        END IF;
        retries := 0::pg_catalog.int4;
        EXIT WHEN r OPERATOR(pg_catalog.=) 'indexes'::pg_catalog.text OR r OPERATOR(pg_catalog.=) 'done'::pg_catalog.text;
        -- Throttle the back-fill: rest a share of the time each batch took.
        IF r OPERATOR(pg_catalog.=) 'backfill'::pg_catalog.text AND throttle OPERATOR(pg_catalog.>) 0::pg_catalog.float4 THEN
            PERFORM pg_catalog.pg_sleep(pg_catalog.date_part('epoch'::pg_catalog.text,
                                            pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) t0)
                                        OPERATOR(pg_catalog.*) throttle::pg_catalog.float8);
        END IF;
    END LOOP;
    IF r OPERATOR(pg_catalog.=) 'indexes'::pg_catalog.text THEN
        RAISE NOTICE 'the back-fill of column "%" of relation "%" is done; its indexes must be built now', col, tbl
            USING HINT = pg_catalog.format('In psql, run SELECT @extschema@.snowflake_convert_online_indexes(%L, %L) \gexec and then CALL @extschema@.snowflake_convert_online(%L, %L) again.',
                                           tbl, col, tbl, col);
    ELSE
        RAISE NOTICE 'column "%" of relation "%" is converted', col, tbl;
    END IF;
END;
$proc$;
COMMENT ON PROCEDURE snowflake_convert_online(regclass, name, integer, real, interval, integer) IS
'Convert a key column to snowflake IDs while the application reads and writes; CALL again to resume';

-- snowflake_node and snowflake_fleet_check(): see src/operate/fleet_check.rs.
-- Included in the install script by extension_sql_file!.

-- What one server tells the fleet check about itself. A view, so that
-- postgres_fdw can read it as a foreign table.
CREATE OR REPLACE VIEW snowflake_node AS
SELECT s.worker_id,
       s.epoch,
       s.timestamp_bits,
       s.worker_bits,
       s.sequence_bits,
       s.state,
       c.system_identifier,
       pg_catalog.pg_postmaster_start_time() AS started_at,
       pg_catalog.clock_timestamp() AS server_clock
  FROM @extschema@.snowflake_stats() s, pg_catalog.pg_control_system() c;

COMMENT ON VIEW snowflake_node IS
'This server''s snowflake_id worker id, layout, state and clock, as snowflake_fleet_check() reads it from every node';

-- Monitoring roles read it (and so run the fleet check) without being
-- superusers: the exporter of contrib/prometheus. Other roles get 42501.
GRANT SELECT ON snowflake_node TO pg_monitor;

CREATE OR REPLACE FUNCTION snowflake_fleet_check(
    max_clock_skew interval DEFAULT interval '1 second',
    servers name[] DEFAULT NULL)
RETURNS TABLE (node text, source text, worker_id integer, epoch timestamptz,
               timestamp_bits integer, worker_bits integer, sequence_bits integer,
               clock_offset_ms double precision, state text, problem text)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fleet$
#variable_conflict use_column
DECLARE
    ext_schema name := (SELECT n.nspname FROM pg_extension e
                          JOIN pg_namespace n ON n.oid = e.extnamespace
                         WHERE e.extname = 'snowflake_id');
    cols       constant text := 'worker_id integer, epoch timestamptz, timestamp_bits integer, '
                                'worker_bits integer, sequence_bits integer, state text, '
                                'system_identifier bigint, started_at timestamptz, server_clock timestamptz';
    t0         timestamptz;
    t1         timestamptz;
    r          record;
    j          json;
    ft         text;
    skew_ms    double precision := extract(epoch FROM max_clock_skew) * 1000;
    caller_su  constant boolean := (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user);
BEGIN
    IF max_clock_skew < interval '0' THEN
        RAISE EXCEPTION 'max_clock_skew must not be negative'
              USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF to_regclass('pg_temp.snowflake_fleet_nodes') IS NULL THEN
        CREATE TEMP TABLE snowflake_fleet_nodes (
            node text, source text, worker_id integer, epoch timestamptz, timestamp_bits integer,
            worker_bits integer, sequence_bits integer, state text, system_identifier bigint,
            started_at timestamptz, offset_ms double precision, uncertainty_ms double precision,
            error text) ON COMMIT DROP;
    END IF;
    TRUNCATE snowflake_fleet_nodes;

    -- This server.
    EXECUTE format('INSERT INTO snowflake_fleet_nodes
        SELECT COALESCE(NULLIF(current_setting(''cluster_name''), ''''), ''local''), ''local'',
               worker_id, epoch, timestamp_bits, worker_bits, sequence_bits, state,
               system_identifier, started_at, 0, 0, NULL
          FROM %I.snowflake_node', ext_schema);

    -- Every other node of a Citus cluster.
    IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        t0 := clock_timestamp();
        FOR r IN EXECUTE format(
            $q$SELECT n.nodename || ':' || n.nodeport AS node, c.success, c.result
                 FROM run_command_on_all_nodes(%L) c
                 JOIN pg_dist_node n USING (nodeid)
                WHERE n.groupid <> (SELECT groupid FROM pg_dist_local_group)
                ORDER BY 1$q$,
            format('SELECT row_to_json(n) FROM %I.snowflake_node n', ext_schema))
        LOOP
            t1 := clock_timestamp();
            IF r.success THEN
                j := r.result::json;
                INSERT INTO snowflake_fleet_nodes VALUES (
                    r.node, 'citus', (j->>'worker_id')::integer, (j->>'epoch')::timestamptz,
                    (j->>'timestamp_bits')::integer, (j->>'worker_bits')::integer,
                    (j->>'sequence_bits')::integer, j->>'state', (j->>'system_identifier')::bigint,
                    (j->>'started_at')::timestamptz,
                    extract(epoch FROM (j->>'server_clock')::timestamptz - (t0 + (t1 - t0) / 2)) * 1000,
                    extract(epoch FROM t1 - t0) * 1000 / 2, NULL);
            ELSE
                INSERT INTO snowflake_fleet_nodes (node, source, error)
                VALUES (r.node, 'citus', 'cannot read snowflake_node: ' || r.result);
            END IF;
        END LOOP;
    END IF;

    -- The postgres_fdw servers whose owner the caller can trust: the owner
    -- of a server decides where a connection through it goes and, with a
    -- user mapping for PUBLIC, as which user. postgres_fdw asks a
    -- superuser for no password, so a server owned by anyone but a
    -- superuser would let its owner run her code as a superuser caller
    -- (issue 39, F4). Trusted: servers owned by a superuser, and, for a
    -- caller who is not one, servers owned by a role whose privileges it
    -- has (postgres_fdw makes it connect with credentials it was given).
    -- Without names, the others are skipped; a named one is refused.
    SELECT s.srvname, o.rolname INTO r
      FROM pg_foreign_server s
      JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
      JOIN pg_roles o ON o.oid = s.srvowner
     WHERE w.fdwname = 'postgres_fdw' AND s.srvname = ANY (servers)
       AND NOT (o.rolsuper OR (NOT caller_su AND pg_has_role(current_user, s.srvowner, 'USAGE')))
     ORDER BY s.srvname
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'permission denied to check the fleet through foreign server "%"', r.srvname
              USING ERRCODE = 'insufficient_privilege',
                    DETAIL = CASE WHEN caller_su
                        THEN format('Its owner, role "%s", is not a superuser, and decides where a connection through it goes and as which user; postgres_fdw asks a superuser for no password.', r.rolname)
                        ELSE format('Its owner, role "%s", is neither a superuser nor a role whose privileges you have.', r.rolname) END,
                    HINT = 'Have a superuser own the servers of the fleet (ALTER SERVER ... OWNER TO), or leave this one out.';
    END IF;

    -- Every trusted postgres_fdw server (or the ones named) with a user
    -- mapping. Only the server's owner (and superusers) see the message of
    -- an error: it can come from any host the server names.
    FOR r IN SELECT s.srvname, pg_has_role(current_user, s.srvowner, 'USAGE') AS owner
               FROM pg_foreign_server s
               JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
               JOIN pg_roles o ON o.oid = s.srvowner
              WHERE w.fdwname = 'postgres_fdw'
                AND (servers IS NULL OR s.srvname = ANY (servers))
                AND (o.rolsuper OR (NOT caller_su AND pg_has_role(current_user, s.srvowner, 'USAGE')))
              ORDER BY s.srvname
    LOOP
        ft := 'snowflake_fleet_' || md5(r.srvname);
        BEGIN
            EXECUTE format('CREATE FOREIGN TABLE pg_temp.%I (%s) SERVER %I OPTIONS (schema_name %L, table_name %L)',
                           ft, cols, r.srvname, ext_schema, 'snowflake_node');
            t0 := clock_timestamp();
            EXECUTE format('INSERT INTO snowflake_fleet_nodes
                SELECT %L, ''postgres_fdw'', worker_id, epoch, timestamp_bits, worker_bits,
                       sequence_bits, state, system_identifier, started_at,
                       extract(epoch FROM server_clock - ($1 + (clock_timestamp() - $1) / 2)) * 1000,
                       extract(epoch FROM clock_timestamp() - $1) * 1000 / 2, NULL
                  FROM pg_temp.%I', r.srvname, ft) USING t0;
            EXECUTE format('DROP FOREIGN TABLE pg_temp.%I', ft);
        EXCEPTION WHEN OTHERS THEN
            INSERT INTO snowflake_fleet_nodes (node, source, error)
            VALUES (r.srvname, 'postgres_fdw',
                    CASE WHEN r.owner THEN 'cannot read snowflake_node: ' || SQLERRM
                         ELSE format('cannot read snowflake_node (SQLSTATE %s; the message is shown to the server''s owner)', SQLSTATE) END);
        END;
    END LOOP;
    IF servers IS NOT NULL THEN
        INSERT INTO snowflake_fleet_nodes (node, source, error)
        SELECT s, 'postgres_fdw', 'no postgres_fdw server of this name'
          FROM unnest(servers) s
         WHERE NOT EXISTS (SELECT FROM pg_foreign_server f
                             JOIN pg_foreign_data_wrapper w ON w.oid = f.srvfdw
                            WHERE f.srvname = s AND w.fdwname = 'postgres_fdw');
    END IF;

    -- One row per server: the same server reached twice (the coordinator
    -- through Citus and through a foreign server, say) is one node.
    RETURN QUERY
    WITH nodes AS (
        SELECT string_agg(n.node, ' = ' ORDER BY n.source <> 'local', n.node) AS node,
               min(n.source) FILTER (WHERE n.source = 'local') AS is_local,
               string_agg(DISTINCT n.source, ', ') AS source,
               min(n.worker_id) AS worker_id, min(n.epoch) AS epoch,
               min(n.timestamp_bits) AS timestamp_bits, min(n.worker_bits) AS worker_bits,
               min(n.sequence_bits) AS sequence_bits, min(n.state) AS state,
               min(n.offset_ms) AS offset_ms, min(n.uncertainty_ms) AS uncertainty_ms,
               string_agg(n.error, '; ') AS error
          FROM snowflake_fleet_nodes n
         GROUP BY COALESCE(n.system_identifier::text || '/' || n.started_at::text, n.node)
    ), me AS (
        SELECT * FROM nodes WHERE is_local IS NOT NULL
    )
    SELECT s.node, s.source, s.worker_id, s.epoch, s.timestamp_bits, s.worker_bits,
           s.sequence_bits, round(s.offset_ms::numeric, 1)::double precision, s.state,
           NULLIF(concat_ws('; ',
               s.error,
               CASE WHEN s.error IS NULL AND s.worker_id IS NULL
                    THEN 'snowflake_id.worker_id is not set' END,
               (SELECT format('worker_id %s is also used by %s', s.worker_id,
                              string_agg(o.node, ', ' ORDER BY o.node))
                  FROM nodes o
                 WHERE o.worker_id = s.worker_id AND o.node <> s.node
                HAVING count(*) > 0),
               CASE WHEN s.error IS NULL
                     AND (s.epoch, s.timestamp_bits, s.worker_bits, s.sequence_bits)
                         IS DISTINCT FROM (me.epoch, me.timestamp_bits, me.worker_bits, me.sequence_bits)
                    THEN format('layout differs from %s: epoch %s, %s/%s/%s bits instead of %s, %s/%s/%s',
                                me.node, s.epoch, s.timestamp_bits, s.worker_bits, s.sequence_bits,
                                me.epoch, me.timestamp_bits, me.worker_bits, me.sequence_bits) END,
               CASE WHEN abs(s.offset_ms) - s.uncertainty_ms > skew_ms
                    THEN format('clock is %s ms %s %s (more than %s apart)',
                                round(abs(s.offset_ms)::numeric),
                                CASE WHEN s.offset_ms > 0 THEN 'ahead of' ELSE 'behind' END,
                                me.node, max_clock_skew) END,
               CASE WHEN s.state IS NOT NULL AND s.state <> 'ok'
                    THEN 'cannot mint: ' || s.state END), '')
      FROM nodes s, me
     ORDER BY s.is_local IS NULL, s.node;
END;
$fleet$;

COMMENT ON FUNCTION snowflake_fleet_check(interval, name[]) IS
'Check every node of the fleet (Citus nodes and postgres_fdw servers) for duplicate worker ids, differing layouts, clocks apart and nodes that cannot mint';

CREATE OR REPLACE FUNCTION snowflake_convert_progress_guard() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $guard$
BEGIN
    -- Before any @extschema@ name is looked up (docs/security.md, "The
    -- extension's schema"): every role that can create in the extension's
    -- schema must be a superuser, the caller, or (for a caller who is not
    -- a superuser) a role whose privileges the caller has; and the schema
    -- must still have the name this body was created with.
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension sfg_e
                     JOIN pg_catalog.pg_namespace sfg_n ON sfg_n.oid OPERATOR(pg_catalog.=) sfg_e.extnamespace
                    WHERE sfg_e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name
                      AND pg_catalog.quote_ident(sfg_n.nspname::pg_catalog.text) OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.text)
       OR EXISTS (SELECT FROM pg_catalog.pg_extension sfg_e
                    JOIN pg_catalog.pg_namespace sfg_n ON sfg_n.oid OPERATOR(pg_catalog.=) sfg_e.extnamespace
                   CROSS JOIN LATERAL (SELECT sfg_n.nspowner AS sfg_who
                                       UNION ALL
                                       SELECT sfg_a.grantee FROM pg_catalog.aclexplode(sfg_n.nspacl) sfg_a
                                        WHERE sfg_a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'::pg_catalog.text) sfg_c
                    LEFT JOIN pg_catalog.pg_roles sfg_o
                      ON sfg_o.oid OPERATOR(pg_catalog.=)
                         CASE WHEN sfg_c.sfg_who OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole::pg_catalog.oid
                              THEN (SELECT sfg_d.datdba FROM pg_catalog.pg_database sfg_d
                                     WHERE sfg_d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                              ELSE sfg_c.sfg_who END
                   WHERE sfg_e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name
                     AND NOT (COALESCE(sfg_o.rolsuper, false)
                              OR COALESCE(sfg_o.rolname OPERATOR(pg_catalog.=) CURRENT_USER, false)
                              OR (sfg_o.oid IS NOT NULL
                                  AND NOT (SELECT sfg_r.rolsuper FROM pg_catalog.pg_roles sfg_r
                                            WHERE sfg_r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
                                  AND pg_catalog.pg_has_role(sfg_o.oid, 'USAGE'::pg_catalog.text))))
    THEN
        RAISE EXCEPTION '%: the schema of snowflake_id is renamed, or a role whose rights you exceed can create in it', 'snowflake_convert_progress_guard'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'This function calls the extension''s functions by the schema''s name, so that role could make it run its own code with your rights.',
                  HINT = 'Install snowflake_id in a schema that only a superuser can create in (CREATE SCHEMA snowflake AUTHORIZATION postgres; CREATE EXTENSION snowflake_id SCHEMA snowflake), or run this as the schema''s owner. See docs/security.md, "The extension''s schema".';
    END IF;
    IF NOT @extschema@.snowflake_convert_progress_writable() THEN
        RAISE EXCEPTION 'snowflake_convert_progress can only be changed by the online conversion''s functions'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'Its rows tell the conversion what to do next; a row written by hand could make another role''s conversion act on the wrong objects.',
                  HINT = 'Use CALL snowflake_convert_online() to go on, or snowflake_convert_online_abandon() to back out.';
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END;
$guard$;
COMMENT ON FUNCTION snowflake_convert_progress_guard() IS
'Trigger of snowflake_convert_progress: only the online conversion''s own functions write it';

CREATE OR REPLACE FUNCTION snowflake_convert_online_columns(tbl regclass, col name)
RETURNS TABLE (rel regclass, rel_col name, new_col name)
LANGUAGE plpgsql STABLE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $cols$
#variable_conflict use_column
DECLARE
    r  record;
BEGIN
    -- Before any @extschema@ name is looked up (docs/security.md, "The
    -- extension's schema"): every role that can create in the extension's
    -- schema must be a superuser, the caller, or (for a caller who is not
    -- a superuser) a role whose privileges the caller has; and the schema
    -- must still have the name this body was created with.
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension sfg_e
                     JOIN pg_catalog.pg_namespace sfg_n ON sfg_n.oid OPERATOR(pg_catalog.=) sfg_e.extnamespace
                    WHERE sfg_e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name
                      AND pg_catalog.quote_ident(sfg_n.nspname::pg_catalog.text) OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.text)
       OR EXISTS (SELECT FROM pg_catalog.pg_extension sfg_e
                    JOIN pg_catalog.pg_namespace sfg_n ON sfg_n.oid OPERATOR(pg_catalog.=) sfg_e.extnamespace
                   CROSS JOIN LATERAL (SELECT sfg_n.nspowner AS sfg_who
                                       UNION ALL
                                       SELECT sfg_a.grantee FROM pg_catalog.aclexplode(sfg_n.nspacl) sfg_a
                                        WHERE sfg_a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'::pg_catalog.text) sfg_c
                    LEFT JOIN pg_catalog.pg_roles sfg_o
                      ON sfg_o.oid OPERATOR(pg_catalog.=)
                         CASE WHEN sfg_c.sfg_who OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole::pg_catalog.oid
                              THEN (SELECT sfg_d.datdba FROM pg_catalog.pg_database sfg_d
                                     WHERE sfg_d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                              ELSE sfg_c.sfg_who END
                   WHERE sfg_e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name
                     AND NOT (COALESCE(sfg_o.rolsuper, false)
                              OR COALESCE(sfg_o.rolname OPERATOR(pg_catalog.=) CURRENT_USER, false)
                              OR (sfg_o.oid IS NOT NULL
                                  AND NOT (SELECT sfg_r.rolsuper FROM pg_catalog.pg_roles sfg_r
                                            WHERE sfg_r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
                                  AND pg_catalog.pg_has_role(sfg_o.oid, 'USAGE'::pg_catalog.text))))
    THEN
        RAISE EXCEPTION '%: the schema of snowflake_id is renamed, or a role whose rights you exceed can create in it', 'snowflake_convert_online_columns'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'This function calls the extension''s functions by the schema''s name, so that role could make it run its own code with your rights.',
                  HINT = 'Install snowflake_id in a schema that only a superuser can create in (CREATE SCHEMA snowflake AUTHORIZATION postgres; CREATE EXTENSION snowflake_id SCHEMA snowflake), or run this as the schema''s owner. See docs/security.md, "The extension''s schema".';
    END IF;
    FOR r IN
        SELECT c.oid AS relid, a.attname, c.relowner
          FROM pg_class c
          JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped
         WHERE c.oid = $1 AND a.atttypid IN ('smallint'::regtype, 'integer'::regtype)
      UNION ALL
        SELECT k.conrelid, a.attname, c.relowner
          FROM pg_attribute ka
          JOIN pg_constraint k ON k.confrelid = ka.attrelid AND k.confkey = ARRAY[ka.attnum]
                              AND k.contype = 'f' AND k.conparentid = 0 AND cardinality(k.conkey) = 1
          JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1]
          JOIN pg_class c ON c.oid = k.conrelid
         WHERE ka.attrelid = $1 AND ka.attname = $2 AND ka.attnum > 0 AND NOT ka.attisdropped
           AND a.atttypid IN ('smallint'::regtype, 'integer'::regtype)
    LOOP
        IF NOT pg_has_role(current_user, r.relowner, 'USAGE') THEN
            RAISE EXCEPTION 'must be owner of table %', r.relid::regclass
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        rel := r.relid; rel_col := r.attname; new_col := @extschema@.snowflake_convert_new_name(r.attname);
        RETURN NEXT;
    END LOOP;
END;
$cols$;
COMMENT ON FUNCTION snowflake_convert_online_columns(regclass, name) IS
'The columns an online conversion widens, from the catalog, with their new names';

CREATE OR REPLACE FUNCTION snowflake_convert_online_indexes(tbl regclass, col name)
RETURNS SETOF text
LANGUAGE plpgsql STABLE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $idx$
DECLARE
    p     record;
    ix    record;
    keys  text[];
    incl  text[];
    k     integer;
    ixname text;
    def   text;
    have  record;
BEGIN
    -- Before any @extschema@ name is looked up (docs/security.md, "The
    -- extension's schema"): every role that can create in the extension's
    -- schema must be a superuser, the caller, or (for a caller who is not
    -- a superuser) a role whose privileges the caller has; and the schema
    -- must still have the name this body was created with.
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension sfg_e
                     JOIN pg_catalog.pg_namespace sfg_n ON sfg_n.oid OPERATOR(pg_catalog.=) sfg_e.extnamespace
                    WHERE sfg_e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name
                      AND pg_catalog.quote_ident(sfg_n.nspname::pg_catalog.text) OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.text)
       OR EXISTS (SELECT FROM pg_catalog.pg_extension sfg_e
                    JOIN pg_catalog.pg_namespace sfg_n ON sfg_n.oid OPERATOR(pg_catalog.=) sfg_e.extnamespace
                   CROSS JOIN LATERAL (SELECT sfg_n.nspowner AS sfg_who
                                       UNION ALL
                                       SELECT sfg_a.grantee FROM pg_catalog.aclexplode(sfg_n.nspacl) sfg_a
                                        WHERE sfg_a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'::pg_catalog.text) sfg_c
                    LEFT JOIN pg_catalog.pg_roles sfg_o
                      ON sfg_o.oid OPERATOR(pg_catalog.=)
                         CASE WHEN sfg_c.sfg_who OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole::pg_catalog.oid
                              THEN (SELECT sfg_d.datdba FROM pg_catalog.pg_database sfg_d
                                     WHERE sfg_d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                              ELSE sfg_c.sfg_who END
                   WHERE sfg_e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name
                     AND NOT (COALESCE(sfg_o.rolsuper, false)
                              OR COALESCE(sfg_o.rolname OPERATOR(pg_catalog.=) CURRENT_USER, false)
                              OR (sfg_o.oid IS NOT NULL
                                  AND NOT (SELECT sfg_r.rolsuper FROM pg_catalog.pg_roles sfg_r
                                            WHERE sfg_r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
                                  AND pg_catalog.pg_has_role(sfg_o.oid, 'USAGE'::pg_catalog.text))))
    THEN
        RAISE EXCEPTION '%: the schema of snowflake_id is renamed, or a role whose rights you exceed can create in it', 'snowflake_convert_online_indexes'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'This function calls the extension''s functions by the schema''s name, so that role could make it run its own code with your rights.',
                  HINT = 'Install snowflake_id in a schema that only a superuser can create in (CREATE SCHEMA snowflake AUTHORIZATION postgres; CREATE EXTENSION snowflake_id SCHEMA snowflake), or run this as the schema''s owner. See docs/security.md, "The extension''s schema".';
    END IF;
    FOR p IN SELECT * FROM @extschema@.snowflake_convert_progress g
              WHERE g.tbl = $1 AND g.col = $2 ORDER BY g.rel = g.tbl DESC, g.rel::text, g.rel_col
    LOOP
        FOR ix IN
            SELECT i.indexrelid, i.indisunique, i.indnkeyatts, i.indnatts, am.amname, ic.relnamespace,
                   pg_get_expr(i.indpred, i.indrelid) AS pred
              FROM pg_index i
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attname = p.rel_col
              JOIN pg_class ic ON ic.oid = i.indexrelid
              JOIN pg_am am ON am.oid = ic.relam
             WHERE i.indrelid = p.rel AND a.attnum = ANY (i.indkey::int2[])
             ORDER BY ic.relname
        LOOP
            keys := '{}'; incl := '{}';
            FOR k IN 1 .. ix.indnatts LOOP
                -- Each column as it is, the old one renamed to the new.
                def := pg_get_indexdef(ix.indexrelid, k, true);
                IF def = quote_ident(p.rel_col) THEN
                    def := quote_ident(p.new_col);
                END IF;
                IF k <= ix.indnkeyatts THEN
                    keys := keys || def;
                ELSE
                    incl := incl || def;
                END IF;
            END LOOP;
            ixname := format('%I.%I', (SELECT ns.nspname FROM pg_namespace ns WHERE ns.oid = ix.relnamespace),
                             'snowflake_new_' || ix.indexrelid);
            SELECT c.oid, i.indisvalid INTO have
              FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
             WHERE c.oid = to_regclass(ixname);
            CONTINUE WHEN have.indisvalid;
            IF have.oid IS NOT NULL THEN
                RETURN NEXT format('DROP INDEX CONCURRENTLY IF EXISTS %s', ixname);
            END IF;
            RETURN NEXT format('CREATE %sINDEX CONCURRENTLY IF NOT EXISTS %s ON %s USING %I (%s)%s%s',
                CASE WHEN ix.indisunique THEN 'UNIQUE ' ELSE '' END,
                quote_ident('snowflake_new_' || ix.indexrelid), p.rel, ix.amname,
                array_to_string(keys, ', '),
                CASE WHEN cardinality(incl) > 0 THEN format(' INCLUDE (%s)', array_to_string(incl, ', ')) ELSE '' END,
                CASE WHEN ix.pred IS NOT NULL THEN format(' WHERE %s', ix.pred) ELSE '' END);
        END LOOP;
    END LOOP;
END;
$idx$;
COMMENT ON FUNCTION snowflake_convert_online_indexes(regclass, name) IS
'The CREATE INDEX CONCURRENTLY statements snowflake_convert_online() still needs; run them with \gexec';

CREATE OR REPLACE FUNCTION snowflake_convert_online_step(tbl regclass, col name, batch_pages integer, lock_wait interval)
RETURNS text
LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    -- Bound by OID here (docs/security.md, "The extension's schema").
    SELECT @extschema@.snowflake_convert_online_run_step(tbl::pg_catalog.oid, col::pg_catalog.text,
                                                         batch_pages, lock_wait);
END;
COMMENT ON FUNCTION snowflake_convert_online_step(regclass, name, integer, interval) IS
'One unit of work of snowflake_convert_online(); the procedure commits after each';

CREATE OR REPLACE FUNCTION snowflake_convert_online_abandon_body(tbl regclass, col name)
RETURNS TABLE (action text, object text)
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $abandon$
#variable_conflict use_column
DECLARE
    p     record;
    ph    text;
    rels  regclass[];
    news  name[];
BEGIN
    -- Before any @extschema@ name is looked up (docs/security.md, "The
    -- extension's schema"): every role that can create in the extension's
    -- schema must be a superuser, the caller, or (for a caller who is not
    -- a superuser) a role whose privileges the caller has; and the schema
    -- must still have the name this body was created with.
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension sfg_e
                     JOIN pg_catalog.pg_namespace sfg_n ON sfg_n.oid OPERATOR(pg_catalog.=) sfg_e.extnamespace
                    WHERE sfg_e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name
                      AND pg_catalog.quote_ident(sfg_n.nspname::pg_catalog.text) OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.text)
       OR EXISTS (SELECT FROM pg_catalog.pg_extension sfg_e
                    JOIN pg_catalog.pg_namespace sfg_n ON sfg_n.oid OPERATOR(pg_catalog.=) sfg_e.extnamespace
                   CROSS JOIN LATERAL (SELECT sfg_n.nspowner AS sfg_who
                                       UNION ALL
                                       SELECT sfg_a.grantee FROM pg_catalog.aclexplode(sfg_n.nspacl) sfg_a
                                        WHERE sfg_a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'::pg_catalog.text) sfg_c
                    LEFT JOIN pg_catalog.pg_roles sfg_o
                      ON sfg_o.oid OPERATOR(pg_catalog.=)
                         CASE WHEN sfg_c.sfg_who OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole::pg_catalog.oid
                              THEN (SELECT sfg_d.datdba FROM pg_catalog.pg_database sfg_d
                                     WHERE sfg_d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                              ELSE sfg_c.sfg_who END
                   WHERE sfg_e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name
                     AND NOT (COALESCE(sfg_o.rolsuper, false)
                              OR COALESCE(sfg_o.rolname OPERATOR(pg_catalog.=) CURRENT_USER, false)
                              OR (sfg_o.oid IS NOT NULL
                                  AND NOT (SELECT sfg_r.rolsuper FROM pg_catalog.pg_roles sfg_r
                                            WHERE sfg_r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
                                  AND pg_catalog.pg_has_role(sfg_o.oid, 'USAGE'::pg_catalog.text))))
    THEN
        RAISE EXCEPTION '%: the schema of snowflake_id is renamed, or a role whose rights you exceed can create in it', 'snowflake_convert_online_abandon_body'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'This function calls the extension''s functions by the schema''s name, so that role could make it run its own code with your rights.',
                  HINT = 'Install snowflake_id in a schema that only a superuser can create in (CREATE SCHEMA snowflake AUTHORIZATION postgres; CREATE EXTENSION snowflake_id SCHEMA snowflake), or run this as the schema''s owner. See docs/security.md, "The extension''s schema".';
    END IF;
    SELECT g.phase INTO ph FROM @extschema@.snowflake_convert_progress g
     WHERE g.tbl = $1 AND g.col = $2 AND g.rel = $1 AND g.rel_col = $2;
    IF ph IS NULL THEN
        RAISE EXCEPTION 'no online conversion of column "%" of relation "%" is recorded', $2, $1
            USING ERRCODE = 'undefined_object',
                  HINT = 'SELECT * FROM snowflake_convert_status lists the conversions you can see.';
    END IF;
    IF NOT pg_has_role(current_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = $1), 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table %', $1 USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF ph <> 'done' THEN
        -- Only what both the record and the catalog name: the columns this
        -- conversion widens (snowflake_convert_online_columns, which also
        -- checks that the caller owns every table), under their new names.
        -- Referencing columns first: their foreign keys hold on to the new
        -- key column's index.
        SELECT array_agg(c.rel ORDER BY c.rel = $1 AND c.rel_col = $2, c.rel::text, c.rel_col),
               array_agg(c.new_col ORDER BY c.rel = $1 AND c.rel_col = $2, c.rel::text, c.rel_col)
          INTO rels, news
          FROM (SELECT x.rel, x.rel_col, x.new_col FROM @extschema@.snowflake_convert_online_columns($1, $2) x
                INTERSECT
                SELECT g.rel, g.rel_col, g.new_col FROM @extschema@.snowflake_convert_progress g
                 WHERE g.tbl = $1 AND g.col = $2) c;
        FOR p IN SELECT DISTINCT r.rel FROM unnest(rels) r(rel) ORDER BY r.rel LOOP
            -- Only the conversion's own trigger.
            CONTINUE WHEN NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = p.rel AND t.tgname = 'snowflake_convert_sync'
                                         AND t.tgfoid = '@extschema@.snowflake_convert_sync()'::regprocedure);
            EXECUTE format('DROP TRIGGER snowflake_convert_sync ON %s', p.rel);
            action := 'drop trigger'; object := format('snowflake_convert_sync on %s', p.rel);
            RETURN NEXT;
        END LOOP;
        FOR p IN SELECT r.rel, r.new_col FROM unnest(rels, news) WITH ORDINALITY r(rel, new_col, k) ORDER BY r.k LOOP
            CONTINUE WHEN NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = p.rel
                                        AND a.attname = p.new_col AND NOT a.attisdropped);
            EXECUTE format('ALTER TABLE %s DROP COLUMN %I', p.rel, p.new_col);
            action := 'drop column'; object := format('%s.%I', p.rel, p.new_col);
            RETURN NEXT;
        END LOOP;
    END IF;
    DELETE FROM @extschema@.snowflake_convert_progress g WHERE g.tbl = $1 AND g.col = $2;
    action := 'forget'; object := format('%s.%I', $1, $2);
    RETURN NEXT;
END;
$abandon$;
COMMENT ON FUNCTION snowflake_convert_online_abandon_body(regclass, name) IS
'The body of snowflake_convert_online_abandon(), which alone may let it write the progress';

CREATE OR REPLACE FUNCTION snowflake_convert_online_abandon(tbl regclass, col name)
RETURNS TABLE (action text, object text)
LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    -- Bound by OID here (docs/security.md, "The extension's schema").
    SELECT r.action, r.object
      FROM @extschema@.snowflake_convert_online_run_abandon(tbl::pg_catalog.oid, col::pg_catalog.text) r;
END;
COMMENT ON FUNCTION snowflake_convert_online_abandon(regclass, name) IS
'Back out of an online conversion that has not swapped yet; after the swap, only forget its record';

-- snowflake_convert_column(tbl regclass, col name) and
-- snowflake_convert_plan(tbl regclass, col name): see src/convert/convert_column.rs
-- for what they do and why they are PL/pgSQL. Included in the install
-- script by extension_sql_file!; edit it here, then regenerate
-- sql/snowflake_id--<version>.sql (the lint says how).

-- The one implementation of both: the steps of a conversion, carried out
-- unless dry_run, each with the relation it locks.
CREATE OR REPLACE FUNCTION snowflake_convert_column_steps(tbl regclass, col name, dry_run boolean)
RETURNS TABLE (step integer, action text, object text, detail text, relid oid)
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $convert$
#variable_conflict use_column
DECLARE
    target     regprocedure;
    target_for regprocedure;
    rel        record;
    att        record;
    def        record;
    kind       text;
    seq        regclass;
    seq_name   text;
    seq_owned  boolean := false;
    adopt_seq  boolean := false;  -- keep the column's generator, its sequence adopted (issues 57, 63)
    seq_shared boolean := false;  -- other objects use the sequence
    ch_rel     oid[] := '{}';
    ch_att     name[] := '{}';
    ch_type    regtype[] := '{}';
    ch_via     text[] := '{}';
    w          record;
    v          record;
    ru         record;
    drops      text[] := '{}';
    creates    text[] := '{}';
    view_names text[] := '{}';
    view_oids  oid[] := '{}';
    s          text;
    i          integer;
    n          integer := 0;
    colname    text;
    max_val    bigint;
    next_id    bigint;
BEGIN
    -- Before any @extschema@ name is looked up (docs/security.md, "The
    -- extension's schema"): every role that can create in the extension's
    -- schema must be a superuser, the caller, or (for a caller who is not
    -- a superuser) a role whose privileges the caller has; and the schema
    -- must still have the name this body was created with.
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension sfg_e
                     JOIN pg_catalog.pg_namespace sfg_n ON sfg_n.oid OPERATOR(pg_catalog.=) sfg_e.extnamespace
                    WHERE sfg_e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name
                      AND pg_catalog.quote_ident(sfg_n.nspname::pg_catalog.text) OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.text)
       OR EXISTS (SELECT FROM pg_catalog.pg_extension sfg_e
                    JOIN pg_catalog.pg_namespace sfg_n ON sfg_n.oid OPERATOR(pg_catalog.=) sfg_e.extnamespace
                   CROSS JOIN LATERAL (SELECT sfg_n.nspowner AS sfg_who
                                       UNION ALL
                                       SELECT sfg_a.grantee FROM pg_catalog.aclexplode(sfg_n.nspacl) sfg_a
                                        WHERE sfg_a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'::pg_catalog.text) sfg_c
                    LEFT JOIN pg_catalog.pg_roles sfg_o
                      ON sfg_o.oid OPERATOR(pg_catalog.=)
                         CASE WHEN sfg_c.sfg_who OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole::pg_catalog.oid
                              THEN (SELECT sfg_d.datdba FROM pg_catalog.pg_database sfg_d
                                     WHERE sfg_d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                              ELSE sfg_c.sfg_who END
                   WHERE sfg_e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name
                     AND NOT (COALESCE(sfg_o.rolsuper, false)
                              OR COALESCE(sfg_o.rolname OPERATOR(pg_catalog.=) CURRENT_USER, false)
                              OR (sfg_o.oid IS NOT NULL
                                  AND NOT (SELECT sfg_r.rolsuper FROM pg_catalog.pg_roles sfg_r
                                            WHERE sfg_r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
                                  AND pg_catalog.pg_has_role(sfg_o.oid, 'USAGE'::pg_catalog.text))))
    THEN
        RAISE EXCEPTION '%: the schema of snowflake_id is renamed, or a role whose rights you exceed can create in it', 'snowflake_convert_column_steps'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'This function calls the extension''s functions by the schema''s name, so that role could make it run its own code with your rights.',
                  HINT = 'Install snowflake_id in a schema that only a superuser can create in (CREATE SCHEMA snowflake AUTHORIZATION postgres; CREATE EXTENSION snowflake_id SCHEMA snowflake), or run this as the schema''s owner. See docs/security.md, "The extension''s schema".';
    END IF;
    target := '@extschema@.snowflake_nextval()'::regprocedure;
    target_for := '@extschema@.snowflake_nextval_for(regclass)'::regprocedure;
    SELECT c.oid, c.relkind, c.relispartition, c.relowner INTO rel
      FROM pg_class c WHERE c.oid = tbl;
    IF rel.relkind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION '"%" is not a table', tbl
            USING ERRCODE = 'wrong_object_type';
    END IF;
    IF rel.relispartition THEN
        RAISE EXCEPTION 'cannot convert a column of partition "%"', tbl
            USING ERRCODE = 'wrong_object_type',
                  HINT = format('Convert the column of the partitioned table "%s"; its partitions follow.',
                                pg_partition_root(tbl));
    END IF;
    IF NOT pg_has_role(current_user, rel.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table %', tbl
            USING ERRCODE = 'insufficient_privilege';
    END IF;

    SELECT a.attnum, a.attname, a.atttypid::regtype AS typ, a.attidentity, a.attgenerated, a.attinhcount
      INTO att
      FROM pg_attribute a
     WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column "%" of relation "%" does not exist', col, tbl
            USING ERRCODE = 'undefined_column';
    END IF;
    colname := format('%s.%I', tbl, col);
    IF att.typ NOT IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype) THEN
        RAISE EXCEPTION 'column "%" of relation "%" is of type %, not an integer type', col, tbl, att.typ
            USING ERRCODE = 'datatype_mismatch',
                  HINT = 'Only smallint, integer and bigint key columns can be converted to snowflake IDs.';
    END IF;
    IF att.attgenerated <> '' THEN
        RAISE EXCEPTION 'column "%" of relation "%" is a generated column', col, tbl
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF att.attinhcount > 0 THEN
        RAISE EXCEPTION 'cannot convert inherited column "%" of relation "%"', col, tbl
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'Convert the column of the parent table.';
    END IF;

    -- What generates the column today?
    SELECT ad.oid, pg_get_expr(ad.adbin, ad.adrelid) AS expr INTO def
      FROM pg_attrdef ad WHERE ad.adrelid = tbl AND ad.adnum = att.attnum;
    IF att.attidentity <> '' THEN
        kind := 'identity';
        seq := pg_get_serial_sequence(tbl::text, col)::regclass;
        adopt_seq := true;
    ELSIF def.oid IS NULL THEN
        kind := 'none';
    ELSIF def.expr = format('%s()', target::regproc)
          OR def.expr IN (SELECT format('%s(%L::regclass)', target_for::regproc, d.refobjid::regclass)
                            FROM pg_depend d JOIN pg_class sc ON sc.oid = d.refobjid AND sc.relkind = 'S'
                           WHERE d.classid = 'pg_attrdef'::regclass AND d.objid = def.oid
                             AND d.refclassid = 'pg_class'::regclass) THEN
        -- snowflake_nextval(), or snowflake_nextval_for(seq) of an
        -- adopted sequence (issue 57)
        kind := 'snowflake';
    ELSE
        SELECT d.refobjid::regclass INTO seq
          FROM pg_depend d JOIN pg_class sc ON sc.oid = d.refobjid AND sc.relkind = 'S'
         WHERE d.classid = 'pg_attrdef'::regclass AND d.objid = def.oid
           AND d.refclassid = 'pg_class'::regclass;
        IF seq IS NULL OR def.expr !~ '^nextval\(' THEN
            RAISE EXCEPTION 'column "%" of relation "%" has a default that is not a sequence: %', col, tbl, def.expr
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Only serial, IDENTITY and nextval() defaults are converted. Drop the default first to convert the column anyway.';
        END IF;
        kind := 'nextval';
        seq_owned := EXISTS (
            SELECT 1 FROM pg_depend d
             WHERE d.classid = 'pg_class'::regclass AND d.objid = seq
               AND d.refobjid = tbl AND d.refobjsubid = att.attnum AND d.deptype = 'a');
        -- Another default, or anything else, still using the sequence
        -- keeps it as it is (the dry run must predict what DROP SEQUENCE
        -- would do). This column's defaults, in the table and in every
        -- partition or child, are not others.
        seq_shared := EXISTS (
               SELECT 1 FROM pg_depend d
                WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = seq
                  AND d.deptype = 'n'
                  AND NOT (d.classid = 'pg_attrdef'::regclass AND d.objid IN (
                      WITH RECURSIVE tree(relid) AS (
                          SELECT tbl::oid
                        UNION
                          SELECT i.inhrelid FROM pg_inherits i JOIN tree ON i.inhparent = tree.relid)
                      SELECT ad.oid FROM tree
                        JOIN pg_attribute a2 ON a2.attrelid = tree.relid AND a2.attname = col
                        JOIN pg_attrdef ad ON ad.adrelid = tree.relid AND ad.adnum = a2.attnum)));
        -- A bigserial's own sequence, used by nothing else, stays with its
        -- default exactly as the application made it (issue 63: the
        -- catalog is the application's), adopted below.
        -- (Quoted as pg_get_expr() quotes a constant: never E'', a
        -- backslash doubled only without standard_conforming_strings.)
        adopt_seq := seq_owned AND NOT seq_shared
                     AND def.expr = 'nextval(''' || replace(CASE WHEN current_setting('standard_conforming_strings') = 'off'
                                                                  THEN replace(seq::text, chr(92), chr(92) || chr(92))
                                                                  ELSE seq::text END, '''', '''''') || '''::regclass)';
    END IF;
    -- An unlogged sequence is not adopted (a crash puts it back as its
    -- init fork holds it): a conversion that would keep and adopt one is
    -- refused before it changes anything (issue 63's fifth review: the
    -- offline one failed at the end and rolled back, the online one
    -- stopped at its swap).
    IF adopt_seq AND EXISTS (SELECT FROM pg_class sc WHERE sc.oid = seq AND sc.relpersistence = 'u') THEN
        RAISE EXCEPTION 'cannot convert column "%" of unlogged relation "%"', col, tbl
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = format('Its sequence %s is unlogged, and an unlogged sequence cannot be adopted: a crash would put it back as it was first written.', seq),
                  HINT = format('Make the table logged first: ALTER TABLE %s SET LOGGED.', tbl);
    END IF;

    -- The column and every foreign-key column referencing it, transitively.
    FOR w IN
        WITH RECURSIVE cols(relid, attnum, via) AS (
            SELECT tbl::oid, att.attnum, NULL::text COLLATE "C"
          UNION
            SELECT c.conrelid, c.conkey[k], format('foreign key %I', c.conname)
              FROM cols
              JOIN pg_constraint c ON c.contype = 'f' AND c.conparentid = 0
                                  AND c.confrelid = cols.relid
              CROSS JOIN LATERAL generate_subscripts(c.confkey, 1) k
             WHERE c.confkey[k] = cols.attnum)
        SELECT cols.relid, a.attname, a.atttypid::regtype AS typ, cols.via, cl.relowner, cl.relispartition
          FROM cols
          JOIN pg_attribute a ON a.attrelid = cols.relid AND a.attnum = cols.attnum
          JOIN pg_class cl ON cl.oid = cols.relid
         ORDER BY cols.via NULLS FIRST, cols.relid, a.attname
    LOOP
        CONTINUE WHEN w.typ NOT IN ('smallint'::regtype, 'integer'::regtype);
        CONTINUE WHEN EXISTS (SELECT 1 FROM unnest(ch_rel, ch_att) u(r, a)
                               WHERE u.r = w.relid AND u.a = w.attname);
        IF NOT pg_has_role(current_user, w.relowner, 'USAGE') THEN
            RAISE EXCEPTION 'must be owner of table %', w.relid::regclass
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = format('Column %s.%I references %s through a %s and must be widened with it.',
                                      w.relid::regclass, w.attname, colname, w.via);
        END IF;
        IF w.relispartition THEN
            RAISE EXCEPTION 'cannot widen column "%" of partition "%"', w.attname, w.relid::regclass
                USING ERRCODE = 'wrong_object_type',
                      DETAIL = format('It references %s through a %s of the partition itself.', colname, w.via);
        END IF;
        ch_rel := ch_rel || w.relid;
        ch_att := ch_att || w.attname;
        ch_type := ch_type || w.typ;
        ch_via := ch_via || w.via;
    END LOOP;

    -- Rules that use a column being widened (other than a view's own
    -- query, handled below): PostgreSQL cannot change the type under them.
    SELECT r.rulename, r.ev_class::regclass AS on_rel, u.attname, t.relid::regclass AS col_rel INTO ru
      FROM unnest(ch_rel, ch_att) AS u(root, attname)
      CROSS JOIN LATERAL (SELECT u.root AS relid
                          UNION SELECT pt.relid FROM pg_partition_tree(u.root) pt) t
      JOIN pg_attribute a ON a.attrelid = t.relid AND a.attname = u.attname
      JOIN pg_depend d ON d.refclassid = 'pg_class'::regclass AND d.refobjid = t.relid
                      AND d.refobjsubid = a.attnum AND d.classid = 'pg_rewrite'::regclass
      JOIN pg_rewrite r ON r.oid = d.objid
     WHERE r.rulename <> '_RETURN'
     ORDER BY r.ev_class::regclass::text, r.rulename
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot convert column "%" of relation "%" because rule "%" on relation "%" depends on it', col, tbl, ru.rulename, ru.on_rel
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = format('The rule uses column %s.%I, which must be widened to bigint.', ru.col_rel, ru.attname),
                  HINT = 'Drop the rule, convert the column, and create the rule again.';
    END IF;

    -- Views on the columns being widened (and views on those views).
    FOR v IN
        WITH RECURSIVE widened(relid, attnum) AS (
            SELECT t.relid, a.attnum
              FROM unnest(ch_rel, ch_att) AS u(root, attname)
              CROSS JOIN LATERAL (SELECT u.root AS relid
                                  UNION SELECT pt.relid FROM pg_partition_tree(u.root) pt) t
              JOIN pg_attribute a ON a.attrelid = t.relid AND a.attname = u.attname),
        deps(view_oid, depth) AS (
            SELECT DISTINCT r.ev_class, 1
              FROM pg_depend d
              JOIN pg_rewrite r ON r.oid = d.objid
              JOIN widened ON widened.relid = d.refobjid AND widened.attnum = d.refobjsubid
             WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass
               AND r.ev_class <> d.refobjid
          UNION ALL
            SELECT r.ev_class, deps.depth + 1
              FROM deps
              JOIN pg_depend d ON d.refobjid = deps.view_oid AND d.classid = 'pg_rewrite'::regclass
                              AND d.refclassid = 'pg_class'::regclass
              JOIN pg_rewrite r ON r.oid = d.objid
             WHERE r.ev_class <> deps.view_oid AND deps.depth < 64)
        SELECT c.oid, c.oid::regclass AS name, c.relkind, c.relowner, c.relacl, c.reloptions, max(deps.depth) AS depth
          FROM deps JOIN pg_class c ON c.oid = deps.view_oid
         GROUP BY c.oid
         ORDER BY max(deps.depth), c.oid::regclass::text
    LOOP
        IF v.relkind <> 'v' THEN
            RAISE EXCEPTION 'cannot convert column "%" of relation "%" because materialized view "%" depends on it', col, tbl, v.name
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'Drop the materialized view, convert the column, and create the view again.';
        END IF;
        IF EXISTS (SELECT 1 FROM pg_rewrite r WHERE r.ev_class = v.oid AND r.rulename <> '_RETURN') THEN
            RAISE EXCEPTION 'cannot convert column "%" of relation "%" because view "%" has rules', col, tbl, v.name
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'Drop the rules on the view, convert the column, and create them again.';
        END IF;
        IF NOT pg_has_role(current_user, v.relowner, 'USAGE') THEN
            RAISE EXCEPTION 'must be owner of view %', v.name
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = format('The view depends on %s and must be recreated after the column is widened.', colname);
        END IF;
        drops := format('DROP VIEW %s', v.name) || drops;
        view_names := view_names || v.name::text;
        view_oids := view_oids || v.oid;
        creates := creates || format('CREATE VIEW %s%s AS %s', v.name,
                   CASE WHEN v.reloptions IS NOT NULL
                        THEN format(' WITH (%s)', array_to_string(v.reloptions, ', ')) ELSE '' END,
                   rtrim(pg_get_viewdef(v.oid), ';'));
        creates := creates || format('ALTER VIEW %s OWNER TO %I', v.name, pg_get_userbyid(v.relowner));
        IF v.relacl IS NOT NULL THEN
            creates := creates || format('REVOKE ALL ON %s FROM PUBLIC', v.name);
            creates := creates || ARRAY(
                SELECT format('GRANT %s ON %s TO %s%s', x.privilege_type, v.name,
                              CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(x.grantee)) END,
                              CASE WHEN x.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)
                  FROM aclexplode(v.relacl) x
                 WHERE x.grantee <> v.relowner
                 ORDER BY x.grantee, x.privilege_type);
        END IF;
        creates := creates || ARRAY(
            SELECT format('ALTER VIEW %s ALTER COLUMN %I SET DEFAULT %s', v.name, a.attname,
                          pg_get_expr(ad.adbin, ad.adrelid))
              FROM pg_attrdef ad JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum
             WHERE ad.adrelid = v.oid ORDER BY a.attnum);
        creates := creates || ARRAY(
            SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t
             WHERE t.tgrelid = v.oid AND NOT t.tgisinternal ORDER BY t.tgname);
        creates := creates || ARRAY(
            SELECT format('COMMENT ON VIEW %s IS %L', v.name, ds.description)
              FROM pg_description ds
             WHERE ds.classoid = 'pg_class'::regclass AND ds.objoid = v.oid AND ds.objsubid = 0);
        creates := creates || ARRAY(
            SELECT format('COMMENT ON COLUMN %s.%I IS %L', v.name, a.attname, ds.description)
              FROM pg_description ds JOIN pg_attribute a ON a.attrelid = ds.objoid AND a.attnum = ds.objsubid
             WHERE ds.classoid = 'pg_class'::regclass AND ds.objoid = v.oid AND ds.objsubid > 0
             ORDER BY a.attnum);
    END LOOP;

    IF kind = 'snowflake' AND cardinality(ch_rel) = 0 THEN
        n := n + 1;
        RETURN QUERY SELECT n, 'unchanged'::text, colname, format('already DEFAULT %s', def.expr), tbl::oid;
    END IF;

    -- From here on, change things.
    FOREACH s IN ARRAY drops LOOP
        IF NOT dry_run THEN EXECUTE s; END IF;
    END LOOP;
    FOR i IN 1 .. cardinality(view_names) LOOP
        n := n + 1;
        RETURN QUERY SELECT n, 'drop view'::text, view_names[i], 'recreated below'::text, view_oids[i];
    END LOOP;

    IF kind = 'identity' THEN
        -- It stays an identity (GENERATED ALWAYS still refuses a key of
        -- the application's own), over its own sequence: widening the
        -- column widens the sequence, which is adopted below (issue 63).
        seq_name := seq::text;
        adopt_seq := true;
    ELSIF kind = 'nextval' AND adopt_seq THEN
        seq_name := seq::text;
    ELSIF kind = 'nextval' THEN
        IF NOT dry_run THEN
            EXECUTE format('ALTER TABLE %s ALTER COLUMN %I DROP DEFAULT', tbl, col);
        END IF;
        n := n + 1;
        RETURN QUERY SELECT n, 'drop default'::text, colname, def.expr, tbl::oid;
        n := n + 1;
        RETURN QUERY SELECT n, 'keep sequence'::text, seq::text,
            CASE WHEN NOT seq_owned THEN format('not owned by %s', colname)
                 WHEN seq_shared THEN 'other objects still use it'
                 ELSE format('the default is not nextval() of it alone: %s', def.expr) END,
            seq::oid;
    END IF;

    FOR i IN 1 .. cardinality(ch_rel) LOOP
        IF NOT dry_run THEN
            -- As the table's owner: the rewrite evaluates the owner's CHECK
            -- constraints, generated columns and index expressions.
            PERFORM @extschema@.snowflake_convert_as_owner(ch_rel[i],
                format('ALTER TABLE %s ALTER COLUMN %I TYPE bigint', ch_rel[i]::regclass, ch_att[i]));
        END IF;
        n := n + 1;
        RETURN QUERY SELECT n, 'widen'::text, format('%s.%I', ch_rel[i]::regclass, ch_att[i]),
            format('%s -> bigint%s', ch_type[i], CASE WHEN ch_via[i] IS NOT NULL THEN format(' (%s)', ch_via[i]) ELSE '' END),
            ch_rel[i];
    END LOOP;

    IF kind <> 'snowflake' AND NOT adopt_seq THEN
        IF NOT dry_run THEN
            EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %s()', tbl, col, target::regproc);
        END IF;
        n := n + 1;
        RETURN QUERY SELECT n, 'set default'::text, colname, format('%s()', target::regproc), tbl::oid;
    END IF;

    IF adopt_seq THEN
        IF NOT dry_run THEN
            IF (SELECT q.seqtypid FROM pg_sequence q WHERE q.seqrelid = seq) <> 'bigint'::regtype THEN
                PERFORM @extschema@.snowflake_convert_as_owner(seq, format('ALTER SEQUENCE %s AS bigint', seq));
            END IF;
            PERFORM @extschema@.snowflake_convert_adopt_sequence(seq);
        END IF;
        n := n + 1;
        RETURN QUERY SELECT n, 'adopt sequence'::text, seq_name,
            format('%s; nextval() of it returns Snowflake IDs',
                   CASE WHEN kind = 'identity'
                        THEN format('of identity %s (GENERATED %s), which stays', colname,
                                    CASE att.attidentity WHEN 'a' THEN 'ALWAYS' ELSE 'BY DEFAULT' END)
                        ELSE format('owned by %s, whose default %s stays', colname, def.expr) END),
            seq::oid;
    END IF;

    FOREACH s IN ARRAY creates LOOP
        IF NOT dry_run THEN EXECUTE s; END IF;
    END LOOP;
    FOR i IN 1 .. cardinality(view_names) LOOP
        n := n + 1;
        RETURN QUERY SELECT n, 'recreate view'::text, view_names[i],
            'same definition, options, owner, grants, comments and triggers'::text, view_oids[i];
    END LOOP;

    -- New IDs are larger than every existing value by construction (the
    -- generator mints from the current time); check it anyway, because a
    -- table may already hold IDs from a worker whose clock ran ahead.
    -- As the owner too: a table that forces row-level security runs the
    -- owner's policies.
    max_val := @extschema@.snowflake_convert_as_owner(tbl, format('SELECT max(%I)::bigint FROM %s', col, tbl));
    next_id := @extschema@.snowflake_nextval();
    IF max_val IS NOT NULL AND max_val >= next_id THEN
        RAISE EXCEPTION 'existing values of column "%" of relation "%" are not below the next snowflake ID', col, tbl
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('The largest existing value is %s; the next ID would be %s.', max_val, next_id),
                  HINT = 'Re-key the existing rows with snowflake_compose() first (see "Sharding and migrations" in the README), or check the clocks of the servers that minted them.';
    END IF;
    n := n + 1;
    RETURN QUERY SELECT n, 'check'::text, colname,
        CASE WHEN max_val IS NULL THEN format('table is empty; next ID %s', next_id)
             ELSE format('largest existing value %s < next ID %s', max_val, next_id) END,
        tbl::oid;
END;
$convert$;

COMMENT ON FUNCTION snowflake_convert_column_steps(regclass, name, boolean) IS
'The steps of snowflake_convert_column() and snowflake_convert_plan(); carried out unless dry_run';

CREATE OR REPLACE FUNCTION snowflake_convert_column(tbl regclass, col name)
RETURNS TABLE (step integer, action text, object text, detail text)
LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
    -- Bound by OID here (docs/security.md, "The extension's schema").
    SELECT s.step, s.action, s.object, s.detail
      FROM @extschema@.snowflake_convert_column_steps(tbl, col, false::pg_catalog.bool) s;
END;

COMMENT ON FUNCTION snowflake_convert_column(regclass, name) IS
'Switch a serial, IDENTITY or nextval() column to DEFAULT snowflake_nextval(), widening it and its foreign keys to bigint';

-- How fast this server rewrites a table like REL while widening COL: a
-- sample of up to 100,000 of its rows, with its indexes, is copied into a
-- new table, widened and timed, all in a subtransaction that is rolled
-- back. Everything is done as REL's owner, in a security-restricted
-- operation (snowflake_convert_as_owner), because copying the rows runs
-- the owner's code: index expressions and predicates. The sample is a
-- logged table in REL's schema, as the real rewrite is; when the owner
-- may not create tables there, nothing is measured.
CREATE OR REPLACE FUNCTION snowflake_convert_rewrite_rate(rel regclass, col name,
                                               OUT bytes_per_second double precision, OUT how text)
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $rate$
DECLARE
    sample  text;
    r       record;
    n       bigint;
    sz      bigint;
    t0      timestamptz;
    secs    double precision;
BEGIN
    -- Before any @extschema@ name is looked up (docs/security.md, "The
    -- extension's schema"): every role that can create in the extension's
    -- schema must be a superuser, the caller, or (for a caller who is not
    -- a superuser) a role whose privileges the caller has; and the schema
    -- must still have the name this body was created with.
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension sfg_e
                     JOIN pg_catalog.pg_namespace sfg_n ON sfg_n.oid OPERATOR(pg_catalog.=) sfg_e.extnamespace
                    WHERE sfg_e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name
                      AND pg_catalog.quote_ident(sfg_n.nspname::pg_catalog.text) OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.text)
       OR EXISTS (SELECT FROM pg_catalog.pg_extension sfg_e
                    JOIN pg_catalog.pg_namespace sfg_n ON sfg_n.oid OPERATOR(pg_catalog.=) sfg_e.extnamespace
                   CROSS JOIN LATERAL (SELECT sfg_n.nspowner AS sfg_who
                                       UNION ALL
                                       SELECT sfg_a.grantee FROM pg_catalog.aclexplode(sfg_n.nspacl) sfg_a
                                        WHERE sfg_a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'::pg_catalog.text) sfg_c
                    LEFT JOIN pg_catalog.pg_roles sfg_o
                      ON sfg_o.oid OPERATOR(pg_catalog.=)
                         CASE WHEN sfg_c.sfg_who OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole::pg_catalog.oid
                              THEN (SELECT sfg_d.datdba FROM pg_catalog.pg_database sfg_d
                                     WHERE sfg_d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                              ELSE sfg_c.sfg_who END
                   WHERE sfg_e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name
                     AND NOT (COALESCE(sfg_o.rolsuper, false)
                              OR COALESCE(sfg_o.rolname OPERATOR(pg_catalog.=) CURRENT_USER, false)
                              OR (sfg_o.oid IS NOT NULL
                                  AND NOT (SELECT sfg_r.rolsuper FROM pg_catalog.pg_roles sfg_r
                                            WHERE sfg_r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
                                  AND pg_catalog.pg_has_role(sfg_o.oid, 'USAGE'::pg_catalog.text))))
    THEN
        RAISE EXCEPTION '%: the schema of snowflake_id is renamed, or a role whose rights you exceed can create in it', 'snowflake_convert_rewrite_rate'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'This function calls the extension''s functions by the schema''s name, so that role could make it run its own code with your rights.',
                  HINT = 'Install snowflake_id in a schema that only a superuser can create in (CREATE SCHEMA snowflake AUTHORIZATION postgres; CREATE EXTENSION snowflake_id SCHEMA snowflake), or run this as the schema''s owner. See docs/security.md, "The extension''s schema".';
    END IF;
    SELECT c.relowner, c.relkind, ns.nspname INTO r
      FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE c.oid = rel;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'relation with OID % does not exist', rel::oid USING ERRCODE = 'undefined_table';
    END IF;
    IF r.relkind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION '"%" is not a table', rel USING ERRCODE = 'wrong_object_type';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = rel AND a.attname = col
                      AND a.attnum > 0 AND NOT a.attisdropped) THEN
        RAISE EXCEPTION 'column "%" of relation "%" does not exist', col, rel USING ERRCODE = 'undefined_column';
    END IF;
    IF NOT pg_has_role(current_user, r.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table %', rel USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NOT has_schema_privilege(r.relowner, r.nspname, 'CREATE') THEN
        how := format('not measured: the owner of %s may not create tables in schema %I', rel, r.nspname);
        RETURN;
    END IF;
    BEGIN
        sample := format('%I.%I', r.nspname, 'snowflake_convert_sample_' || pg_backend_pid());
        PERFORM @extschema@.snowflake_convert_as_owner(rel, format('CREATE TABLE %s (LIKE %s INCLUDING INDEXES)', sample, rel));
        n := @extschema@.snowflake_convert_as_owner(rel, format('INSERT INTO %s SELECT * FROM %s LIMIT 100000', sample, rel));
        sz := pg_total_relation_size(sample::regclass);
        t0 := clock_timestamp();
        PERFORM @extschema@.snowflake_convert_as_owner(rel, format('ALTER TABLE %s ALTER COLUMN %I TYPE bigint', sample, col));
        secs := greatest(extract(epoch FROM clock_timestamp() - t0)::double precision, 1e-6);
        RAISE EXCEPTION USING ERRCODE = 'SFRB0';   -- undo the sample
    EXCEPTION WHEN SQLSTATE 'SFRB0' THEN
        NULL;
    END;
    IF n > 0 THEN
        bytes_per_second := sz / secs;
        how := format('estimate from a logged sample of %s rows rewritten at %s MB/s', n,
                      round((sz / secs / 1048576)::numeric, 1));
    ELSE
        how := 'the table is empty';
    END IF;
END;
$rate$;

COMMENT ON FUNCTION snowflake_convert_rewrite_rate(regclass, name) IS
'Rewrite rate of this server for a table like rel, measured on a rolled-back sample; used by snowflake_convert_plan()';

-- The dry run: the same steps, not carried out, with the lock each takes,
-- the size of each table a step rewrites, and an estimate of the time
-- from a rewrite measured on this server, now.
CREATE OR REPLACE FUNCTION snowflake_convert_plan(tbl regclass, col name)
RETURNS TABLE (step integer, action text, object text, detail text,
               lock text, table_bytes bigint, rows_estimate bigint, estimated_time interval,
               estimate_basis text)
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $plan$
#variable_conflict use_column
DECLARE
    r        record;
    parts    oid[];
    bytes    bigint;
    nrows    bigint;
    rate     double precision;
    how      text;
BEGIN
    -- Before any @extschema@ name is looked up (docs/security.md, "The
    -- extension's schema"): every role that can create in the extension's
    -- schema must be a superuser, the caller, or (for a caller who is not
    -- a superuser) a role whose privileges the caller has; and the schema
    -- must still have the name this body was created with.
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension sfg_e
                     JOIN pg_catalog.pg_namespace sfg_n ON sfg_n.oid OPERATOR(pg_catalog.=) sfg_e.extnamespace
                    WHERE sfg_e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name
                      AND pg_catalog.quote_ident(sfg_n.nspname::pg_catalog.text) OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.text)
       OR EXISTS (SELECT FROM pg_catalog.pg_extension sfg_e
                    JOIN pg_catalog.pg_namespace sfg_n ON sfg_n.oid OPERATOR(pg_catalog.=) sfg_e.extnamespace
                   CROSS JOIN LATERAL (SELECT sfg_n.nspowner AS sfg_who
                                       UNION ALL
                                       SELECT sfg_a.grantee FROM pg_catalog.aclexplode(sfg_n.nspacl) sfg_a
                                        WHERE sfg_a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'::pg_catalog.text) sfg_c
                    LEFT JOIN pg_catalog.pg_roles sfg_o
                      ON sfg_o.oid OPERATOR(pg_catalog.=)
                         CASE WHEN sfg_c.sfg_who OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole::pg_catalog.oid
                              THEN (SELECT sfg_d.datdba FROM pg_catalog.pg_database sfg_d
                                     WHERE sfg_d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
                              ELSE sfg_c.sfg_who END
                   WHERE sfg_e.extname OPERATOR(pg_catalog.=) 'snowflake_id'::pg_catalog.name
                     AND NOT (COALESCE(sfg_o.rolsuper, false)
                              OR COALESCE(sfg_o.rolname OPERATOR(pg_catalog.=) CURRENT_USER, false)
                              OR (sfg_o.oid IS NOT NULL
                                  AND NOT (SELECT sfg_r.rolsuper FROM pg_catalog.pg_roles sfg_r
                                            WHERE sfg_r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
                                  AND pg_catalog.pg_has_role(sfg_o.oid, 'USAGE'::pg_catalog.text))))
    THEN
        RAISE EXCEPTION '%: the schema of snowflake_id is renamed, or a role whose rights you exceed can create in it', 'snowflake_convert_plan'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'This function calls the extension''s functions by the schema''s name, so that role could make it run its own code with your rights.',
                  HINT = 'Install snowflake_id in a schema that only a superuser can create in (CREATE SCHEMA snowflake AUTHORIZATION postgres; CREATE EXTENSION snowflake_id SCHEMA snowflake), or run this as the schema''s owner. See docs/security.md, "The extension''s schema".';
    END IF;
    FOR r IN SELECT * FROM @extschema@.snowflake_convert_column_steps(tbl, col, true) LOOP
        bytes := NULL; nrows := NULL; rate := NULL; how := NULL;
        IF r.action = 'widen' THEN
            -- A partitioned table rewrites every partition.
            parts := ARRAY(SELECT pt.relid FROM pg_partition_tree(r.relid) pt WHERE pt.isleaf);
            IF cardinality(parts) = 0 THEN parts := ARRAY[r.relid]; END IF;
            SELECT sum(pg_total_relation_size(p))::bigint, sum(greatest(c.reltuples, 0))::bigint
              INTO bytes, nrows
              FROM unnest(parts) p JOIN pg_class c ON c.oid = p;
            SELECT m.bytes_per_second, m.how INTO rate, how
              FROM pg_attribute a,
                   LATERAL @extschema@.snowflake_convert_rewrite_rate(parts[1], a.attname) m
             WHERE a.attrelid = r.relid AND a.attnum > 0 AND NOT a.attisdropped
               AND format('%s.%I', r.relid::regclass, a.attname) = r.object;
        END IF;
        step := r.step; action := r.action; object := r.object; detail := r.detail;
        lock := CASE
            WHEN r.action IN ('unchanged', 'keep sequence') THEN 'none'
            WHEN r.action = 'check' THEN format('ACCESS SHARE on %s (reads the largest value)', r.relid::regclass)
            WHEN r.action = 'widen' THEN format('ACCESS EXCLUSIVE on %s (rewrites it and rebuilds its indexes)',
                                                r.relid::regclass)
            ELSE format('ACCESS EXCLUSIVE on %s (catalog change only)', r.relid::regclass) END
            || CASE WHEN r.action IN ('unchanged', 'keep sequence') THEN '' ELSE '; held until COMMIT' END;
        table_bytes := bytes; rows_estimate := nrows;
        estimated_time := CASE WHEN rate > 0 THEN make_interval(secs => bytes / rate)
                               WHEN r.action = 'widen' THEN interval '0' END;
        estimate_basis := how;
        RETURN NEXT;
    END LOOP;
END;
$plan$;

COMMENT ON FUNCTION snowflake_convert_plan(regclass, name) IS
'Dry run of snowflake_convert_column(): its steps, the lock each takes, the tables it rewrites and an estimate of the time';

-- snowflake_js_safe(jsonb) and snowflake_to_jsonb(anyelement): see src/read/js_safe.rs.
-- Included in the install script by extension_sql_file!.
--
-- One query over the document's text, naming nothing but pg_catalog: the
-- text of a jsonb value is canonical, numbers (never in exponent form)
-- stand outside strings, and a token is a string, a number, or anything
-- else. Each integer number beyond 2^53 - 1 within the bigint range is
-- quoted; the tokens are put back together in order. Neither body calls
-- a function of the extension's schema by name: up to 0.7.0
-- snowflake_js_safe called itself as "@extschema@.snowflake_js_safe", a
-- name looked up when it ran, which the owner of that schema could rename
-- and redirect to her own function, run with the caller's rights
-- (docs/security.md, "The extension's schema").

CREATE OR REPLACE FUNCTION snowflake_js_safe(j jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $js$
SELECT string_agg(CASE WHEN t.m[2] IS NOT NULL AND strpos(t.m[2], '.') = 0
                            AND abs(t.m[2]::numeric) > 9007199254740991
                            AND t.m[2]::numeric >= -9223372036854775808
                            AND t.m[2]::numeric <= 9223372036854775807
                       THEN '"' || t.m[2] || '"'
                       ELSE coalesce(t.m[1], t.m[2], t.m[3]) END,
                  '' ORDER BY t.n)::jsonb
  FROM regexp_matches(j::text, E'("(?:[^"\\\\]|\\\\.)*")|(-?[0-9][0-9.eE+-]*)|([^"0-9-]+)', 'g')
       WITH ORDINALITY t(m, n)
$js$;

COMMENT ON FUNCTION snowflake_js_safe(jsonb) IS
'Replace every bigint beyond JavaScript''s exact range (2^53 - 1) in a JSON document with its decimal string';

CREATE OR REPLACE FUNCTION snowflake_to_jsonb(r anyelement) RETURNS jsonb
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $js$
SELECT string_agg(CASE WHEN t.m[2] IS NOT NULL AND strpos(t.m[2], '.') = 0
                            AND abs(t.m[2]::numeric) > 9007199254740991
                            AND t.m[2]::numeric >= -9223372036854775808
                            AND t.m[2]::numeric <= 9223372036854775807
                       THEN '"' || t.m[2] || '"'
                       ELSE coalesce(t.m[1], t.m[2], t.m[3]) END,
                  '' ORDER BY t.n)::jsonb
  FROM regexp_matches(to_jsonb(r)::text, E'("(?:[^"\\\\]|\\\\.)*")|(-?[0-9][0-9.eE+-]*)|([^"0-9-]+)', 'g')
       WITH ORDINALITY t(m, n)
$js$;

COMMENT ON FUNCTION snowflake_to_jsonb(anyelement) IS
'to_jsonb() of a row or value, with every bigint beyond JavaScript''s exact range as a decimal string';

-- The worker-id registry: see src/lease/worker.rs and docs/worker-ids.md.
-- Every database that has the extension has the (empty) tables; the one
-- that servers name in snowflake_id.registry is filled by
-- snowflake_registry_init(). One row per worker id: who holds it (a
-- random token per postmaster start, and a description), an epoch that
-- rises at each claim, reserved_until_ms (Unix ms, only rises: the
-- holder mints no later timestamp, and the next holder starts above it)
-- and the lease's expiry. A lease expires by the registry's monotonic
-- clock, never by its wall clock (issue 47: a step of the registry's
-- wall clock expired every live lease at once): lease_clock names the
-- clock (the registry host's boot), lease_clock_ns is that clock when the
-- lease was granted or renewed, lease_ttl_ms its length. A lease timed by
-- another clock (after a failover of the registry, or a reboot) runs a
-- full TTL from the moment this clock first saw it
-- (snowflake_registry_adopted). lease_expires is the same expiry as a wall time, for people to
-- read. touched_xact is the transaction that last claimed, renewed or
-- released the lease: until it ends, the row is locked whether or not
-- the lease is live, and it counts against its role's limit (issue 56:
-- a member who released every id she claimed in one open transaction,
-- or let each lease run out before claiming the next, kept the whole
-- pool locked). Configuration tables of
-- the extension, so that pg_dump of the registry carries them. Only the
-- extension's owner writes them; servers call the three SECURITY DEFINER
-- functions below, which keep reserved_until rising and bounded.
CREATE TABLE snowflake_id_internal.snowflake_registry_config (
    one           boolean PRIMARY KEY DEFAULT true CHECK (one),
    worker_bits   integer NOT NULL,
    sequence_bits integer NOT NULL,
    epoch_ms      bigint NOT NULL,
    max_ahead_ms  bigint NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE TABLE snowflake_id_internal.snowflake_registry (
    worker_id                integer PRIMARY KEY,
    retired                  boolean NOT NULL DEFAULT false,
    token                    uuid,
    holder_host              text,
    holder_port              integer,
    holder_system_identifier text,
    holder_data_directory    text,
    lease_epoch              bigint NOT NULL DEFAULT 0,
    reserved_until_ms        bigint NOT NULL DEFAULT 0,
    lease_expires            timestamptz,
    claimed_at               timestamptz,
    renewed_at               timestamptz,
    lease_clock              text,
    lease_clock_ns           bigint,
    lease_ttl_ms             integer,
    holder_role              name,
    touched_xact             xid8
);
-- The live leases a login role may hold: one by default
-- (snowflake_registry_role_limit() sets another), so that no member
-- takes the fleet's ids. A claim locks its role's row here, so that two
-- claims of one role cannot both pass the limit.
CREATE TABLE snowflake_id_internal.snowflake_registry_roles (
    rolname    name PRIMARY KEY,
    max_leases integer CHECK (max_leases OPERATOR(pg_catalog.>=) 0::pg_catalog.int4)
);
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_internal.snowflake_registry_roles', '');
REVOKE ALL ON snowflake_id_internal.snowflake_registry_roles FROM PUBLIC;
GRANT SELECT ON snowflake_id_internal.snowflake_registry_roles TO pg_database_owner;
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_internal.snowflake_registry_config', '');
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_internal.snowflake_registry', '');
REVOKE ALL ON snowflake_id_internal.snowflake_registry_config FROM PUBLIC;
REVOKE ALL ON snowflake_id_internal.snowflake_registry FROM PUBLIC;
-- The database's owner may read them, so that her pg_dump works (issue
-- 46, item 8): they are empty but in the registry database, whose owner
-- the servers require to be a superuser with no other member, so the
-- holders' tokens reach no one new.
GRANT SELECT ON snowflake_id_internal.snowflake_registry_config TO pg_database_owner;
GRANT SELECT ON snowflake_id_internal.snowflake_registry TO pg_database_owner;
COMMENT ON TABLE snowflake_id_internal.snowflake_registry IS
'snowflake_id''s worker-id registry: one row per worker id, leased to one server at a time';

CREATE FUNCTION snowflake_registry_init(
    worker_bits integer DEFAULT 10,
    sequence_bits integer DEFAULT 12,
    epoch timestamptz DEFAULT '2024-01-01 00:00:00+00',
    max_ahead interval DEFAULT interval '1 minute')
RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $init$
DECLARE
    cfg snowflake_id_internal.snowflake_registry_config;
    want_epoch bigint := (extract(epoch FROM epoch) * 1000)::bigint;
    want_ahead bigint := (extract(epoch FROM max_ahead) * 1000)::bigint;
    n integer;
BEGIN
    IF worker_bits IS NULL OR worker_bits < 1 OR worker_bits > 16 THEN
        RAISE EXCEPTION 'worker_bits must be between 1 and 16, not %', worker_bits
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A registry hands out at most 65536 worker ids.';
    END IF;
    IF sequence_bits IS NULL OR sequence_bits < 1 OR worker_bits + sequence_bits > 28 THEN
        RAISE EXCEPTION 'sequence_bits must be at least 1, and worker_bits + sequence_bits at most 28'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF want_ahead IS NULL OR want_ahead < 1000 THEN
        RAISE EXCEPTION 'max_ahead must be at least 1 second'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    LOCK TABLE snowflake_id_internal.snowflake_registry_config IN EXCLUSIVE MODE;
    SELECT * INTO cfg FROM snowflake_id_internal.snowflake_registry_config;
    IF FOUND THEN
        IF (cfg.worker_bits, cfg.sequence_bits, cfg.epoch_ms)
           IS DISTINCT FROM (worker_bits, sequence_bits, want_epoch) THEN
            RAISE EXCEPTION 'the snowflake_id registry is already initialized with another layout'
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('It hands out %s worker bits for %s sequence bits and the epoch %s.',
                                      cfg.worker_bits, cfg.sequence_bits,
                                      to_timestamp(cfg.epoch_ms / 1000.0)),
                      HINT = 'Every server that leases from one registry needs the same layout; create another registry database for another layout.';
        END IF;
        UPDATE snowflake_id_internal.snowflake_registry_config SET max_ahead_ms = want_ahead;
    ELSE
        INSERT INTO snowflake_id_internal.snowflake_registry_config
               (worker_bits, sequence_bits, epoch_ms, max_ahead_ms)
        VALUES (worker_bits, sequence_bits, want_epoch, want_ahead);
    END IF;
    INSERT INTO snowflake_id_internal.snowflake_registry (worker_id)
    SELECT g FROM generate_series(0, (1 << worker_bits) - 1) g
    ON CONFLICT DO NOTHING;
    SELECT count(*) INTO n FROM snowflake_id_internal.snowflake_registry;
    RETURN n;
END
$init$;
COMMENT ON FUNCTION snowflake_registry_init(integer, integer, timestamptz, interval) IS
'Make this database a worker-id registry for one layout (superuser only)';
REVOKE ALL ON FUNCTION snowflake_registry_init(integer, integer, timestamptz, interval) FROM PUBLIC;

-- The registry's settings, or 55000 when it was never initialized. In
-- the extension's own schema, where only its owner creates objects: the
-- functions below call it by that name (the extension's schema may be
-- one its database's owner can rename and replace).
CREATE FUNCTION snowflake_id_internal.snowflake_registry_settings()
RETURNS snowflake_id_internal.snowflake_registry_config
LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $settings$
DECLARE
    cfg snowflake_id_internal.snowflake_registry_config;
BEGIN
    SELECT * INTO cfg FROM snowflake_id_internal.snowflake_registry_config;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'this database is not a snowflake_id registry'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Run SELECT snowflake_registry_init() in it as a superuser, or point snowflake_id.registry at the registry database.';
    END IF;
    RETURN cfg;
END
$settings$;
REVOKE ALL ON FUNCTION snowflake_id_internal.snowflake_registry_settings() FROM PUBLIC;

-- The length of a lease a server asks for, as an interval, or 22023
-- when it is out of range: the one rule of claim and renew.
CREATE FUNCTION snowflake_id_internal.snowflake_registry_ttl(ttl_ms integer)
RETURNS interval
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $ttl$
BEGIN
    IF ttl_ms IS NULL OR ttl_ms < 1000 OR ttl_ms > 600000 THEN
        RAISE EXCEPTION 'ttl_ms must be between 1000 and 600000, not %', ttl_ms
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN make_interval(secs => ttl_ms / 1000.0);
END
$ttl$;
REVOKE ALL ON FUNCTION snowflake_id_internal.snowflake_registry_ttl(integer) FROM PUBLIC;

-- The registry host's monotonic clock (src/lease/registry_clock.rs): its
-- name (the boot id) and a reading in ns.
CREATE FUNCTION snowflake_id_internal.snowflake_registry_boot()
RETURNS text LANGUAGE c VOLATILE PARALLEL SAFE STRICT
AS 'MODULE_PATHNAME', 'snowflake_registry_boot_wrapper';
CREATE FUNCTION snowflake_id_internal.snowflake_registry_ns()
RETURNS bigint LANGUAGE c VOLATILE PARALLEL SAFE STRICT
AS 'MODULE_PATHNAME', 'snowflake_registry_ns_wrapper';
REVOKE ALL ON FUNCTION snowflake_id_internal.snowflake_registry_boot() FROM PUBLIC;
REVOKE ALL ON FUNCTION snowflake_id_internal.snowflake_registry_ns() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_id_internal.snowflake_registry_boot() TO pg_monitor;
GRANT EXECUTE ON FUNCTION snowflake_id_internal.snowflake_registry_ns() TO pg_monitor;

-- Leases timed on another clock (the registry failed over to another
-- host, or its host rebooted), as this clock first saw them: one row per
-- registry row, renewal seen (its clock and reading) and clock that saw
-- it, inserted by claims. Inserts take no lock on anyone's row, so a
-- claim that a member holds open in her transaction delays no holder's
-- renewal (a renewal skips a locked row and counts its lease as lost);
-- only committed rows count, and the earliest of them. Not dumped: a
-- restored registry counts such leases as live until a claim sees them.
CREATE TABLE snowflake_id_internal.snowflake_registry_adopted (
    worker_id      integer NOT NULL,
    lease_clock    text NOT NULL,
    lease_clock_ns bigint NOT NULL,
    seen_clock     text NOT NULL,
    seen_ns        bigint NOT NULL
);
CREATE INDEX ON snowflake_id_internal.snowflake_registry_adopted (worker_id);
REVOKE ALL ON snowflake_id_internal.snowflake_registry_adopted FROM PUBLIC;
GRANT SELECT ON snowflake_id_internal.snowflake_registry_adopted TO pg_monitor, pg_database_owner;

-- How long a row's lease may still be in use, in ns, judged by the
-- registry's monotonic clock (boot, ns): a lease timed on this clock
-- until its TTL has passed on it; one timed on another clock until its
-- TTL has passed since this clock first saw it (snowflake_registry_adopted),
-- NULL (live, for as long as no committed claim or renewal has seen it)
-- before then; one never granted, 0. Never shortened by a clock it does
-- not know, never lengthened past one TTL of the clock that first saw it.
CREATE FUNCTION snowflake_id_internal.snowflake_registry_left_ns(
    worker_id integer, lease_clock text, lease_clock_ns bigint, lease_ttl_ms integer,
    boot text, ns bigint)
RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $left$
SELECT CASE WHEN $2 IS NULL OR $4 IS NULL THEN 0::int8
            WHEN $2 = $5 THEN $4::int8 * 1000000 - ($6 - $3)
            ELSE $4::int8 * 1000000
                 - ($6 - (SELECT min(a.seen_ns)
                            FROM snowflake_id_internal.snowflake_registry_adopted a
                           WHERE a.worker_id = $1 AND a.lease_clock = $2
                             AND a.lease_clock_ns = $3 AND a.seen_clock = $5)) END
$left$;
REVOKE ALL ON FUNCTION snowflake_id_internal.snowflake_registry_left_ns(integer, text, bigint, integer, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_id_internal.snowflake_registry_left_ns(integer, text, bigint, integer, text, bigint) TO pg_monitor;

-- Whether a row's lease may still be in use (snowflake_registry_left_ns).
CREATE FUNCTION snowflake_id_internal.snowflake_registry_live(
    worker_id integer, lease_clock text, lease_clock_ns bigint, lease_ttl_ms integer,
    boot text, ns bigint)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $live$
SELECT coalesce(snowflake_id_internal.snowflake_registry_left_ns($1, $2, $3, $4, $5, $6) > 0, true)
$live$;
REVOKE ALL ON FUNCTION snowflake_id_internal.snowflake_registry_live(integer, text, bigint, integer, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_id_internal.snowflake_registry_live(integer, text, bigint, integer, text, bigint) TO pg_monitor;

-- Whether (worker_id, token, lease_epoch) names a live lease, as last
-- committed: the unlocked test of renew and release, which lock nothing
-- for a lease that is not live (a retired row holds no token).
CREATE FUNCTION snowflake_id_internal.snowflake_registry_lease_live(
    worker_id integer, token uuid, lease_epoch bigint, boot text, ns bigint)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $lease_live$
SELECT EXISTS (SELECT FROM snowflake_id_internal.snowflake_registry r
                WHERE r.worker_id = $1 AND r.token = $2 AND r.lease_epoch = $3 AND NOT r.retired
                  AND snowflake_id_internal.snowflake_registry_live(r.worker_id, r.lease_clock, r.lease_clock_ns,
                                                                    r.lease_ttl_ms, $4, $5))
$lease_live$;
REVOKE ALL ON FUNCTION snowflake_id_internal.snowflake_registry_lease_live(integer, uuid, bigint, text, bigint) FROM PUBLIC;

-- The clock (boot, ns) sees every lease timed on another clock that it
-- has not seen yet (a failover of the registry, a reboot, a standby in
-- another time namespace): from here on, each runs a full TTL of this
-- clock and no longer. Writes rows of its own, never a lock on a
-- holder's row; and what no row needs any more goes (rows another
-- transaction holds are left for later). Called by every claim, and by
-- the first renewal of each holder on a new clock, so that a crashed
-- holder's lease runs out one TTL after the registry's first renewal
-- on the new clock, whether or not anyone claims. Returns how many
-- leases it saw for the first time.
CREATE FUNCTION snowflake_id_internal.snowflake_registry_see(boot text, ns bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $see$
DECLARE
    n bigint;
BEGIN
    INSERT INTO snowflake_id_internal.snowflake_registry_adopted
           (worker_id, lease_clock, lease_clock_ns, seen_clock, seen_ns)
    SELECT r.worker_id, r.lease_clock, r.lease_clock_ns, boot, ns
      FROM snowflake_id_internal.snowflake_registry r
     WHERE r.lease_clock <> boot
       AND NOT EXISTS (SELECT FROM snowflake_id_internal.snowflake_registry_adopted a
                        WHERE a.worker_id = r.worker_id AND a.lease_clock = r.lease_clock
                          AND a.lease_clock_ns = r.lease_clock_ns AND a.seen_clock = boot);
    GET DIAGNOSTICS n = ROW_COUNT;
    DELETE FROM snowflake_id_internal.snowflake_registry_adopted a
     WHERE a.ctid IN (SELECT o.ctid
                        FROM snowflake_id_internal.snowflake_registry_adopted o
                        JOIN snowflake_id_internal.snowflake_registry r ON r.worker_id = o.worker_id
                       WHERE (r.lease_clock, r.lease_clock_ns) IS DISTINCT FROM (o.lease_clock, o.lease_clock_ns)
                         FOR UPDATE OF o SKIP LOCKED);
    RETURN n;
END
$see$;
REVOKE ALL ON FUNCTION snowflake_id_internal.snowflake_registry_see(text, bigint) FROM PUBLIC;

-- The limit of live leases of the session's login role, with the role's
-- row locked until the transaction ends, so that the claims, renewals
-- and releases of one role are counted one after the other (NULL for a
-- superuser, who has none): one by default, snowflake_registry_role_limit()
-- sets another. In READ COMMITTED only: every count is of what is
-- committed now, and a transaction with an older snapshot (REPEATABLE
-- READ, or one imported with SET TRANSACTION SNAPSHOT) would count none of
-- its role's newer leases (issue 56's second review).
CREATE FUNCTION snowflake_id_internal.snowflake_registry_lock_role()
RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $lock_role$
DECLARE
    max_leases integer;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'the snowflake_id registry''s functions run in READ COMMITTED transactions only'
            USING ERRCODE = 'invalid_transaction_state',
                  DETAIL = format('This transaction is %s: its snapshot may not show the leases committed since it began.',
                                  upper(current_setting('transaction_isolation'))),
                  HINT = 'Call it in a READ COMMITTED transaction (the lease worker always does).';
    END IF;
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = session_user) THEN
        RETURN NULL;
    END IF;
    INSERT INTO snowflake_id_internal.snowflake_registry_roles AS l (rolname)
    VALUES (session_user) ON CONFLICT (rolname) DO NOTHING;
    SELECT coalesce(l.max_leases, 1) INTO max_leases
      FROM snowflake_id_internal.snowflake_registry_roles l
     WHERE l.rolname = session_user FOR UPDATE;
    IF NOT FOUND THEN
        -- Deleted by a superuser since the insert: never read as "no limit".
        RAISE EXCEPTION 'the worker-id limit of role "%" changed during the call', session_user
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Call it again.';
    END IF;
    RETURN max_leases;
END
$lock_role$;
REVOKE ALL ON FUNCTION snowflake_id_internal.snowflake_registry_lock_role() FROM PUBLIC;

CREATE FUNCTION snowflake_registry_claim(
    token uuid, holder_host text, holder_port integer,
    system_identifier text, data_directory text, preferred integer,
    worker_bits integer, sequence_bits integer, epoch_ms bigint,
    ttl_ms integer, frontier_ms bigint)
RETURNS TABLE (worker_id integer, lease_epoch bigint, floor_ms bigint, reserved_until_ms bigint)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $claim$
#variable_conflict use_column
DECLARE
    cfg snowflake_id_internal.snowflake_registry_config := snowflake_id_internal.snowflake_registry_settings();
    now_ts timestamptz := clock_timestamp();
    now_ms bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    ttl interval := snowflake_id_internal.snowflake_registry_ttl(ttl_ms);
    chosen snowflake_id_internal.snowflake_registry;
    new_until bigint;
    boot text;
    ns bigint;
    max_leases integer;
    held bigint;
    left_ms bigint;
    locked bigint;
    seen bigint;
BEGIN
    boot := snowflake_id_internal.snowflake_registry_boot();
    ns := snowflake_id_internal.snowflake_registry_ns();
    IF snowflake_registry_claim.token IS NULL THEN
        RAISE EXCEPTION 'a claim needs a token' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- The holder's description is stored and shown: bounded, so that no
    -- member can fill the registry's WAL and disk with it (issue 56's
    -- third review: claims of her own row with 190 MB strings).
    IF octet_length(snowflake_registry_claim.holder_host) > 1024
       OR octet_length(snowflake_registry_claim.data_directory) > 4096
       OR octet_length(snowflake_registry_claim.system_identifier) > 64 THEN
        RAISE EXCEPTION 'a claim''s holder description is too long'
            USING ERRCODE = 'string_data_right_truncation',
                  DETAIL = 'The host name may have at most 1024 bytes, the data directory 4096, the system identifier 64.';
    END IF;
    IF (cfg.worker_bits, cfg.sequence_bits, cfg.epoch_ms)
       IS DISTINCT FROM (snowflake_registry_claim.worker_bits,
                         snowflake_registry_claim.sequence_bits,
                         snowflake_registry_claim.epoch_ms) THEN
        RAISE EXCEPTION 'the layout of this server is not the registry''s'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The registry hands out worker ids for %s worker bits, %s sequence bits and the epoch %s ms; this server has %s, %s and %s ms.',
                                  cfg.worker_bits, cfg.sequence_bits, cfg.epoch_ms,
                                  snowflake_registry_claim.worker_bits,
                                  snowflake_registry_claim.sequence_bits,
                                  snowflake_registry_claim.epoch_ms);
    END IF;
    IF frontier_ms IS NULL OR frontier_ms > now_ms + cfg.max_ahead_ms THEN
        RAISE EXCEPTION 'this server''s IDs are too far ahead of the registry''s clock'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Its IDs reach %s; the registry''s clock reads %s, and it reserves at most %s ms ahead of it.',
                                  to_timestamp(frontier_ms / 1000.0), now_ts, cfg.max_ahead_ms),
                  HINT = 'Check the clocks of this server and the registry.';
    END IF;
    -- Leases timed by another clock run a full TTL from when this clock
    -- first saw them (snowflake_registry_see).
    seen := snowflake_id_internal.snowflake_registry_see(boot, ns);
    -- The limit of live leases per login role (superusers have none). A
    -- server whose postmaster died and came back (a new token) while its
    -- old lease runs counts that lease too: the holder's name is no proof
    -- that the old one is gone (a clone, a pod beside its replacement).
    -- The role's row is locked first, so two claims (or releases) of one
    -- role are counted one after the other; the count itself comes once
    -- the row is chosen (below).
    max_leases := snowflake_id_internal.snowflake_registry_lock_role();
    -- Chosen and counted in a block of its own: a refusal rolls back the
    -- row it chose (and its lock), and keeps what this clock saw.
    BEGIN
        -- Preference: a row this postmaster holds already (a crash
        -- restart), this holder's previous id, the preferred id, then the
        -- free or expired id with the oldest reservation. Rows another
        -- transaction holds (a claim deciding on it, a release not yet
        -- committed) are skipped.
        SELECT r.* INTO chosen
          FROM snowflake_id_internal.snowflake_registry r
         WHERE NOT r.retired
           AND (r.token = snowflake_registry_claim.token
                OR NOT snowflake_id_internal.snowflake_registry_live(r.worker_id, r.lease_clock, r.lease_clock_ns, r.lease_ttl_ms, boot, ns))
         ORDER BY (r.token = snowflake_registry_claim.token) IS TRUE DESC,
                  (r.holder_host = snowflake_registry_claim.holder_host
                   AND r.holder_port = snowflake_registry_claim.holder_port
                   AND r.holder_system_identifier = snowflake_registry_claim.system_identifier
                   AND r.holder_data_directory = snowflake_registry_claim.data_directory) IS TRUE DESC,
                  (r.worker_id = preferred) IS TRUE DESC,
                  r.reserved_until_ms, r.worker_id
         LIMIT 1
           FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            -- Ids that are not held but were skipped: another transaction
            -- holds their rows (a claim deciding on it, or a release not
            -- yet committed).
            SELECT count(*) INTO locked
              FROM snowflake_id_internal.snowflake_registry r
             WHERE NOT r.retired
               AND NOT snowflake_id_internal.snowflake_registry_live(r.worker_id, r.lease_clock, r.lease_clock_ns, r.lease_ttl_ms, boot, ns);
            IF locked > 0 THEN
                RAISE EXCEPTION 'no worker id of this registry is free now'
                    USING ERRCODE = 'lock_not_available',
                          DETAIL = format('%s worker ids are not held by a live lease, but other transactions hold their rows (claims deciding on them, or releases not committed yet); every other id is held or retired.', locked),
                          HINT = 'The server asks again. A transaction that holds them shows in pg_stat_activity of the registry (idle in transaction, or still running a statement), or in pg_prepared_xacts if it was prepared.';
            END IF;
            -- Every id is held or retired: the server reports it (55000).
            IF seen > 0 THEN
                RETURN QUERY SELECT NULL::integer, NULL::bigint, NULL::bigint, NULL::bigint;
            END IF;
            RETURN;
        END IF;
        -- Every live lease of the role but the row chosen counts, whatever
        -- its token (one token may not hold many rows: a member who reuses
        -- hers, with her rows locked in another session so that the claim
        -- skips them, took every id), and so does every row the role
        -- claimed, renewed or released in this transaction, live or not
        -- (its row stays locked until the transaction ends, and every
        -- other claim skips it). The role's row, locked above, keeps any
        -- other transaction of the role from touching rows meanwhile.
        IF max_leases IS NOT NULL THEN
            SELECT count(*), ceil(min(l.left_ns) FILTER (WHERE l.left_ns > 0) / 1000000.0)::bigint
              INTO held, left_ms
              FROM snowflake_id_internal.snowflake_registry r
             CROSS JOIN LATERAL (SELECT snowflake_id_internal.snowflake_registry_left_ns(
                                     r.worker_id, r.lease_clock, r.lease_clock_ns, r.lease_ttl_ms, boot, ns)
                                 AS left_ns) l
             WHERE r.holder_role = session_user
               AND r.worker_id <> chosen.worker_id
               AND NOT r.retired
               AND ((r.token IS NOT NULL AND coalesce(l.left_ns > 0, true))
                    OR r.touched_xact = pg_current_xact_id());
            IF held >= max_leases THEN
                RAISE EXCEPTION 'role "%" may hold no more worker-id leases of this registry', session_user
                    USING ERRCODE = 'configuration_limit_exceeded',
                          DETAIL = format('It holds %s live leases (or claimed, renewed or released them in this transaction, which has not ended); its limit is %s. A lease of a server whose postmaster stopped without releasing it counts until it runs out.%s',
                                          held, max_leases,
                                          CASE WHEN left_ms IS NOT NULL
                                               THEN format(' The first of them runs out in %s ms unless its holder renews it.', left_ms)
                                               ELSE '' END),
                          HINT = 'Give each server its own login role, or let a superuser raise the limit with snowflake_registry_role_limit().';
            END IF;
        END IF;
    EXCEPTION WHEN configuration_limit_exceeded OR lock_not_available THEN
        -- What this clock saw of other clocks must outlive the refusal:
        -- else no lease of another clock would ever run out while every
        -- claim is refused. Once seen, the refusal is raised again.
        IF seen > 0 THEN
            RETURN QUERY SELECT NULL::integer, NULL::bigint, NULL::bigint, NULL::bigint;
            RETURN;
        END IF;
        RAISE;
    END;
    new_until := greatest(chosen.reserved_until_ms,
                          least(greatest(chosen.reserved_until_ms, frontier_ms) + ttl_ms,
                                now_ms + cfg.max_ahead_ms));
    UPDATE snowflake_id_internal.snowflake_registry r
       SET token = snowflake_registry_claim.token,
           holder_host = snowflake_registry_claim.holder_host,
           holder_port = snowflake_registry_claim.holder_port,
           holder_system_identifier = snowflake_registry_claim.system_identifier,
           holder_data_directory = snowflake_registry_claim.data_directory,
           lease_epoch = r.lease_epoch + 1,
           reserved_until_ms = new_until,
           lease_expires = now_ts + ttl,
           claimed_at = now_ts,
           renewed_at = now_ts,
           lease_clock = boot,
           lease_clock_ns = ns,
           lease_ttl_ms = snowflake_registry_claim.ttl_ms,
           holder_role = session_user,
           touched_xact = pg_current_xact_id()
     WHERE r.worker_id = chosen.worker_id;
    RETURN QUERY SELECT chosen.worker_id, chosen.lease_epoch + 1,
                        chosen.reserved_until_ms, new_until;
END
$claim$;
COMMENT ON FUNCTION snowflake_registry_claim(uuid, text, integer, text, text, integer, integer, integer, bigint, integer, bigint) IS
'Lease a worker id from this registry (called by the servers'' lease workers)';
REVOKE ALL ON FUNCTION snowflake_registry_claim(uuid, text, integer, text, text, integer, integer, integer, bigint, integer, bigint) FROM PUBLIC;

CREATE FUNCTION snowflake_registry_renew(
    worker_id integer, token uuid, lease_epoch bigint, ttl_ms integer, frontier_ms bigint)
RETURNS TABLE (reserved_until_ms bigint)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $renew$
#variable_conflict use_column
DECLARE
    cfg snowflake_id_internal.snowflake_registry_config := snowflake_id_internal.snowflake_registry_settings();
    now_ts timestamptz := clock_timestamp();
    now_ms bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    ttl interval := snowflake_id_internal.snowflake_registry_ttl(ttl_ms);
    boot text;
    ns bigint;
    max_leases integer;
BEGIN
    boot := snowflake_id_internal.snowflake_registry_boot();
    ns := snowflake_id_internal.snowflake_registry_ns();
    -- The first renewal of this holder on a new clock sees every lease of
    -- the old one (snowflake_registry_see): a crashed holder's lease then
    -- runs out one TTL later, whether or not anyone claims.
    IF EXISTS (SELECT FROM snowflake_id_internal.snowflake_registry r
                WHERE r.worker_id = snowflake_registry_renew.worker_id
                  AND r.lease_clock IS DISTINCT FROM boot) THEN
        PERFORM snowflake_id_internal.snowflake_registry_see(boot, ns);
    END IF;
    -- Only a live lease is renewed, and nothing is locked for any other
    -- call: one that ran out, or was released, may be claimed by anyone
    -- (its holder claims anew, usually getting the same id back), and no
    -- transaction may lock a row that is free to claim by renewing it
    -- (issue 56: renewals and releases of dead leases, held open or
    -- prepared, locked the pool).
    IF NOT snowflake_id_internal.snowflake_registry_lease_live(
               snowflake_registry_renew.worker_id, snowflake_registry_renew.token,
               snowflake_registry_renew.lease_epoch, boot, ns) THEN
        RETURN;
    END IF;
    -- Then the role's row, as for a claim: a renewal held open locks its
    -- lease's row, which counts against the role's limit until the
    -- transaction ends (touched_xact), and no other transaction of the
    -- role touches rows meanwhile. Only the role's own transactions ever
    -- wait for it.
    max_leases := snowflake_id_internal.snowflake_registry_lock_role();
    -- Compare-and-set on (token, epoch), of a live lease of the role's
    -- own (a superuser's: any; a leaked token is no key to another
    -- role's row): a row claimed by
    -- anyone since, retired or run out is not renewed, and the holder
    -- stops. A row another transaction has locked is being claimed or
    -- retired right now: the lease is lost as well, rather than waited
    -- for (a member's claim held open would otherwise keep the holder
    -- from minting, and from claiming another id, for as long as she
    -- likes).
    PERFORM FROM snowflake_id_internal.snowflake_registry r
      WHERE r.worker_id = snowflake_registry_renew.worker_id
        AND r.token = snowflake_registry_renew.token
        AND r.lease_epoch = snowflake_registry_renew.lease_epoch
        AND NOT r.retired
        AND (max_leases IS NULL OR r.holder_role = session_user)
        AND snowflake_id_internal.snowflake_registry_live(r.worker_id, r.lease_clock, r.lease_clock_ns,
                                                          r.lease_ttl_ms, boot, ns)
        FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        -- Locked, but still this holder's as last committed: a renewal of
        -- its own that has not ended (its commit waits for a synchronous
        -- standby, or its client gave up on it), or a claim that may fail.
        -- Not lost: an error, which the holder retries until its deadline
        -- (and after it, claims anew), rather than giving the id up now.
        PERFORM FROM snowflake_id_internal.snowflake_registry r
          WHERE r.worker_id = snowflake_registry_renew.worker_id
            AND r.token = snowflake_registry_renew.token
            AND r.lease_epoch = snowflake_registry_renew.lease_epoch
            AND NOT r.retired;
        IF FOUND THEN
            RAISE EXCEPTION 'the lease of worker id % is locked by another transaction', snowflake_registry_renew.worker_id
                USING ERRCODE = 'lock_not_available',
                      DETAIL = 'A renewal of this lease that has not ended yet (its commit may wait for a synchronous standby), or a claim in progress, holds its row.';
        END IF;
        RETURN;
    END IF;
    RETURN QUERY
    UPDATE snowflake_id_internal.snowflake_registry r
       SET lease_expires = now_ts + ttl,
           renewed_at = now_ts,
           lease_clock = boot,
           lease_clock_ns = ns,
           lease_ttl_ms = snowflake_registry_renew.ttl_ms,
           touched_xact = pg_current_xact_id(),
           reserved_until_ms = greatest(r.reserved_until_ms,
                                        least(frontier_ms + ttl_ms, now_ms + cfg.max_ahead_ms))
     WHERE r.worker_id = snowflake_registry_renew.worker_id
       AND r.token = snowflake_registry_renew.token
       AND r.lease_epoch = snowflake_registry_renew.lease_epoch
       AND NOT r.retired
    RETURNING r.reserved_until_ms;
END
$renew$;
COMMENT ON FUNCTION snowflake_registry_renew(integer, uuid, bigint, integer, bigint) IS
'Renew a worker-id lease of this registry; no row: the lease is lost';
REVOKE ALL ON FUNCTION snowflake_registry_renew(integer, uuid, bigint, integer, bigint) FROM PUBLIC;

CREATE FUNCTION snowflake_registry_release(worker_id integer, token uuid, lease_epoch bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $release$
#variable_conflict use_column
DECLARE
    boot text := snowflake_id_internal.snowflake_registry_boot();
    ns bigint := snowflake_id_internal.snowflake_registry_ns();
    max_leases integer;
BEGIN
    PERFORM snowflake_id_internal.snowflake_registry_settings();
    -- Only a live lease of the role's own (a superuser's: any) is
    -- released, and nothing is locked for any other call: a release of a
    -- lease that ran out or was released already returns false, so that
    -- no transaction can lock a row that is free to claim by releasing it
    -- (issue 56's second review: harvested tokens of dead leases, released
    -- in one prepared transaction, locked the pool).
    IF NOT snowflake_id_internal.snowflake_registry_lease_live(
               snowflake_registry_release.worker_id, snowflake_registry_release.token,
               snowflake_registry_release.lease_epoch, boot, ns) THEN
        RETURN false;
    END IF;
    -- A release locks its row until its transaction ends, and every claim
    -- skips a locked row: it counts against its role's limit until then
    -- (touched_xact), and the role's row is locked first, as for a claim
    -- or a renewal, so that one transaction of the role touches rows at a
    -- time. The lease's own row without waiting: one another transaction
    -- holds is not released here.
    max_leases := snowflake_id_internal.snowflake_registry_lock_role();
    PERFORM FROM snowflake_id_internal.snowflake_registry r
      WHERE r.worker_id = snowflake_registry_release.worker_id
        AND r.token = snowflake_registry_release.token
        AND r.lease_epoch = snowflake_registry_release.lease_epoch
        AND (max_leases IS NULL OR r.holder_role = session_user)
        AND snowflake_id_internal.snowflake_registry_live(r.worker_id, r.lease_clock, r.lease_clock_ns,
                                                          r.lease_ttl_ms, boot, ns)
        FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- The reservation stays: the next holder starts above it.
    UPDATE snowflake_id_internal.snowflake_registry r
       SET lease_expires = least(r.lease_expires, clock_timestamp()),
           lease_ttl_ms = 0,
           touched_xact = pg_current_xact_id()
     WHERE r.worker_id = snowflake_registry_release.worker_id
       AND r.token = snowflake_registry_release.token
       AND r.lease_epoch = snowflake_registry_release.lease_epoch;
    RETURN FOUND;
END
$release$;
COMMENT ON FUNCTION snowflake_registry_release(integer, uuid, bigint) IS
'Give a worker-id lease of this registry back (a clean shutdown)';
REVOKE ALL ON FUNCTION snowflake_registry_release(integer, uuid, bigint) FROM PUBLIC;

CREATE FUNCTION snowflake_registry_retire(worker_id integer, retired boolean DEFAULT true)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $retire$
#variable_conflict use_column
BEGIN
    PERFORM snowflake_id_internal.snowflake_registry_settings();
    -- Retiring ends the lease for good: a new epoch fails its holder's
    -- next renewal, and the token and holder are forgotten, so that the
    -- id put back is not its old holder's again. The lease's expiry
    -- stays: nobody is granted the id before its old holder's lease ends.
    UPDATE snowflake_id_internal.snowflake_registry r
       SET retired = snowflake_registry_retire.retired,
           lease_epoch = CASE WHEN snowflake_registry_retire.retired
                              THEN r.lease_epoch + 1 ELSE r.lease_epoch END,
           token = CASE WHEN snowflake_registry_retire.retired THEN NULL ELSE r.token END,
           holder_host = CASE WHEN snowflake_registry_retire.retired THEN NULL ELSE r.holder_host END,
           holder_port = CASE WHEN snowflake_registry_retire.retired THEN NULL ELSE r.holder_port END,
           holder_system_identifier = CASE WHEN snowflake_registry_retire.retired
                                           THEN NULL ELSE r.holder_system_identifier END,
           holder_data_directory = CASE WHEN snowflake_registry_retire.retired
                                        THEN NULL ELSE r.holder_data_directory END
     WHERE r.worker_id = snowflake_registry_retire.worker_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'worker id % is not in the registry', snowflake_registry_retire.worker_id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$retire$;
COMMENT ON FUNCTION snowflake_registry_retire(integer, boolean) IS
'Take a worker id out of the registry''s pool (its holder stops at its next renewal), or put it back (superuser only)';
REVOKE ALL ON FUNCTION snowflake_registry_retire(integer, boolean) FROM PUBLIC;

CREATE FUNCTION snowflake_registry_role_limit(role_name name, max_leases integer DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $limit$
BEGIN
    PERFORM snowflake_id_internal.snowflake_registry_settings();
    IF max_leases < 0 THEN
        RAISE EXCEPTION 'max_leases must be at least 0, not %', max_leases
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO snowflake_id_internal.snowflake_registry_roles AS l (rolname, max_leases)
    VALUES (role_name, snowflake_registry_role_limit.max_leases)
    ON CONFLICT (rolname) DO UPDATE SET max_leases = EXCLUDED.max_leases;
END
$limit$;
COMMENT ON FUNCTION snowflake_registry_role_limit(name, integer) IS
'Set how many live worker-id leases a login role may hold (NULL: the default, 1; superuser only)';
REVOKE ALL ON FUNCTION snowflake_registry_role_limit(name, integer) FROM PUBLIC;

CREATE VIEW snowflake_registry_holders AS
SELECT r.worker_id,
       CASE WHEN r.retired THEN 'retired'
            WHEN snowflake_id_internal.snowflake_registry_live(r.worker_id, r.lease_clock, r.lease_clock_ns,
                                                               r.lease_ttl_ms, c.boot, c.ns)
            THEN CASE WHEN r.token IS NULL THEN 'ending' ELSE 'held' END
            WHEN r.token IS NULL THEN 'free'
            ELSE 'expired' END AS state,
       r.holder_host,
       r.holder_port,
       r.holder_system_identifier AS system_identifier,
       r.holder_data_directory AS data_directory,
       r.holder_role,
       r.lease_epoch,
       pg_catalog.to_timestamp(r.reserved_until_ms::pg_catalog.float8
                               OPERATOR(pg_catalog./) 1000::pg_catalog.float8) AS reserved_until,
       r.lease_expires,
       r.claimed_at,
       r.renewed_at
  FROM snowflake_id_internal.snowflake_registry r
 CROSS JOIN (SELECT snowflake_id_internal.snowflake_registry_boot() AS boot,
                    snowflake_id_internal.snowflake_registry_ns() AS ns) c;
COMMENT ON VIEW snowflake_registry_holders IS
'The worker ids of this snowflake_id registry and who holds them';
REVOKE ALL ON snowflake_registry_holders FROM PUBLIC;
GRANT SELECT ON snowflake_registry_holders TO pg_monitor;

-- Adopted sequences (issue 57): see src/adopt/mod.rs. Included in the
-- install script by extension_sql_file!; edit it here, then regenerate
-- the upgrade script (python3 scripts/upgrade_script.py).

-- The functions the planner puts in place of nextval(), currval(),
-- setval() and lastval() in a database with adopted sequences
-- (src/adopt/calls.rs), and the one that tells every backend of the
-- database of a change (src/adopt/mod.rs). EXECUTE stays with PUBLIC:
-- each checks the caller's privileges on the sequence as the built-in
-- does, and a sequence that is not adopted goes to the built-in.
CREATE FUNCTION snowflake_id_internal.seq_nextval(pg_catalog.regclass) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'seq_nextval_wrapper';
CREATE FUNCTION snowflake_id_internal.seq_currval(pg_catalog.regclass) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'seq_currval_wrapper';
CREATE FUNCTION snowflake_id_internal.seq_setval(pg_catalog.regclass, bigint) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'seq_setval_wrapper';
CREATE FUNCTION snowflake_id_internal.seq_setval(pg_catalog.regclass, bigint, boolean) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'seq_setval3_wrapper';
CREATE FUNCTION snowflake_id_internal.seq_lastval() RETURNS bigint
VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'seq_lastval_wrapper';
-- An adopted identity column's draw, in place of PostgreSQL's (issue 63:
-- the column stays an identity): a Snowflake ID, for an adopted sequence
-- only (55000 for any other). EXECUTE stays with PUBLIC: an identity's
-- draw needs no privilege on its sequence, and this mints no more than
-- snowflake_nextval_for() does.
CREATE FUNCTION snowflake_id_internal.seq_identity(pg_catalog.regclass) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'seq_identity_wrapper';
-- COPY's own draws (src/adopt/copy.rs): the defaults it builds while its
-- table's cache entry is swapped call these, and nothing else does, so
-- that their look-up tells that COPY has built its defaults. As
-- seq_nextval() and seq_identity().
CREATE FUNCTION snowflake_id_internal.seq_copy_nextval(pg_catalog.regclass) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'seq_copy_nextval_wrapper';
CREATE FUNCTION snowflake_id_internal.seq_copy_identity(pg_catalog.regclass) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'seq_copy_identity_wrapper';
-- Wrapped around an identity column's draw, so that lastval() knows of
-- it; each returns its argument.
CREATE FUNCTION snowflake_id_internal.seq_drawn(bigint) RETURNS bigint
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'seq_drawn8_wrapper';
CREATE FUNCTION snowflake_id_internal.seq_drawn(integer) RETURNS integer
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'seq_drawn4_wrapper';
CREATE FUNCTION snowflake_id_internal.seq_drawn(smallint) RETURNS smallint
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'seq_drawn2_wrapper';
-- snowflake_nextval_for(seq regclass): the default of an adopted
-- sequence's columns (src/adopt/calls.rs). EXECUTE stays with PUBLIC, as
-- for snowflake_nextval(): it mints the caller's own ID and moves nothing.
CREATE FUNCTION snowflake_nextval_for(seq regclass) RETURNS bigint
STRICT VOLATILE PARALLEL RESTRICTED LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_nextval_for_wrapper';
COMMENT ON FUNCTION snowflake_nextval_for(regclass) IS
'a Snowflake ID that currval(seq) and lastval() then return: the default of an adopted sequence''s columns';
-- The fill of ALTER TABLE ... ADD COLUMN of a bigserial or bigint
-- identity column while the switch is on (src/adopt/fill.rs): in
-- pg_catalog, because the utility hook writes its name into the caller's
-- statement, and a migration's role may have no USAGE on this
-- extension's schemas. It mints only during such a statement (55000
-- anywhere else); EXECUTE stays with PUBLIC, as for snowflake_nextval().
CREATE FUNCTION pg_catalog.snowflake_id_fill() RETURNS bigint
VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_id_fill_wrapper';
COMMENT ON FUNCTION pg_catalog.snowflake_id_fill() IS
'internal to snowflake_id: the Snowflake IDs of the rows of an ALTER TABLE ... ADD COLUMN it rewrote';
CREATE FUNCTION snowflake_id_internal.adopt_changed(require_preload boolean) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'adopt_changed_wrapper';
REVOKE ALL ON FUNCTION snowflake_id_internal.adopt_changed(boolean) FROM PUBLIC;
-- Every statement the adoption runs on a table or sequence runs through
-- this one, as the relation's owner, called with exact types in this
-- schema (no role but a superuser can create here, so no overload of
-- another role's is ever picked; issue 57's review, F2).
CREATE FUNCTION snowflake_id_internal.adopt_as_owner(rel pg_catalog.oid, stmt pg_catalog.text) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'adopt_as_owner_wrapper';
REVOKE ALL ON FUNCTION snowflake_id_internal.adopt_as_owner(pg_catalog.oid, pg_catalog.text) FROM PUBLIC;
CREATE FUNCTION snowflake_id_internal.adopt_advance(seq pg_catalog.regclass, v bigint, called boolean) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'adopt_advance_wrapper';
REVOKE ALL ON FUNCTION snowflake_id_internal.adopt_advance(pg_catalog.regclass, bigint, boolean) FROM PUBLIC;
CREATE FUNCTION snowflake_id_internal.adopt_label(seq pg_catalog.regclass) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'adopt_label_wrapper';
REVOKE ALL ON FUNCTION snowflake_id_internal.adopt_label(pg_catalog.regclass) FROM PUBLIC;
-- A new install adopts nothing: labels of an earlier install that a DROP
-- EXTENSION left behind (one run without the library preloaded, where
-- the hook that removes them does not run) would make the next dump of
-- the schema adopt sequences this database never adopted.
DELETE FROM pg_catalog.pg_seclabel l WHERE l.provider OPERATOR(pg_catalog.=) 'snowflake_id';
CREATE FUNCTION snowflake_id_internal.adopt_listed_now(oids pg_catalog.oid[]) RETURNS boolean
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'adopt_listed_now_wrapper';
REVOKE ALL ON FUNCTION snowflake_id_internal.adopt_listed_now(pg_catalog.oid[]) FROM PUBLIC;

-- Adopting a sequence, by whichever door: its row in the list, and the
-- fence: its own counter goes to the end of its range, called (MAXVALUE;
-- MINVALUE for a descending one), so a value drawn where the planner does
-- not see the call (an aggregate, a CHECK constraint) fails (2200H) and
-- is never a sequence value. Its bounds stay as the application made
-- them (issue 63: `pg_dump -s` shows no fence; an identity's RESTART WITH
-- works); a CYCLE sequence, whose counter would come round to values it
-- gave out, becomes NO CYCLE.
CREATE FUNCTION snowflake_id_internal.adopt_record(seq pg_catalog.regclass, adopted_by text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
    q     record;
    fence bigint;
BEGIN
    -- Adopted already: as it is (its label too, for one adopted before
    -- labels carried adoptions).
    IF EXISTS (SELECT FROM snowflake_id_internal.snowflake_adopted a
                WHERE a.seq OPERATOR(pg_catalog.=) adopt_record.seq) THEN
        PERFORM snowflake_id_internal.adopt_label(seq);
        RETURN;
    END IF;
    SELECT s.seqmin, s.seqmax, s.seqcycle, s.seqincrement, c.relname, c.relpersistence INTO q
      FROM pg_catalog.pg_sequence s JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) s.seqrelid
     WHERE s.seqrelid OPERATOR(pg_catalog.=) seq;
    -- An unlogged sequence comes back from a crash as its init fork holds
    -- it, not at the fence (the red-team review of 7d48b49, F5): the
    -- switch leaves it alone, with a NOTICE; any other door refuses it.
    IF q.relpersistence OPERATOR(pg_catalog.=) 'u' THEN
        IF adopted_by OPERATOR(pg_catalog.=) 'switch' THEN
            RAISE NOTICE 'sequence % is unlogged: it keeps its own values', seq
                  USING HINT = 'Adopted sequences must be logged: make its table LOGGED, then adopt it with snowflake_adopt_sequence().';
            RETURN;
        END IF;
        RAISE EXCEPTION 'sequence "%" cannot be both adopted and unlogged', q.relname
              USING ERRCODE = 'feature_not_supported',
                    DETAIL = 'An unlogged sequence comes back from a crash as it was first written, not where adoption put its counter, and its own values could be drawn again.',
                    HINT = 'Keep the sequence (and its table) logged.';
    END IF;
    fence := CASE WHEN q.seqincrement OPERATOR(pg_catalog.<) 0::bigint THEN q.seqmin ELSE q.seqmax END;
    -- Its counter goes to the fence, called: nothing more is drawn from it
    -- where the planner does not see the call, not even the values that
    -- it never handed out (issue 63's second review, F2: "never a sequence
    -- value"). Before it is listed: an ALTER SEQUENCE ... RESTART gives
    -- the sequence new storage, which a rollback takes back with it (an
    -- adoption undone leaves the counter where it was: regress adopt,
    -- "undone"), then PostgreSQL's own setval() there, called.
    PERFORM snowflake_id_internal.adopt_as_owner(seq::pg_catalog.oid,
        pg_catalog.format('ALTER SEQUENCE %s %s RESTART WITH %s', seq,
                          CASE WHEN q.seqcycle THEN 'NO CYCLE' ELSE '' END, fence));
    PERFORM snowflake_id_internal.adopt_as_owner(seq::pg_catalog.oid,
        pg_catalog.format('SELECT pg_catalog.setval(%s::pg_catalog.oid::pg_catalog.regclass, %s, true)',
                          seq::pg_catalog.oid, fence));
    INSERT INTO snowflake_id_internal.snowflake_adopted (seq, adopted_by) VALUES (seq, adopted_by)
        ON CONFLICT DO NOTHING;
    -- The security label that pg_dump writes with the sequence, so that a
    -- dump of the schema carries the adoption (issue 63; src/adopt/labels.rs).
    PERFORM snowflake_id_internal.adopt_label(seq);
END
$f$;
REVOKE ALL ON FUNCTION snowflake_id_internal.adopt_record(pg_catalog.regclass, text) FROM PUBLIC;


-- Which sequences of this database hand out Snowflake IDs. A
-- configuration table of the extension, so that pg_dump of the database
-- carries it (a sequence is stored by name: the restored one is adopted).
-- Only the extension's owner writes it; no role but the database's owner
-- may use the schema. Every change of it tells every backend of the
-- database to read it again and to plan its statements again.
CREATE TABLE snowflake_id_internal.snowflake_adopted (
    seq        pg_catalog.regclass PRIMARY KEY,
    adopted_by text NOT NULL
               CHECK (adopted_by OPERATOR(pg_catalog.=) ANY (ARRAY['superuser', 'switch', 'convert']::text[])),
    adopted_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_internal.snowflake_adopted', '');
REVOKE ALL ON snowflake_id_internal.snowflake_adopted FROM PUBLIC;
GRANT SELECT ON snowflake_id_internal.snowflake_adopted TO pg_database_owner;
COMMENT ON TABLE snowflake_id_internal.snowflake_adopted IS
'snowflake_id''s adopted sequences: their nextval() returns Snowflake IDs';

-- A logical-replication worker's rows (a FOR ALL TABLES publication
-- carries the extension's tables) name another server's OIDs and
-- switch: skipped, so that this database's list and switch stay its own
-- (issue 63, part 3). ENABLE ALWAYS, as the apply worker runs with
-- session_replication_role = replica; a TRUNCATE cannot be skipped, and
-- is refused. A C trigger (src/adopt/replica.rs), bound by OID.
CREATE FUNCTION snowflake_id_internal.adopt_skip_replicated() RETURNS trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'adopt_skip_replicated_wrapper';
REVOKE ALL ON FUNCTION snowflake_id_internal.adopt_skip_replicated() FROM PUBLIC;

-- Only existing permanent sequences: a restore, or a superuser by hand,
-- cannot list a number that some other relation may carry one day; a
-- sequence listed already is skipped.
CREATE FUNCTION snowflake_id_internal.adopt_check_row() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $t$
BEGIN
    -- A restore's row of a sequence its security label adopted already
    -- (pg_dump writes the label with the sequence, before the data).
    IF TG_OP OPERATOR(pg_catalog.=) 'INSERT'
       AND EXISTS (SELECT FROM snowflake_id_internal.snowflake_adopted a
                    WHERE a.seq OPERATOR(pg_catalog.=) NEW.seq) THEN
        RETURN NULL;
    END IF;
    -- A restore's row of a sequence narrowed since (the third red-team
    -- review, F2): skipped, with a WARNING, as its label is.
    IF TG_OP OPERATOR(pg_catalog.=) 'INSERT'
       AND EXISTS (SELECT FROM pg_catalog.pg_sequence q
                    WHERE q.seqrelid OPERATOR(pg_catalog.=) NEW.seq::pg_catalog.oid
                      AND q.seqtypid OPERATOR(pg_catalog.<>) 'pg_catalog.int8'::pg_catalog.regtype) THEN
        RAISE WARNING 'sequence % is not bigint: not adopted', NEW.seq;
        RETURN NULL;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_class c
                    WHERE c.oid OPERATOR(pg_catalog.=) NEW.seq::pg_catalog.oid
                      AND c.relkind OPERATOR(pg_catalog.=) 'S'
                      AND c.relpersistence OPERATOR(pg_catalog.<>) 't') THEN
        RAISE EXCEPTION '% is not a permanent sequence', NEW.seq USING ERRCODE = '42809';
    END IF;
    RETURN NEW;
END
$t$;
REVOKE ALL ON FUNCTION snowflake_id_internal.adopt_check_row() FROM PUBLIC;
CREATE TRIGGER snowflake_adopted_check
    BEFORE INSERT OR UPDATE ON snowflake_id_internal.snowflake_adopted
    FOR EACH ROW EXECUTE FUNCTION snowflake_id_internal.adopt_check_row();


-- Any change, by the functions below, by hand or by a restore: applied
-- to the server's table in shared memory when the transaction commits
-- (src/adopt/shared.rs), and every backend of the database drops its
-- plans.
CREATE FUNCTION snowflake_id_internal.adopt_changed_row(old_seq pg_catalog.oid, new_seq pg_catalog.oid) RETURNS void
VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'adopt_changed_row_wrapper';
REVOKE ALL ON FUNCTION snowflake_id_internal.adopt_changed_row(pg_catalog.oid, pg_catalog.oid) FROM PUBLIC;
CREATE FUNCTION snowflake_id_internal.adopt_changed_trigger() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $t$
BEGIN
    IF TG_OP OPERATOR(pg_catalog.=) 'TRUNCATE' THEN
        PERFORM snowflake_id_internal.adopt_changed_row(NULL, NULL);
    ELSIF TG_OP OPERATOR(pg_catalog.=) 'INSERT' THEN
        PERFORM snowflake_id_internal.adopt_changed_row(NULL, NEW.seq::pg_catalog.oid);
    ELSIF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
        PERFORM snowflake_id_internal.adopt_changed_row(OLD.seq::pg_catalog.oid, NULL);
    ELSE
        PERFORM snowflake_id_internal.adopt_changed_row(OLD.seq::pg_catalog.oid, NEW.seq::pg_catalog.oid);
    END IF;
    RETURN NULL;
END
$t$;
REVOKE ALL ON FUNCTION snowflake_id_internal.adopt_changed_trigger() FROM PUBLIC;
-- Row triggers: a statement that changes no row (the event trigger below
-- runs on every DROP of every role) sends nothing. A role that adopts
-- and drops its own converted sequences in a loop does make every
-- backend of the database plan again each time, as CREATE and DROP
-- OPERATOR do in PostgreSQL itself (docs/adopting.md).
CREATE TRIGGER snowflake_adopted_changed
    AFTER INSERT OR UPDATE OR DELETE ON snowflake_id_internal.snowflake_adopted
    FOR EACH ROW EXECUTE FUNCTION snowflake_id_internal.adopt_changed_trigger();
CREATE TRIGGER snowflake_adopted_truncated
    AFTER TRUNCATE ON snowflake_id_internal.snowflake_adopted
    FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_internal.adopt_changed_trigger();

-- A dropped sequence leaves the list at once: its OID may come back as
-- another role's relation. Runs as the extension's owner (a plain role
-- drops its own adopted sequence), on the extension's table only.
CREATE FUNCTION snowflake_id_internal.adopt_may_list(pg_catalog.oid[]) RETURNS boolean
STRICT VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'adopt_may_list_wrapper';
REVOKE ALL ON FUNCTION snowflake_id_internal.adopt_may_list(pg_catalog.oid[]) FROM PUBLIC;
CREATE FUNCTION snowflake_id_internal.adopt_forget_dropped() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
    dropped pg_catalog.oid[];
BEGIN
    SELECT pg_catalog.array_agg(d.objid) INTO dropped
      FROM pg_catalog.pg_event_trigger_dropped_objects() d
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
       AND d.objsubid OPERATOR(pg_catalog.=) 0
       AND d.object_type OPERATOR(pg_catalog.=) 'sequence';
    -- None of them adopted, as shared memory says now: the list is not
    -- touched (no lock on it to wait for).
    IF dropped IS NULL OR NOT snowflake_id_internal.adopt_may_list(dropped) THEN
        RETURN;
    END IF;
    DELETE FROM snowflake_id_internal.snowflake_adopted a
     WHERE a.seq::pg_catalog.oid OPERATOR(pg_catalog.=) ANY (dropped);
    -- In REPEATABLE READ the DELETE cannot see an adoption committed after
    -- this transaction's snapshot: fail rather than leave its OID listed.
    IF snowflake_id_internal.adopt_listed_now(dropped) THEN
        RAISE EXCEPTION 'could not serialize access due to a concurrent adoption of a sequence this statement drops'
              USING ERRCODE = '40001', HINT = 'Run the statement again in a new transaction.';
    END IF;
END
$f$;
REVOKE ALL ON FUNCTION snowflake_id_internal.adopt_forget_dropped() FROM PUBLIC;
CREATE EVENT TRIGGER snowflake_adopt_forget_dropped ON sql_drop
    EXECUTE FUNCTION snowflake_id_internal.adopt_forget_dropped();

-- snowflake_adopt_sequence(seq regclass): see src/adopt/mod.rs.
CREATE FUNCTION snowflake_adopt_sequence(seq regclass) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $adopt$
DECLARE
    s       record;
    col     record;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles r
                    WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER AND r.rolsuper) THEN
        RAISE EXCEPTION 'must be superuser to adopt a sequence' USING ERRCODE = '42501';
    END IF;
    -- Refuses (55000) unless the library is preloaded.
    PERFORM snowflake_id_internal.adopt_changed(true);
    SELECT c.relkind, c.relpersistence, c.relowner, q.seqtypid::pg_catalog.regtype AS typ INTO s
      FROM pg_catalog.pg_class c
      LEFT JOIN pg_catalog.pg_sequence q ON q.seqrelid OPERATOR(pg_catalog.=) c.oid
     WHERE c.oid OPERATOR(pg_catalog.=) seq;
    IF s.relkind IS DISTINCT FROM 'S' THEN
        RAISE EXCEPTION '"%" is not a sequence', seq USING ERRCODE = '42809';
    END IF;
    IF s.relpersistence OPERATOR(pg_catalog.=) 't' THEN
        RAISE EXCEPTION 'temporary sequence "%" cannot be adopted', seq USING ERRCODE = '0A000',
              DETAIL = 'It ends with its session, without a DROP that would take it off the list.';
    END IF;
    IF s.typ IS DISTINCT FROM 'bigint'::pg_catalog.regtype THEN
        RAISE EXCEPTION 'sequence "%" is of type %, which cannot hold a Snowflake ID', seq, s.typ
              USING ERRCODE = '42804',
                    HINT = 'Widen it first: ALTER SEQUENCE ... AS bigint, and the columns that take its values to bigint (snowflake_convert_column() does both).';
    END IF;
    -- Column defaults that are exactly nextval() of it must be able to
    -- hold its values. The defaults stay as they are (issue 63: the
    -- catalog is the application's): the planner, and COPY's swap
    -- (src/adopt/copy.rs), make their draws Snowflake IDs.
    FOR col IN
        SELECT ad.adrelid::pg_catalog.regclass AS tbl, a.attname, a.atttypid::pg_catalog.regtype AS typ,
               pg_catalog.pg_get_expr(ad.adbin, ad.adrelid) AS expr,
               pg_catalog.pg_get_expr(ad.adbin, ad.adrelid)
                   OPERATOR(pg_catalog.=) ('nextval(''' OPERATOR(pg_catalog.||) pg_catalog.replace(
                       CASE WHEN pg_catalog.current_setting('standard_conforming_strings') OPERATOR(pg_catalog.=) 'off'
                            THEN pg_catalog.replace(seq::text, pg_catalog.chr(92), pg_catalog.chr(92) OPERATOR(pg_catalog.||) pg_catalog.chr(92))
                            ELSE seq::text END, '''', '''''') OPERATOR(pg_catalog.||) '''::regclass)') AS plain,
               EXISTS (SELECT FROM pg_catalog.pg_depend fd
                         JOIN pg_catalog.pg_depend ed
                           ON ed.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                          AND ed.objid OPERATOR(pg_catalog.=) fd.refobjid
                          AND ed.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                          AND ed.deptype OPERATOR(pg_catalog.=) 'e'
                         JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) ed.refobjid
                                                      AND e.extname OPERATOR(pg_catalog.=) 'snowflake_id'
                         JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) fd.refobjid
                                                  AND p.proname OPERATOR(pg_catalog.=) 'snowflake_nextval_for'
                        WHERE fd.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
                          AND fd.objid OPERATOR(pg_catalog.=) ad.oid
                          AND fd.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass)
               AND pg_catalog.pg_get_expr(ad.adbin, ad.adrelid) OPERATOR(pg_catalog.~) '^[^()]*\([^()]*\)$' AS adopted,
               t.relowner OPERATOR(pg_catalog.=) s.relowner AS same_owner
          FROM pg_catalog.pg_depend d
          JOIN pg_catalog.pg_attrdef ad ON ad.oid OPERATOR(pg_catalog.=) d.objid
          JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) ad.adrelid
                                        AND a.attnum OPERATOR(pg_catalog.=) ad.adnum
          JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) ad.adrelid
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) seq
         ORDER BY 1, 2
    LOOP
        -- Another role's table cannot stop the adoption (issue 57's
        -- review, F4): only the sequence owner's are held to this.
        CONTINUE WHEN col.adopted OR NOT (col.plain AND col.same_owner);
        IF col.typ IS DISTINCT FROM 'bigint'::pg_catalog.regtype THEN
            RAISE EXCEPTION 'column %.% takes values of sequence "%" but is of type %, which cannot hold a Snowflake ID',
                            col.tbl, pg_catalog.quote_ident(col.attname), seq, col.typ
                  USING ERRCODE = '42804',
                        HINT = 'Widen the column to bigint first, or convert it with snowflake_convert_column().';
        END IF;
    END LOOP;
    PERFORM snowflake_id_internal.adopt_record(seq, 'superuser');
END
$adopt$;
REVOKE ALL ON FUNCTION snowflake_adopt_sequence(regclass) FROM PUBLIC;
COMMENT ON FUNCTION snowflake_adopt_sequence(regclass) IS
'makes nextval(), currval() and lastval() of a bigint sequence return Snowflake IDs in this database (superuser)';

-- The switch of this database (snowflake_adopt_sequences()): one row, a
-- configuration table, so that pg_dump carries it. The row's trigger
-- mirrors it into the database's settings (ALTER DATABASE ... SET
-- snowflake_id.adopt_sequences), where the server-wide view
-- snowflake_adopting_databases reads it; a restore of the row sets it too.
CREATE TABLE snowflake_id_internal.snowflake_adopt_switch (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    enabled    boolean NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_internal.snowflake_adopt_switch', '');
REVOKE ALL ON snowflake_id_internal.snowflake_adopt_switch FROM PUBLIC;
GRANT SELECT ON snowflake_id_internal.snowflake_adopt_switch TO pg_database_owner;
COMMENT ON TABLE snowflake_id_internal.snowflake_adopt_switch IS
'snowflake_id''s switch: while enabled, new bigserial, bigint identity columns and bigint sequences are adopted';
-- The row's trigger also keeps the switch's carrier in step with it
-- (src/adopt/switch.rs: the event trigger that pg_dump -s carries): made
-- while the switch is on, dropped while it is off, whichever way the row
-- changed (snowflake_adopt_sequences(), a restore's row).
CREATE FUNCTION snowflake_id_internal.adopt_switch_mirror() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $t$
DECLARE
    t pg_catalog.name;
    off boolean;
BEGIN
    IF TG_OP OPERATOR(pg_catalog.=) ANY (ARRAY['DELETE', 'TRUNCATE']::pg_catalog.text[]) THEN
        off := true;
    ELSE
        off := NOT NEW.enabled;
    END IF;
    IF off THEN
        EXECUTE pg_catalog.format('ALTER DATABASE %I RESET snowflake_id.adopt_sequences', pg_catalog.current_database());
        FOR t IN SELECT e.evtname FROM pg_catalog.pg_event_trigger e
                  WHERE e.evtfoid OPERATOR(pg_catalog.=) 'pg_catalog.snowflake_id_switch()'::pg_catalog.regprocedure LOOP
            EXECUTE pg_catalog.format('DROP EVENT TRIGGER %I', t);
        END LOOP;
    ELSE
        EXECUTE pg_catalog.format('ALTER DATABASE %I SET snowflake_id.adopt_sequences = on', pg_catalog.current_database());
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_event_trigger e
                        WHERE e.evtfoid OPERATOR(pg_catalog.=) 'pg_catalog.snowflake_id_switch()'::pg_catalog.regprocedure) THEN
            CREATE EVENT TRIGGER snowflake_id_switch ON ddl_command_end EXECUTE FUNCTION pg_catalog.snowflake_id_switch();
            ALTER EVENT TRIGGER snowflake_id_switch DISABLE;
        END IF;
        -- One restored where the library was not preloaded has no
        -- dependency on the extension yet: it gets it now.
        PERFORM snowflake_id_internal.adopt_carrier_depends();
    END IF;
    RETURN NULL;
END
$t$;
REVOKE ALL ON FUNCTION snowflake_id_internal.adopt_switch_mirror() FROM PUBLIC;
CREATE TRIGGER snowflake_adopt_switch_mirror
    AFTER INSERT OR UPDATE OR DELETE ON snowflake_id_internal.snowflake_adopt_switch
    FOR EACH ROW EXECUTE FUNCTION snowflake_id_internal.adopt_switch_mirror();
-- A TRUNCATE of the row turns the switch off too, carrier included (the
-- red-team review of 9f88041, F4).
CREATE TRIGGER snowflake_adopt_switch_mirror_truncate
    AFTER TRUNCATE ON snowflake_id_internal.snowflake_adopt_switch
    FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_internal.adopt_switch_mirror();
-- A row inserted where there is one already is merged into it: a data
-- restore after a schema restore whose carrier turned the switch on
-- (pg_restore -s, then -a) failed on the row (23505; the red-team review
-- of 3462e24, F1). Fires after the replicas' trigger (names in order).
CREATE FUNCTION snowflake_id_internal.adopt_switch_merge() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $t$
BEGIN
    IF EXISTS (SELECT FROM snowflake_id_internal.snowflake_adopt_switch) THEN
        UPDATE snowflake_id_internal.snowflake_adopt_switch s
           SET enabled = NEW.enabled, changed_at = NEW.changed_at
         WHERE s.enabled IS DISTINCT FROM NEW.enabled;
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$t$;
REVOKE ALL ON FUNCTION snowflake_id_internal.adopt_switch_merge() FROM PUBLIC;
CREATE TRIGGER snowflake_adopt_switch_merge
    BEFORE INSERT ON snowflake_id_internal.snowflake_adopt_switch
    FOR EACH ROW EXECUTE FUNCTION snowflake_id_internal.adopt_switch_merge();
-- The list's and the switch's rows from a logical-replication worker
-- are skipped (adopt_skip_replicated, above), ENABLE ALWAYS.
DO $from_replica$
DECLARE
    t pg_catalog.text;
BEGIN
    FOREACH t IN ARRAY ARRAY['snowflake_adopted', 'snowflake_adopt_switch']::pg_catalog.text[] LOOP
        EXECUTE pg_catalog.format('CREATE TRIGGER %I BEFORE INSERT OR UPDATE OR DELETE ON snowflake_id_internal.%I '
                                  'FOR EACH ROW EXECUTE FUNCTION snowflake_id_internal.adopt_skip_replicated()',
                                  t OPERATOR(pg_catalog.||) '_from_replica', t);
        EXECUTE pg_catalog.format('CREATE TRIGGER %I BEFORE TRUNCATE ON snowflake_id_internal.%I '
                                  'FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_internal.adopt_skip_replicated()',
                                  t OPERATOR(pg_catalog.||) '_truncate_from_replica', t);
        EXECUTE pg_catalog.format('ALTER TABLE snowflake_id_internal.%I ENABLE ALWAYS TRIGGER %I, ENABLE ALWAYS TRIGGER %I',
                                  t, t OPERATOR(pg_catalog.||) '_from_replica', t OPERATOR(pg_catalog.||) '_truncate_from_replica');
    END LOOP;
END
$from_replica$;
-- So are the online conversion's progress rows (issue 63, part 3: a FOR
-- ALL TABLES publication showed the publisher's conversions in the
-- subscriber's snowflake_convert_status, and gave its steps rows that are
-- not its own; toolbox.sh scenario 9). The trigger function is C, bound
-- by OID: a plain role's conversion writes these rows through it.
CREATE TRIGGER snowflake_convert_progress_from_replica
    BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.snowflake_convert_progress
    FOR EACH ROW EXECUTE FUNCTION snowflake_id_internal.adopt_skip_replicated();
CREATE TRIGGER snowflake_convert_progress_truncate_from_replica
    BEFORE TRUNCATE ON @extschema@.snowflake_convert_progress
    FOR EACH STATEMENT EXECUTE FUNCTION snowflake_id_internal.adopt_skip_replicated();
ALTER TABLE @extschema@.snowflake_convert_progress
    ENABLE ALWAYS TRIGGER snowflake_convert_progress_from_replica,
    ENABLE ALWAYS TRIGGER snowflake_convert_progress_truncate_from_replica;

-- The switch's carrier in a schema dump (src/adopt/switch.rs): while the
-- switch is on, a disabled event trigger, no member of the extension,
-- runs this function (which does nothing). pg_dump -s writes the trigger,
-- last of all; restored, it turns the switch on after the restore's own
-- tables and sequences. In pg_catalog, where only a superuser creates
-- functions: a restore whose CREATE EXTENSION failed finds no function
-- of that name, and creates no trigger.
CREATE FUNCTION pg_catalog.snowflake_id_switch() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $carrier$ BEGIN END $carrier$;
REVOKE ALL ON FUNCTION pg_catalog.snowflake_id_switch() FROM PUBLIC;
COMMENT ON FUNCTION pg_catalog.snowflake_id_switch() IS
'internal to snowflake_id: what the event trigger that carries the switch through pg_dump -s runs (nothing)';
CREATE FUNCTION snowflake_id_internal.adopt_carrier_depends() RETURNS void
VOLATILE PARALLEL UNSAFE LANGUAGE c AS 'MODULE_PATHNAME', 'adopt_carrier_depends_wrapper';
REVOKE ALL ON FUNCTION snowflake_id_internal.adopt_carrier_depends() FROM PUBLIC;
-- The switch itself (its row; the row's trigger keeps the carrier), as a
-- superuser's snowflake_adopt_sequences() and a restored carrier turn it.
CREATE FUNCTION snowflake_id_internal.adopt_switch(enabled boolean) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $switch$
BEGIN
    IF enabled THEN
        PERFORM snowflake_id_internal.adopt_changed(true);
    END IF;
    INSERT INTO snowflake_id_internal.snowflake_adopt_switch AS s (enabled) VALUES (enabled)
        ON CONFLICT (singleton) DO UPDATE SET enabled = EXCLUDED.enabled, changed_at = pg_catalog.now()
        WHERE s.enabled IS DISTINCT FROM EXCLUDED.enabled;
END
$switch$;
REVOKE ALL ON FUNCTION snowflake_id_internal.adopt_switch(boolean) FROM PUBLIC;

-- snowflake_adopt_sequences(enabled boolean DEFAULT true): see src/adopt/mod.rs.
CREATE FUNCTION snowflake_adopt_sequences(enabled boolean DEFAULT true) RETURNS boolean
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $switch$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles r
                    WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER AND r.rolsuper) THEN
        RAISE EXCEPTION 'must be superuser to switch the adoption of sequences' USING ERRCODE = '42501';
    END IF;
    PERFORM snowflake_id_internal.adopt_switch(enabled);
    RETURN enabled;
END
$switch$;
REVOKE ALL ON FUNCTION snowflake_adopt_sequences(boolean) FROM PUBLIC;
COMMENT ON FUNCTION snowflake_adopt_sequences(boolean) IS
'while on, every new bigserial, bigint identity column and bigint sequence of this database is adopted (superuser)';

-- The keys of this database that adoption leaves alone, and why (issue
-- 63): a column narrower than bigint that draws from a sequence (serial,
-- an integer identity), and a sequence of its own narrower than bigint.
-- The switch says so with a NOTICE, which ORMs swallow. Read with the
-- view owner's rights (the list is not readable by every role); it names
-- only what pg_class shows every role.
CREATE VIEW snowflake_keys_left_alone AS
SELECT c.oid::pg_catalog.regclass AS table_name,
       a.attname AS column_name,
       q.seqrelid::pg_catalog.regclass AS sequence_name,
       pg_catalog.format('the column is %s, which cannot hold a Snowflake ID',
                         pg_catalog.format_type(a.atttypid, NULL)) AS reason
  FROM pg_catalog.pg_sequence q
  JOIN pg_catalog.pg_depend d
    ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
   AND d.objid OPERATOR(pg_catalog.=) q.seqrelid
   AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
   AND d.refobjsubid OPERATOR(pg_catalog.>) 0::pg_catalog.int4
   AND d.deptype OPERATOR(pg_catalog.=) ANY (ARRAY['a', 'i']::"char"[])
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) d.refobjid
  JOIN pg_catalog.pg_attribute a
    ON a.attrelid OPERATOR(pg_catalog.=) d.refobjid AND a.attnum OPERATOR(pg_catalog.=) d.refobjsubid
 WHERE a.atttypid OPERATOR(pg_catalog.<>) 'pg_catalog.int8'::pg_catalog.regtype
   AND c.relpersistence OPERATOR(pg_catalog.<>) 't'
   AND NOT EXISTS (SELECT FROM snowflake_id_internal.snowflake_adopted l
                    WHERE l.seq::pg_catalog.oid OPERATOR(pg_catalog.=) q.seqrelid)
UNION ALL
SELECT NULL, NULL, q.seqrelid::pg_catalog.regclass,
       pg_catalog.format('the sequence is %s, which cannot hold a Snowflake ID', q.seqtypid::pg_catalog.regtype)
  FROM pg_catalog.pg_sequence q
  JOIN pg_catalog.pg_class s ON s.oid OPERATOR(pg_catalog.=) q.seqrelid
 WHERE q.seqtypid OPERATOR(pg_catalog.<>) 'pg_catalog.int8'::pg_catalog.regtype
   AND s.relpersistence OPERATOR(pg_catalog.<>) 't'
   AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
                    WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                      AND d.objid OPERATOR(pg_catalog.=) q.seqrelid
                      AND d.deptype OPERATOR(pg_catalog.=) ANY (ARRAY['a', 'i', 'e']::"char"[]));
COMMENT ON VIEW snowflake_keys_left_alone IS
'the keys of this database that adoption leaves alone (narrower than bigint), and why';
GRANT SELECT ON snowflake_keys_left_alone TO PUBLIC;

-- The databases whose switch is on, server-wide (their settings).
CREATE VIEW snowflake_adopting_databases AS
SELECT d.datname AS database
  FROM pg_catalog.pg_db_role_setting s
  JOIN pg_catalog.pg_database d ON d.oid OPERATOR(pg_catalog.=) s.setdatabase
 WHERE s.setrole OPERATOR(pg_catalog.=) 0::pg_catalog.oid
   AND 'snowflake_id.adopt_sequences=on'::pg_catalog.text OPERATOR(pg_catalog.=) ANY (s.setconfig);
COMMENT ON VIEW snowflake_adopting_databases IS
'the databases of this server where snowflake_adopt_sequences() is on';

-- While the switch is on: each sequence the command created for a
-- bigint column (bigserial, or GENERATED ... AS IDENTITY), and each bigint
-- sequence it created alone, is adopted; the columns stay as the command
-- made them. Columns and sequences narrower than bigint keep theirs, with
-- a NOTICE. The fence runs as the sequence's owner
-- (snowflake_convert_as_owner); this function itself reads catalogs and
-- writes the extension's table only.
CREATE FUNCTION snowflake_id_internal.adopt_new_sequences() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
    c        record;
    seqs     pg_catalog.oid[];
    s        pg_catalog.oid;
BEGIN
    IF NOT EXISTS (SELECT FROM snowflake_id_internal.snowflake_adopt_switch w WHERE w.enabled) THEN
        RETURN;
    END IF;
    SELECT pg_catalog.array_agg(DISTINCT cmd.objid) INTO seqs
      FROM pg_catalog.pg_event_trigger_ddl_commands() cmd
     WHERE cmd.object_type OPERATOR(pg_catalog.=) 'sequence' AND NOT cmd.in_extension;
    IF seqs IS NULL THEN
        RETURN;
    END IF;
    FOREACH s IN ARRAY seqs LOOP
        SELECT q.seqrelid::pg_catalog.regclass AS seq, q.seqtypid::pg_catalog.regtype AS seqtyp, q.seqincrement,
               d.refobjid::pg_catalog.regclass AS tbl, a.attname, a.atttypid::pg_catalog.regtype AS typ, d.deptype,
               a.attidentity,
               sc.relpersistence
          INTO c
          FROM pg_catalog.pg_sequence q
          JOIN pg_catalog.pg_class sc ON sc.oid OPERATOR(pg_catalog.=) q.seqrelid
          LEFT JOIN pg_catalog.pg_depend d
                 ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                AND d.objid OPERATOR(pg_catalog.=) q.seqrelid
                AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                AND d.refobjsubid OPERATOR(pg_catalog.>) 0
                AND d.deptype OPERATOR(pg_catalog.=) ANY (ARRAY['a', 'i']::"char"[])
          LEFT JOIN pg_catalog.pg_attribute a
                 ON a.attrelid OPERATOR(pg_catalog.=) d.refobjid AND a.attnum OPERATOR(pg_catalog.=) d.refobjsubid
         WHERE q.seqrelid OPERATOR(pg_catalog.=) s;
        CONTINUE WHEN NOT FOUND;  -- dropped by the same command
        -- A temporary one ends without a DROP that would take it off the
        -- list: never adopted.
        CONTINUE WHEN c.relpersistence OPERATOR(pg_catalog.=) 't';
        IF c.tbl IS NULL THEN
            -- A sequence of its own (CREATE SEQUENCE; SQLAlchemy's
            -- Sequence(), Hibernate's SEQUENCE strategy).
            IF c.seqtyp IS DISTINCT FROM 'bigint'::pg_catalog.regtype THEN
                RAISE NOTICE 'sequence % is of type %, which cannot hold a Snowflake ID: not adopted', c.seq, c.seqtyp
                      USING HINT = 'Create it AS bigint (the default) to have it adopted.';
                -- ORMs swallow NOTICEs (issue 63): the server log says it
                -- too, and the view snowflake_keys_left_alone lists it.
                RAISE LOG 'snowflake_id: sequence % of database % is of type %, which cannot hold a Snowflake ID: not adopted',
                          c.seq, pg_catalog.current_database(), c.seqtyp;
                CONTINUE;
            END IF;
            PERFORM snowflake_id_internal.adopt_record(c.seq, 'switch');
            CONTINUE;
        END IF;
        IF c.typ IS DISTINCT FROM 'bigint'::pg_catalog.regtype THEN
            RAISE NOTICE 'column %.% is of type %, which cannot hold a Snowflake ID: it keeps its sequence',
                         c.tbl, pg_catalog.quote_ident(c.attname), c.typ
                  USING HINT = 'Declare it bigserial or bigint GENERATED AS IDENTITY, or widen it later with snowflake_convert_column().';
            RAISE LOG 'snowflake_id: column %.% of database % is of type %, which cannot hold a Snowflake ID: it keeps its sequence',
                      c.tbl, pg_catalog.quote_ident(c.attname), pg_catalog.current_database(), c.typ;
            CONTINUE;
        END IF;
        -- The column stays as the command made it (issue 63): a
        -- bigserial's default nextval() of its sequence, an identity an
        -- identity. The planner, and COPY's swap (src/adopt/copy.rs),
        -- make its draws Snowflake IDs; the fence (adopt_record) puts
        -- its counter at the end of its range (past the rows an ADD
        -- COLUMN filled).
        PERFORM snowflake_id_internal.adopt_record(c.seq, 'switch');
    END LOOP;
END
$f$;
REVOKE ALL ON FUNCTION snowflake_id_internal.adopt_new_sequences() FROM PUBLIC;
CREATE EVENT TRIGGER snowflake_adopt_new_sequences ON ddl_command_end
    WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE SEQUENCE')
    EXECUTE FUNCTION snowflake_id_internal.adopt_new_sequences();
