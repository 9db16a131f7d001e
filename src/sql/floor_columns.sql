-- The key columns src/floor.rs raises the generator above: every bigint
-- column of a table (not a partition: its parent covers it) whose default
-- calls this extension's snowflake_nextval(), and that leads an index, so
-- that its largest value costs an index probe. For each, the two queries
-- to run with $1 = the largest ID trusted as a floor: the largest value up
-- to it, and whether any value lies beyond it. Every name is qualified.
-- src/floor.rs leaves out the tables that src/sql/floor_citus_tables.sql
-- lists (by relid).
-- check_sql_operators: search_path pinned by src/floor.rs (as_owner::with_role)
SELECT c.oid::pg_catalog.regclass::pg_catalog.text AS relation,
       a.attname::pg_catalog.text AS column_name,
       pg_catalog.format('SELECT pg_catalog.max(%I) FROM %s WHERE %I OPERATOR(pg_catalog.<=) $1',
                         a.attname, c.oid::pg_catalog.regclass, a.attname) AS max_query,
       pg_catalog.format('SELECT EXISTS (SELECT FROM %s WHERE %I OPERATOR(pg_catalog.>) $1)',
                         c.oid::pg_catalog.regclass, a.attname) AS beyond_query,
       c.oid AS relid
  FROM pg_catalog.pg_depend d
  JOIN pg_catalog.pg_attrdef ad ON ad.oid = d.objid
  JOIN pg_catalog.pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum
  JOIN pg_catalog.pg_class c ON c.oid = ad.adrelid
  JOIN pg_catalog.pg_proc p ON p.oid = d.refobjid
 WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
   AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
   AND p.proname OPERATOR(pg_catalog.=) 'snowflake_nextval'
   AND EXISTS (SELECT FROM pg_catalog.pg_depend e JOIN pg_catalog.pg_extension x ON x.oid = e.refobjid
                WHERE e.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                  AND e.objid OPERATOR(pg_catalog.=) p.oid AND e.deptype OPERATOR(pg_catalog.=) 'e'
                  AND x.extname OPERATOR(pg_catalog.=) 'snowflake_id')
   AND c.relkind IN ('r', 'p') AND NOT c.relispartition
   AND a.atttypid OPERATOR(pg_catalog.=) 'pg_catalog.int8'::pg_catalog.regtype
   AND EXISTS (SELECT FROM pg_catalog.pg_index i
                WHERE i.indrelid OPERATOR(pg_catalog.=) c.oid
                  AND i.indkey[0] OPERATOR(pg_catalog.=) a.attnum)
 ORDER BY 1, 2
