-- Included by squat_schema.sql, as postgres with search_path pg_catalog,
-- sectest: the extension's schema and table are its own, her schema is
-- kept under another name, and nothing of hers ran.
SELECT sectest.check(n.nspowner = 'postgres'::regrole
                     AND EXISTS (SELECT FROM pg_depend d
                                  WHERE d.classid = 'pg_namespace'::regclass AND d.objid = n.oid
                                    AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'),
                     'snowflake_id_internal is the superuser''s, a member of the extension')
  FROM pg_namespace n WHERE n.nspname = 'snowflake_id_internal';
SELECT sectest.check(c.relowner = 'postgres'::regrole
                     AND EXISTS (SELECT FROM pg_depend d
                                  WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                                    AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e')
                     AND NOT EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = c.oid AND t.tgname = 'pwn'),
                     'snowflake_id_internal.snowflake_high_water is the extension''s table, without her trigger')
  FROM pg_class c WHERE c.oid = 'snowflake_id_internal.snowflake_high_water'::regclass;
SELECT sectest.check(count(*) = 1, 'her schema is kept, renamed: ' || string_agg(n.nspname, ', '))
  FROM pg_namespace n
 WHERE n.nspname LIKE 'snowflake\_id\_internal\_moved\_%' AND n.nspowner = 'mallory'::regrole;
-- The mark goes into the extension's table (NULL before the first round).
SELECT public.snowflake_write_high_water() IS NULL AS no_mark_yet;
SELECT sectest.nothing_ran('a squatted snowflake_id_internal');
