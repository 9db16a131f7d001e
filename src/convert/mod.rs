//! Converting existing tables to snowflake keys, offline and online, with
//! a table owner's code always run as the owner.
//!
//! Uses [`crate::mint`] (new keys), [`crate::read`] and the ground; used
//! only by [`crate::operate`] (`scripts/module_graph.py`). Most of it is
//! PL/pgSQL in `sql/`, pasted into the install script.
//! - [`convert_column`]: `snowflake_convert_column()` and its dry run
//!   `snowflake_convert_plan()`;
//! - [`convert_online`]: `snowflake_convert_online()`, for tables too big
//!   to rewrite under a lock;
//! - [`as_owner`]: running a table owner's code as the owner, never as the
//!   caller (`snowflake_convert_as_owner()`); the floor's scan of tables
//!   uses it too.

pub mod as_owner;
pub mod convert_column;
pub mod convert_online;
