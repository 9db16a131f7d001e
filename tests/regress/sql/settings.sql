-- The configuration parameters as PostgreSQL reports them: names, values,
-- units, contexts (sighup for worker_id, max_lead and bulk_lead_share,
-- postmaster for the layout) and ranges.
SELECT name, setting, unit, context, vartype, min_val, max_val, boot_val
  FROM pg_settings WHERE name LIKE 'snowflake\_id.%' ORDER BY name;
SHOW snowflake_id.max_lead;
