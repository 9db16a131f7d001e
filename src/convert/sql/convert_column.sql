-- snowflake_convert_column(tbl regclass, col name) and
-- snowflake_convert_plan(tbl regclass, col name): see src/convert/convert_column.rs
-- for what they do and why they are PL/pgSQL. Included in the install
-- script by extension_sql_file!; edit it here, then regenerate
-- sql/snowflake_id--<version>.sql (the lint says how).

-- The one implementation of both: the steps of a conversion, carried out
-- unless dry_run, each with the relation it locks.
CREATE FUNCTION snowflake_convert_column_steps(tbl regclass, col name, dry_run boolean)
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

CREATE FUNCTION snowflake_convert_column(tbl regclass, col name)
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
CREATE FUNCTION snowflake_convert_rewrite_rate(rel regclass, col name,
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
CREATE FUNCTION snowflake_convert_plan(tbl regclass, col name)
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
