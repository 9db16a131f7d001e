-- JavaScript-safe JSON: integers beyond 2^53 - 1 become decimal strings,
-- at any depth; everything else is left as it was.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id;
RESET client_min_messages;
SET TimeZone = 'UTC';

CREATE TEMP TABLE js_orders (id bigint PRIMARY KEY, total int, ratio float8, note text, placed timestamptz, tags bigint[]);
INSERT INTO js_orders VALUES
    (383011532541268040, 30, 0.5, 'a', '2025-06-01 12:00+00', ARRAY[9007199254740991, 9007199254740992, -9007199254740993]),
    (42, -7, 1e300, NULL, NULL, NULL);
SELECT snowflake_to_jsonb(o) FROM js_orders o ORDER BY id;
-- The boundary: 2^53 - 1 stays a number, 2^53 and beyond become strings, both signs.
SELECT snowflake_js_safe('[9007199254740991, 9007199254740992, -9007199254740991, -9007199254740992]');
-- Nested documents, non-integers, numbers beyond bigint (floats) and
-- other types are untouched.
SELECT snowflake_js_safe(jsonb_build_object(
    'order', 383011532541268040,
    'lines', jsonb_build_array(383011532541268041, jsonb_build_object('qty', 2, 'id', 383011532541268042)),
    'price', 12345678901234567890.5, 'ok', true, 'none', NULL, 'empty', '{}'::jsonb, 'list', '[]'::jsonb));
SELECT snowflake_js_safe('"383011532541268040"'), snowflake_js_safe('1e20'), snowflake_js_safe('null'),
       snowflake_js_safe('9223372036854775807'), snowflake_js_safe('-9223372036854775808');
-- Exactly the IDs: every ID survives as its decimal string.
SELECT bool_and((snowflake_to_jsonb(o)->>'id')::bigint = o.id) AS ids_exact,
       bool_and(jsonb_typeof(snowflake_to_jsonb(o)->'id') = 'string') AS ids_are_strings
  FROM (SELECT snowflake_nextval() AS id FROM generate_series(1, 100)) o;
SELECT snowflake_js_safe(NULL) IS NULL AS strict_null;
