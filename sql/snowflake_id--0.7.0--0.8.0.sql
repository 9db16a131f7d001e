\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.8.0'" to load this file. \quit
/* snowflake_id 0.7.0 -> 0.8.0: security fixes.
 */
