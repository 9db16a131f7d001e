-- The online conversion: see src/convert/convert_online.rs for what it does, in
-- which steps, and why it is driven by a procedure and a psql \gexec.
-- Included in the install script by extension_sql_file!; edit it here,
-- then regenerate sql/snowflake_id--<version>.sql (the lint says how).

-- Refuse every write that does not come from the conversion itself: the
-- steps run as the caller, so privileges alone cannot close the table.
CREATE FUNCTION snowflake_convert_progress_guard() RETURNS trigger
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
CREATE TRIGGER snowflake_convert_progress_guard
    BEFORE INSERT OR UPDATE OR DELETE ON snowflake_convert_progress
    FOR EACH ROW EXECUTE FUNCTION snowflake_convert_progress_guard();

GRANT SELECT ON snowflake_convert_status TO PUBLIC;

-- The trigger that keeps a new column equal to the old one while the
-- application writes: TG_ARGV holds pairs (old column, new column).
CREATE FUNCTION snowflake_convert_sync() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $sync$
DECLARE
    r   jsonb := to_jsonb(NEW);
    set jsonb := '{}';
    i   integer;
BEGIN
    FOR i IN 0 .. TG_NARGS / 2 - 1 LOOP
        set := set || jsonb_build_object(TG_ARGV[2 * i + 1], r -> TG_ARGV[2 * i]);
    END LOOP;
    NEW := jsonb_populate_record(NEW, set);
    RETURN NEW;
END;
$sync$;
COMMENT ON FUNCTION snowflake_convert_sync() IS
'Trigger of snowflake_convert_online(): copies each old key column into its new bigint column';

-- The name of the bigint column that replaces COL while converting.
CREATE FUNCTION snowflake_convert_new_name(col name) RETURNS name
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT left(col::text, 40) || '_snowflake_new' $$;

-- The columns an online conversion of TBL.COL widens, as the catalog says
-- now: the key, if it is still narrow, and each narrow column that
-- references it through a single-column foreign key (the only references
-- an online conversion accepts), each with the name of the bigint column
-- that replaces it; the caller must own every table (42501). What every
-- step acts on is checked against this, never taken from a row alone.
-- Read straight from the catalog, so that backing out works even when the
-- offline conversion's checks would now refuse the column.
CREATE FUNCTION snowflake_convert_online_columns(tbl regclass, col name)
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

-- The indexes the online conversion needs, as statements to run at the
-- top level (CONCURRENTLY cannot run in a function): one per index on a
-- column being widened, on the new column. A build that failed (an
-- INVALID index) is dropped and started again.
CREATE FUNCTION snowflake_convert_online_indexes(tbl regclass, col name)
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

-- Cancel the autovacuum workers that hold a lock on one of RELS, as
-- PostgreSQL itself does for a session that has waited deadlock_timeout
-- behind one: the conversion's lock requests time out sooner than that,
-- so it must do it itself. Not one that prevents wraparound; nor where
-- the caller may not signal autovacuum workers (they are then waited for,
-- within the retries). Returns how many were cancelled. A worker's query
-- text is hidden from roles without pg_read_all_stats, so whether it
-- prevents wraparound is also judged from the table's own ages, which
-- everyone may read: past autovacuum_freeze_max_age (or the multixact
-- one, or the table's own settings of either), the worker is left alone.
CREATE FUNCTION snowflake_convert_cancel_autovacuum(rels oid[])
RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $av$
DECLARE
    w  record;
    n  integer := 0;
BEGIN
    FOR w IN SELECT DISTINCT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
              JOIN pg_class c ON c.oid = l.relation
              WHERE l.locktype = 'relation' AND l.relation = ANY (rels) AND l.granted
                AND a.backend_type = 'autovacuum worker'
                AND coalesce(a.query NOT LIKE '%to prevent wraparound%', true)
                AND age(c.relfrozenxid) <= coalesce(
                        (SELECT o.option_value::bigint FROM pg_options_to_table(c.reloptions) o
                          WHERE o.option_name = 'autovacuum_freeze_max_age'),
                        current_setting('autovacuum_freeze_max_age')::bigint)
                AND mxid_age(c.relminmxid) <= coalesce(
                        (SELECT o.option_value::bigint FROM pg_options_to_table(c.reloptions) o
                          WHERE o.option_name = 'autovacuum_multixact_freeze_max_age'),
                        current_setting('autovacuum_multixact_freeze_max_age')::bigint)
    LOOP
        BEGIN
            IF pg_cancel_backend(w.pid) THEN
                n := n + 1;
            END IF;
        EXCEPTION WHEN insufficient_privilege THEN
            NULL;
        END;
    END LOOP;
    RETURN n;
END;
$av$;
COMMENT ON FUNCTION snowflake_convert_cancel_autovacuum(oid[]) IS
'Cancel the autovacuum workers (not for wraparound) that hold locks on these relations; used by snowflake_convert_online()';

-- One unit of work of the online conversion, in the caller's transaction:
-- the procedure commits after each. Returns the phase to continue with,
-- 'retry' when a lock was not granted within lock_wait (nothing was done),
-- 'indexes' when it waits for the indexes, or 'done'. Run through
-- snowflake_convert_online_step(), the only way its writes of the
-- progress table are let through.
CREATE FUNCTION snowflake_convert_online_step_body(tbl regclass, col name, batch_pages integer, lock_wait interval)
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

CREATE FUNCTION snowflake_convert_online_step(tbl regclass, col name, batch_pages integer, lock_wait interval)
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

-- The online conversion, as far as it can go in one call: it commits
-- after every unit of work, so it must be CALLed outside a transaction
-- block. It stops when the indexes must be built (CONCURRENTLY, at the top
-- level), and when the conversion is done. Running it again resumes.
-- A procedure that commits cannot have SET search_path, so it runs with
-- the caller's: every type, function and operator is qualified, and every
-- constant has exactly the type of its operator's other argument (an
-- operator of exactly (real, integer) in any schema of the path would
-- otherwise win over pg_catalog's >(real, real)). scripts/check_sql_operators.py
-- checks it.
CREATE PROCEDURE snowflake_convert_online(tbl regclass, col name,
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

-- Back out of an online conversion that has not swapped yet: drop the
-- triggers and the new columns (with the indexes and constraints built on
-- them) and forget the progress. After the swap there is nothing to undo,
-- and only the record is removed. Takes ACCESS EXCLUSIVE on each table for
-- a catalog change.
CREATE FUNCTION snowflake_convert_online_abandon_body(tbl regclass, col name)
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

CREATE FUNCTION snowflake_convert_online_abandon(tbl regclass, col name)
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
