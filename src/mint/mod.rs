//! Minting: everything that issues an ID and keeps the promise that no ID
//! is issued twice, across restarts, crashes, failovers and restores.
//!
//! Uses [`crate::read`] (decoding) and the ground (errors, settings, the
//! data directory); used by [`crate::convert`] and [`crate::operate`],
//! never the other way (`scripts/module_graph.py`).
//! - [`nextval`]: the generator as SQL, `snowflake_nextval()`;
//! - [`backend_clock`]: its clock (a per-backend millisecond cache on an
//!   invariant TSC);
//! - [`shmem`]: the shared generator state, and whether we are preloaded;
//! - [`reservation`], [`wal`], [`bgworker`]: durability (the state file's
//!   reservation, its renewal by the background worker, and the WAL
//!   resource manager that replicates it to standbys);
//! - [`lease`], [`registry_client`]: worker ids leased from a registry
//!   (`snowflake_id.worker_id_source = registry`), with the SQL of the
//!   registry in `sql/registry.sql`;
//! - [`high_water`]: the server-wide high-water mark, kept in a table in
//!   every database (`snowflake_high_water()`), with its SQL in `sql/`.

pub mod backend_clock;
pub mod bgworker;
pub mod high_water;
pub mod lease;
pub mod nextval;
pub mod registry_client;
pub mod reservation;
pub mod shmem;
pub mod wal;
