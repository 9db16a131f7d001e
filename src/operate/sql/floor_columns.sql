-- The key columns snowflake_raise_floor_from_data() (src/operate/floor.rs) reads:
-- every bigint
-- column of a table (not a partition: its parent covers it) whose default
-- calls this extension's snowflake_nextval(), and that leads an index, so
-- that its largest value costs an index probe. For each, the two queries
-- to run with $1 = the largest ID trusted as a floor: the largest value up
-- to it, and whether any value lies beyond it. Every name is qualified.
-- src/operate/floor.rs leaves out the tables that src/operate/sql/floor_citus_tables.sql
-- lists (by relid), and runs each query as the table's owner (owner).
-- Other sessions' temporary tables are left out: no session can read them.
SELECT pg_catalog.format('%I.%I', n.nspname, c.relname) AS relation,
       a.attname::pg_catalog.text AS column_name,
       pg_catalog.format('SELECT pg_catalog.max(%I) FROM %I.%I WHERE %I OPERATOR(pg_catalog.<=) $1',
                         a.attname, n.nspname, c.relname, a.attname) AS max_query,
       pg_catalog.format('SELECT EXISTS (SELECT FROM %I.%I WHERE %I OPERATOR(pg_catalog.>) $1)',
                         n.nspname, c.relname, a.attname) AS beyond_query,
       c.oid AS relid,
       c.relowner AS owner,
       pg_catalog.pg_get_userbyid(c.relowner)::pg_catalog.text AS owner_name
  FROM pg_catalog.pg_depend d
  JOIN pg_catalog.pg_attrdef ad ON ad.oid OPERATOR(pg_catalog.=) d.objid
  JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) ad.adrelid AND a.attnum OPERATOR(pg_catalog.=) ad.adnum
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) ad.adrelid
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
  JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) d.refobjid
 WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
   AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
   AND p.proname OPERATOR(pg_catalog.=) 'snowflake_nextval'
   AND EXISTS (SELECT FROM pg_catalog.pg_depend e JOIN pg_catalog.pg_extension x ON x.oid OPERATOR(pg_catalog.=) e.refobjid
                WHERE e.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                  AND e.objid OPERATOR(pg_catalog.=) p.oid AND e.deptype OPERATOR(pg_catalog.=) 'e'
                  AND x.extname OPERATOR(pg_catalog.=) 'snowflake_id')
   AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p}'::pg_catalog."char"[]) AND NOT c.relispartition
   AND NOT pg_catalog.pg_is_other_temp_schema(c.relnamespace)
   AND a.atttypid OPERATOR(pg_catalog.=) 'pg_catalog.int8'::pg_catalog.regtype
   AND EXISTS (SELECT FROM pg_catalog.pg_index i
                WHERE i.indrelid OPERATOR(pg_catalog.=) c.oid
                  AND i.indkey[0] OPERATOR(pg_catalog.=) a.attnum)
 ORDER BY 1, 2
