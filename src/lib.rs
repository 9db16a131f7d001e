//! snowflake_id: Twitter-Snowflake-style 64-bit IDs minted in PostgreSQL
//! shared memory.
//!
//! The algorithm lives in the `snowflake_id_core` crate (no pgrx); this
//! crate is the glue:
//! - [`gucs`]: configuration parameters;
//! - [`shmem`]: the shared generator state;
//! - [`nextval`]: the generator, `snowflake_nextval()`;
//! - [`fastclock`]: its clock (a per-backend millisecond cache on an invariant TSC);
//! - [`decode`]: decoding, composing and range-bound functions;
//! - [`formats`]: decoding foreign layouts, explicit-layout bounds;
//! - [`text`]: JavaScript-safe text forms (decimal, base32);
//! - [`convert`]: `snowflake_convert_column()`, the migration path;
//! - [`admin`], [`reservation`], [`bgworker`], [`wal`], [`datadir`]: stats,
//!   durability (the state file, and the WAL resource manager that
//!   replicates it);
//! - [`errors`]: SQLSTATEs and messages.

use pgrx::prelude::*;

pub mod admin;
pub mod bgworker;
pub mod convert;
pub mod datadir;
pub mod decode;
pub mod errors;
pub mod fastclock;
pub mod formats;
pub mod gucs;
pub mod nextval;
pub mod reservation;
pub mod shmem;
pub mod text;
pub mod wal;

::pgrx::pg_module_magic!(name, version);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    let problems = gucs::define();
    if !shmem::preloading() {
        // Loaded on demand by a backend: the decoders work, the generator
        // reports that it needs preloading. Never fail a library load here.
        return;
    }
    // In the postmaster: refuse to start with a configuration that would
    // mint IDs with a layout or worker id the operator did not ask for.
    if let Some(p) = problems.first() {
        errors::invalid_layout(p);
    }
    if let Err(msg) = gucs::compute_layout() {
        errors::invalid_layout(&msg);
    }
    shmem::init();
    wal::register();
    fastclock::detect();
    // Freeze the layout in the postmaster; every backend inherits it.
    let _ = gucs::layout();
    bgworker::register();
}

#[cfg(any(test, feature = "pg_test"))]
mod tests;

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![
            "shared_preload_libraries = 'snowflake_id'",
            "snowflake_id.worker_id = 42",
        ]
    }
}
