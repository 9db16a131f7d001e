//! Operating a server and a fleet: what an administrator calls by hand.
//!
//! The top room: it may use every other, and nothing uses it
//! (`scripts/module_graph.py`).
//! - [`admin`]: `snowflake_stats()`, `snowflake_accept_configuration()`;
//! - [`floor`]: raising the floor by hand, `snowflake_raise_floor()`,
//!   `snowflake_raise_floor_from_data()` (superuser only, tables read as
//!   their owners through [`crate::convert::as_owner`]);
//! - [`fleet_check`]: `snowflake_fleet_check()`, the `snowflake_node` view.

pub mod admin;
pub mod fleet_check;
pub mod floor;
