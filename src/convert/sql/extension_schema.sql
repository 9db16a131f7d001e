-- The schema snowflake_id is installed in, quoted: read by
-- src/convert/convert_online.rs to call the conversion's bodies there (and only
-- there). Every name is qualified: the caller's search_path plays no part.
SELECT pg_catalog.quote_ident(n.nspname::pg_catalog.text)
  FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
 WHERE e.extname OPERATOR(pg_catalog.=) 'snowflake_id'
