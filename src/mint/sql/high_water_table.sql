-- The extension's high-water-mark table in this database, quoted and
-- schema-qualified, or no row where the extension (or a version of it
-- with the table) is not installed. Found through the extension's
-- membership in the catalog, never through search_path.
SELECT pg_catalog.format('%I.%I', n.nspname, c.relname)
  FROM pg_catalog.pg_depend d
  JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) d.objid
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
 WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
   AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
   AND d.deptype OPERATOR(pg_catalog.=) 'e'
   AND e.extname OPERATOR(pg_catalog.=) 'snowflake_id'
   AND c.relname OPERATOR(pg_catalog.=) 'snowflake_high_water'
   AND c.relkind OPERATOR(pg_catalog.=) 'r'
