-- snowflake_js_safe(jsonb) and snowflake_to_jsonb(anyelement): see src/read/js_safe.rs.
-- Included in the install script by extension_sql_file!.
--
-- One query over the document's text, naming nothing but pg_catalog: the
-- text of a jsonb value is canonical, numbers (never in exponent form)
-- stand outside strings, and a token is a string, a number, or anything
-- else. Each integer number beyond 2^53 - 1 within the bigint range is
-- quoted; the tokens are put back together in order. Neither body calls
-- a function of the extension's schema by name: up to 0.7.0
-- snowflake_js_safe called itself as "@extschema@.snowflake_js_safe", a
-- name looked up when it ran, which the owner of that schema could rename
-- and redirect to her own function, run with the caller's rights
-- (docs/security.md, "The extension's schema").

CREATE FUNCTION snowflake_js_safe(j jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $js$
SELECT string_agg(CASE WHEN t.m[2] IS NOT NULL AND strpos(t.m[2], '.') = 0
                            AND abs(t.m[2]::numeric) > 9007199254740991
                            AND t.m[2]::numeric >= -9223372036854775808
                            AND t.m[2]::numeric <= 9223372036854775807
                       THEN '"' || t.m[2] || '"'
                       ELSE coalesce(t.m[1], t.m[2], t.m[3]) END,
                  '' ORDER BY t.n)::jsonb
  FROM regexp_matches(j::text, E'("(?:[^"\\\\]|\\\\.)*")|(-?[0-9][0-9.eE+-]*)|([^"0-9-]+)', 'g')
       WITH ORDINALITY t(m, n)
$js$;

COMMENT ON FUNCTION snowflake_js_safe(jsonb) IS
'Replace every bigint beyond JavaScript''s exact range (2^53 - 1) in a JSON document with its decimal string';

CREATE FUNCTION snowflake_to_jsonb(r anyelement) RETURNS jsonb
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $js$
SELECT string_agg(CASE WHEN t.m[2] IS NOT NULL AND strpos(t.m[2], '.') = 0
                            AND abs(t.m[2]::numeric) > 9007199254740991
                            AND t.m[2]::numeric >= -9223372036854775808
                            AND t.m[2]::numeric <= 9223372036854775807
                       THEN '"' || t.m[2] || '"'
                       ELSE coalesce(t.m[1], t.m[2], t.m[3]) END,
                  '' ORDER BY t.n)::jsonb
  FROM regexp_matches(to_jsonb(r)::text, E'("(?:[^"\\\\]|\\\\.)*")|(-?[0-9][0-9.eE+-]*)|([^"0-9-]+)', 'g')
       WITH ORDINALITY t(m, n)
$js$;

COMMENT ON FUNCTION snowflake_to_jsonb(anyelement) IS
'to_jsonb() of a row or value, with every bigint beyond JavaScript''s exact range as a decimal string';
