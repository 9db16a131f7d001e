/* snowflake_id 0.3.0 -> 0.4.0: failover-safe reservations.
 * No SQL objects change. The 0.4.0 library WAL-logs every durable
 * reservation through a custom WAL resource manager (ID 199) and refuses
 * to mint IDs during recovery. Every server that replays the primary's
 * WAL must preload the 0.4.0 library BEFORE the primary runs it:
 *   1. standbys: install the 0.4.0 library, keep snowflake_id in
 *      shared_preload_libraries, restart;
 *   2. the primary: install the 0.4.0 library, restart, then
 *      ALTER EXTENSION snowflake_id UPDATE.
 * A standby without the library stops replaying with "resource manager
 * with ID 199 not registered". PostgreSQL 14 is not supported by 0.4.0.
 */
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.4.0'" to load this file. \quit
