/* snowflake_id 0.2.0 -> 0.3.0: bulk generation.
 * New: snowflake_nextval(count integer) RETURNS SETOF bigint, which takes
 * whole blocks of IDs from the shared generator with one atomic operation
 * each. Install the 0.3.0 library first (it must be the one preloaded:
 * restart after installing), then ALTER EXTENSION snowflake_id UPDATE.
 */
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.3.0'" to load this file. \quit

CREATE FUNCTION "snowflake_nextval"(
	"count" INT /* i32 */
) RETURNS SETOF bigint /* i64 */
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_nextval_bulk_wrapper';
