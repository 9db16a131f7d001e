//! Minting: everything that issues an ID and keeps the promise that no ID
//! is issued twice, across restarts, crashes, failovers and restores.
//!
//! Uses [`crate::read`] (decoding) and the ground (errors, settings, the
//! data directory); used by `crate::lease`, `crate::high_water`, [`crate::convert`] and [`crate::operate`],
//! never the other way (`scripts/module_graph.py`).
//! - [`nextval`]: the generator as SQL, `snowflake_nextval()`;
//! - [`backend_clock`]: its clock (a per-backend millisecond cache on an
//!   invariant TSC);
//! - [`shmem`]: the shared generator state, and whether we are preloaded;
//! - [`reservation`], [`wal`], [`bgworker`]: durability (the state file's
//!   reservation, its renewal by the background worker, and the WAL
//!   resource manager that replicates it to standbys);
//! - [`worker`]: the worker id a call mints with, and the lease that
//!   bounds it, as `crate::lease` (which uses this room, never the other
//!   way) hands them over;
//! - [`bound`]: the per-database bound an ID needs before it is
//!   returned, asked of `crate::high_water` (which uses this room, never
//!   the other way).

pub mod backend_clock;
pub mod bgworker;
pub mod bound;
pub mod nextval;
pub mod reservation;
pub mod shmem;
pub mod wal;
pub mod worker;
