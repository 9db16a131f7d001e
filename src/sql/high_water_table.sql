-- The extension's high-water-mark table in this database, quoted and
-- schema-qualified, or no row where the extension (or a version of it
-- with the table) is not installed. Found through the catalog, never
-- through search_path.
SELECT pg_catalog.format('%I.%I', n.nspname, c.relname)
  FROM pg_catalog.pg_extension e
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
  JOIN pg_catalog.pg_class c ON c.relnamespace OPERATOR(pg_catalog.=) e.extnamespace
 WHERE e.extname OPERATOR(pg_catalog.=) 'snowflake_id'
   AND c.relname OPERATOR(pg_catalog.=) 'snowflake_high_water'
   AND c.relkind OPERATOR(pg_catalog.=) 'r'
