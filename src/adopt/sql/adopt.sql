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
