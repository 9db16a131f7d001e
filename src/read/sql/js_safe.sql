-- snowflake_js_safe(jsonb) and snowflake_to_jsonb(anyelement): see src/read/js_safe.rs.
-- Included in the install script by extension_sql_file!.

CREATE FUNCTION snowflake_js_safe(j jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $js$
SELECT CASE jsonb_typeof(j)
    WHEN 'object' THEN
        (SELECT coalesce(jsonb_object_agg(e.key, @extschema@.snowflake_js_safe(e.value)), '{}'::jsonb)
           FROM jsonb_each(j) e)
    WHEN 'array' THEN
        (SELECT coalesce(jsonb_agg(@extschema@.snowflake_js_safe(a.value) ORDER BY a.n), '[]'::jsonb)
           FROM jsonb_array_elements(j) WITH ORDINALITY a(value, n))
    WHEN 'number' THEN
        CASE WHEN scale(j::numeric) = 0 AND abs(j::numeric) > 9007199254740991
                  AND j::numeric BETWEEN -9223372036854775808 AND 9223372036854775807
             THEN to_jsonb(j::numeric::text)
             ELSE j END
    ELSE j
END
$js$;

COMMENT ON FUNCTION snowflake_js_safe(jsonb) IS
'Replace every bigint beyond JavaScript''s exact range (2^53 - 1) in a JSON document with its decimal string';

CREATE FUNCTION snowflake_to_jsonb(r anyelement) RETURNS jsonb
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $js$
SELECT @extschema@.snowflake_js_safe(to_jsonb(r))
$js$;

COMMENT ON FUNCTION snowflake_to_jsonb(anyelement) IS
'to_jsonb() of a row or value, with every bigint beyond JavaScript''s exact range as a decimal string';
