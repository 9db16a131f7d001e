\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.8.0'" to load this file. \quit
/* snowflake_id 0.7.0 -> 0.8.0: security fixes.
 * - The high-water mark lives in the databases: the table
 *   snowflake_high_water (src/sql/high_water.sql), written by the
 *   library's high-water launcher in every database that has the
 *   extension; snowflake_high_water() shows the server's mark and
 *   snowflake_write_high_water() (superuser only) writes it now. No
 *   snowflake_nextval() reads user tables any more.
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
 * - No SQL, in the library (restart): snowflake_id.bulk_lead_share caps one
 *   snowflake_nextval(count) call's share of max_lead (F7);
 *   snowflake_id.public_keys_file keeps the keys of public IDs outside the
 *   data directory (F8).
 * The functions after the generated-from line are generated from the
 * files under src/sql; statements written by hand come before it.
 * Restart to run the 0.8.0 library first, then run ALTER EXTENSION
 * snowflake_id UPDATE in every database that has the extension: until
 * then a database without the table carries no mark.
 */
-- F3: the policy and the view of src/sql/convert_online_progress.sql,
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

CREATE FUNCTION snowflake_high_water_raise(
	"worker_id" INT,
	"epoch_ms" bigint,
	"worker_bits" INT,
	"sequence_bits" INT,
	"mark_ms" bigint
) RETURNS bool
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_high_water_raise_wrapper';

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

-- Generated by scripts/upgrade_script.py from: src/sql/high_water.sql src/sql/convert_online.sql:snowflake_convert_online_step_body src/sql/convert_online.sql:snowflake_convert_new_name src/sql/convert_online.sql:snowflake_convert_online src/sql/fleet_check.sql

-- The server-wide high-water mark, one copy in every database that has
-- the extension: see src/high_water.rs. A WAL-logged table, so that
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
-- at once, before the next round reads it: src/high_water.rs.
CREATE FUNCTION snowflake_high_water_restored() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM @extschema@.snowflake_high_water_raise(NEW.worker_id, NEW.epoch_ms, NEW.worker_bits,
                                                  NEW.sequence_bits, NEW.mark_ms);
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION snowflake_high_water_restored() FROM PUBLIC;
CREATE TRIGGER raise_generator AFTER INSERT OR UPDATE ON snowflake_id_internal.snowflake_high_water
    FOR EACH ROW EXECUTE FUNCTION snowflake_high_water_restored();
REVOKE ALL ON FUNCTION snowflake_high_water_raise(integer, bigint, integer, integer, bigint) FROM PUBLIC;
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
    target   regprocedure := '@extschema@.snowflake_nextval()'::regprocedure;
BEGIN
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
            IF (SELECT a2.attidentity FROM pg_attribute a2 WHERE a2.attrelid = p.rel AND a2.attnum = p.attnum) = 'a' THEN
                RAISE NOTICE 'column %.% no longer rejects explicit values', p.rel, p.rel_col
                    USING DETAIL = 'It was GENERATED ALWAYS AS IDENTITY; a DEFAULT lets an INSERT supply its own value.',
                          HINT = 'Revoke INSERT on the column from roles that must not choose keys, if that protection mattered.';
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
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %s()', $1, $2, target::regproc);
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

-- snowflake_node and snowflake_fleet_check(): see src/fleet_check.rs.
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
