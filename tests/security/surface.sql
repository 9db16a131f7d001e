-- The protections that held on 0.6.0, so that a regression shows, and the
-- smaller findings of the review.
\set ON_ERROR_STOP 1
\c - postgres
-- The only SECURITY DEFINER functions are the worker-id registry's,
-- which let the registry's members (granted EXECUTE by its administrator)
-- claim, renew and release leases without writing its table
-- (src/lease/sql/registry.sql), and the two event trigger functions of
-- adopted sequences (src/adopt/sql/adopt.sql), which write the list of
-- adopted sequences on any role's DDL and run that role's table changes
-- as the table's owner (security adopt.sql): nobody may call them, and
-- they pin search_path like every SQL and PL/pgSQL function but the
-- procedure.
SELECT sectest.check(coalesce(string_agg(p.proname, ', ' ORDER BY p.proname), '') =
                     'adopt_forget_dropped, adopt_new_sequences, snowflake_registry_claim, snowflake_registry_release, snowflake_registry_renew, snowflake_registry_settings',
                     'only the registry''s functions are SECURITY DEFINER: '
                     || coalesce(string_agg(p.proname, ', ' ORDER BY p.proname), ''))
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'snowflake_id') AND p.prosecdef;
SELECT sectest.check(count(*) = 0, 'PUBLIC may run a SECURITY DEFINER function: '
                                   || coalesce(string_agg(p.proname, ', '), ''))
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'snowflake_id') AND p.prosecdef
   AND has_function_privilege('public', p.oid, 'EXECUTE');
SELECT sectest.check(count(*) = 0, 'every SQL and PL/pgSQL function pins search_path (but the procedure): '
                                   || coalesce(string_agg(p.proname, ', '), ''))
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_language l ON l.oid = p.prolang
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'snowflake_id')
   AND l.lanname IN ('sql', 'plpgsql') AND p.prokind = 'f'
   AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false);

-- Non-owners: 42501 from every conversion function, before anything.
\c - mallory
SELECT sectest.refused($$SELECT * FROM snowflake_convert_column('app.accounts', 'id')$$, '42501');
SELECT sectest.refused($$SELECT * FROM snowflake_convert_plan('app.accounts', 'id')$$, '42501');
SELECT sectest.refused($$CALL snowflake_convert_online('app.accounts', 'id')$$, '42501');
-- snowflake_convert_rewrite_rate: ownership and arguments are checked.
SELECT sectest.refused($$SELECT * FROM snowflake_convert_rewrite_rate('app.accounts', 'id')$$, '42501');
SELECT sectest.refused($$SELECT * FROM snowflake_convert_rewrite_rate(0, 'id')$$, '42P01');
SELECT sectest.refused($$SELECT * FROM snowflake_convert_rewrite_rate('mal.leak', 'id')$$, '42809');
SELECT sectest.refused($$SELECT * FROM snowflake_convert_rewrite_rate('mal.t', 'nope')$$, '42703');
-- The fleet check and snowflake_node are the superuser's and pg_monitor's.
SELECT sectest.refused($$SELECT * FROM snowflake_fleet_check()$$, '42501');
SELECT sectest.refused($$SELECT * FROM snowflake_node$$, '42501');
-- Owners read snowflake_convert_status (0.6.0: 42501 for every
-- non-superuser); they see only their own tables' rows.
\c - alice
SELECT sectest.check(count(*) = 0, 'alice reads snowflake_convert_status') FROM snowflake_convert_status;

-- Hostile objects earlier in the caller's search_path are never used: an
-- operator = on regclass and a pg_has_role in mallory's schema.
\c - mallory
CREATE FUNCTION mal.eq(regclass, regclass) RETURNS boolean
LANGUAGE sql AS $$ SELECT mal.spy_ok(1) AND $1::oid = $2::oid $$;
CREATE OPERATOR mal.= (LEFTARG = regclass, RIGHTARG = regclass, FUNCTION = mal.eq);
CREATE FUNCTION mal.pg_has_role(name, oid, text) RETURNS boolean
LANGUAGE sql AS $$ SELECT mal.spy_ok(1) $$;
\c - dba
SET search_path = mal, pg_catalog, public;
SELECT sectest.check(count(*) > 0, 'dba''s dry run with mallory''s schema first') FROM snowflake_convert_plan('mal.d', 'id');
RESET search_path;
SELECT sectest.nothing_leaked();

-- Hostile identifiers (quotes, dots, ;--, non-ASCII, 63 bytes) go through
-- every conversion function as identifiers.
\c - postgres
GRANT CREATE ON DATABASE postgres TO alice;
\c - alice
CREATE SCHEMA "s.p"";--";
CREATE TABLE "s.p"";--"."t ""x"";--é" ("i d;--" serial PRIMARY KEY, v integer);
CREATE TABLE "s.p"";--"."ref'; DROP TABLE app.accounts;--" (
    id serial PRIMARY KEY, "r""ef" integer REFERENCES "s.p"";--"."t ""x"";--é");
CREATE TABLE "s.p"";--"."aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" (
    "ééééééééééééééééééééééééééééééé" serial PRIMARY KEY);
INSERT INTO "s.p"";--"."t ""x"";--é" (v) SELECT g FROM generate_series(1, 10) g;
INSERT INTO "s.p"";--"."ref'; DROP TABLE app.accounts;--" ("r""ef") SELECT "i d;--" FROM "s.p"";--"."t ""x"";--é";
INSERT INTO "s.p"";--"."aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" DEFAULT VALUES;
SELECT sectest.check(count(*) = 4 AND bool_or(action = 'widen' AND object = '"s.p"";--"."ref''; DROP TABLE app.accounts;--"."r""ef"'), 'the dry run of a table with hostile names: 4 steps, the reference widened')
  FROM snowflake_convert_plan('"s.p"";--"."t ""x"";--é"', 'i d;--');
SELECT sectest.check(count(*) = 4 AND bool_or(action = 'adopt sequence'), 'the conversion of a table with hostile names: 4 steps, its sequence adopted')
  FROM snowflake_convert_column('"s.p"";--"."t ""x"";--é"', 'i d;--');
SELECT sectest.check(pg_get_expr(adbin, adrelid)
                     = format('nextval(%L::regclass)', pg_get_serial_sequence('"s.p"";--"."t ""x"";--é"', 'i d;--')::regclass)
                     AND EXISTS (SELECT FROM pg_seclabel l
                                  WHERE l.objoid = pg_get_serial_sequence('"s.p"";--"."t ""x"";--é"', 'i d;--')::regclass
                                    AND l.provider = 'snowflake_id' AND l.label = 'adopted'),
                     'its key keeps nextval() of its own sequence, adopted')
  FROM pg_attrdef WHERE adrelid = '"s.p"";--"."t ""x"";--é"'::regclass;
SET client_min_messages = warning;
CALL snowflake_convert_online('"s.p"";--"."aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"', 'ééééééééééééééééééééééééééééééé');
SELECT snowflake_convert_online_indexes('"s.p"";--"."aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"', 'ééééééééééééééééééééééééééééééé') \gexec
CALL snowflake_convert_online('"s.p"";--"."aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"', 'ééééééééééééééééééééééééééééééé');
RESET client_min_messages;
SELECT sectest.check(phase = 'done', 'the online conversion of a table with hostile names')
  FROM snowflake_convert_status
 WHERE "table" = '"s.p"";--"."aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"'::regclass;
\c - postgres
SELECT sectest.accounts_unchanged();
