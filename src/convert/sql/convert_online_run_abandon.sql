-- The body src/convert/convert_online.rs (snowflake_convert_online_run_abandon)
-- runs, @extschema@ replaced by the extension's schema.
SELECT b.action, b.object FROM @extschema@.snowflake_convert_online_abandon_body($1::regclass, $2::name) b
