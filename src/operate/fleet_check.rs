//! `snowflake_fleet_check()` and the `snowflake_node` view: one call that
//! checks a whole fleet for the mistakes that make Snowflake IDs collide
//! or disorder: two nodes with one worker id, differing layouts or
//! epochs, clocks far apart, and nodes that cannot mint.
//!
//! It reads `snowflake_node` on this server, on every other node of a
//! Citus cluster (through `run_command_on_all_nodes`), and on every
//! postgres_fdw foreign server owned by a superuser that has a user
//! mapping (through a temporary foreign table), in the caller's
//! transaction and with the caller's rights. Superusers and members of
//! `pg_monitor` may run it (they may read `snowflake_node`); other roles
//! get 42501. It is PL/pgSQL (`src/operate/sql/fleet_check.sql`): catalog lookups
//! and remote queries, nothing on a hot path.
//!
//! ## `snowflake_fleet_check(max_clock_skew interval DEFAULT '1 second', servers name[] DEFAULT NULL)`
//!
//! One row per server, this one first; `problem` is NULL when all is
//! well, so an alert is one query:
//!
//! ```sql
//! SELECT node, worker_id, clock_offset_ms, problem
//!   FROM snowflake_fleet_check()
//!  WHERE problem IS NOT NULL;
//! --  node | worker_id | clock_offset_ms |                problem
//! --  s1   |         1 |             0.4 | worker_id 1 is also used by dup
//! --  dup  |         1 |             1.2 | worker_id 1 is also used by s1
//! ```
//!
//! `servers` limits the postgres_fdw servers read (all those owned by a
//! superuser when NULL); a server that cannot be read is reported, not
//! skipped. A server's owner decides where a connection through it goes
//! and as which user, and postgres_fdw asks a superuser for no password:
//! so only servers owned by a superuser are read, and, for a caller who is
//! not one, servers owned by a role whose privileges it has. Naming any
//! other is refused before anything is read (42501). Only a server's
//! owner sees the message of a remote error; other callers see its
//! SQLSTATE. See docs/security.md, "The fleet check's foreign servers".
//!
//! ```sql
//! -- As a monitoring role (pg_monitor, USAGE on s1 and s2, a user mapping):
//! SELECT node, problem FROM snowflake_fleet_check(servers => ARRAY['s1', 's2']::name[]);
//! ```
//!
//! ## `snowflake_node`
//!
//! A view of this server's worker id, layout, state, system identifier,
//! start time and clock: what the fleet check reads from each node.
//!
//! ```sql
//! SELECT worker_id, state, server_clock FROM snowflake_node;
//! ```

#[allow(unused_imports)] // named in `requires` below
use crate::operate::admin::snowflake_stats;
use pgrx::prelude::*;

extension_sql_file!(
    "sql/fleet_check.sql",
    name = "fleet_check",
    requires = [snowflake_stats]
);
