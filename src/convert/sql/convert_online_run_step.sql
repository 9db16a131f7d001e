-- The body src/convert/convert_online.rs (snowflake_convert_online_run_step) runs,
-- @extschema@ replaced by the extension's schema.
SELECT @extschema@.snowflake_convert_online_step_body($1::regclass, $2::name, $3, $4)
