//! snowflake_id: Twitter-Snowflake-style 64-bit IDs minted in PostgreSQL
//! shared memory.
//!
//! The algorithm lives in the `snowflake_id_core` crate (no pgrx); this
//! crate is the glue, in small modules named for what they expose (the
//! graph they form is in CONTRIBUTING.md):
//! - [`gucs`]: configuration parameters and the layout they define;
//! - [`shmem`]: the shared generator state, and whether we are preloaded;
//! - [`nextval`]: the generator, `snowflake_nextval()`;
//! - [`backend_clock`]: its clock (a per-backend millisecond cache on an
//!   invariant TSC);
//! - [`decode`]: decoding, composing and range-bound functions;
//! - [`decode_foreign`]: decoding foreign layouts, explicit-layout bounds;
//! - [`text`]: JavaScript-safe text forms (decimal, base32);
//! - [`js_safe`]: JavaScript-safe JSON of whole rows and documents;
//! - [`convert_column`]: `snowflake_convert_column()`, the migration path,
//!   and `snowflake_convert_plan()`, its dry run;
//! - [`convert_online`]: `snowflake_convert_online()`, the migration path
//!   for tables too big to rewrite under a lock;
//! - [`admin`]: `snowflake_stats()`, `snowflake_accept_configuration()`;
//! - [`high_water`]: the server-wide high-water mark, kept in a table in
//!   every database (`snowflake_high_water()`);
//! - [`floor`]: raising the floor by hand: `snowflake_raise_floor()`,
//!   `snowflake_raise_floor_from_data()` (superuser only, tables read as
//!   their owners);
//! - [`fleet_check`]: `snowflake_fleet_check()`, the `snowflake_node` view;
//! - [`reservation`], [`bgworker`], [`wal`], [`datadir`]: durability (the
//!   state file, its renewal, and the WAL resource manager that
//!   replicates it);
//! - [`as_owner`]: running a table owner's code as the owner, never as
//!   the caller (`snowflake_convert_as_owner()`);
//! - [`backtraces`]: Rust backtraces to the server log, never to clients;
//! - [`errors`]: SQLSTATEs and messages.

use pgrx::prelude::*;

pub mod admin;
pub mod as_owner;
pub mod backend_clock;
pub mod backtraces;
pub mod bgworker;
pub mod convert_column;
pub mod convert_online;
pub mod datadir;
pub mod decode;
pub mod decode_foreign;
pub mod errors;
pub mod fleet_check;
pub mod floor;
pub mod gucs;
pub mod high_water;
pub mod js_safe;
pub mod nextval;
pub mod public_ids;
pub mod reservation;
pub mod shmem;
pub mod text;
pub mod wal;

::pgrx::pg_module_magic!(name, version);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    backtraces::keep_out_of_client_messages();
    let preloading = shmem::preloading();
    let problems = gucs::define(preloading);
    if !preloading {
        // Loaded on demand by a backend: the decoders work, the generator
        // reports that it needs preloading. Never fail a library load here.
        return;
    }
    // In the postmaster: refuse to start with a configuration that would
    // mint IDs with a layout or worker id the operator did not ask for, or
    // read the keys of public IDs from another file.
    if let Some(p) = problems.first() {
        errors::invalid_setting(p);
    }
    // Validate and freeze the layout in the postmaster; every backend
    // inherits it.
    if let Err(msg) = gucs::layout() {
        errors::invalid_layout(&msg);
    }
    shmem::init(reservation::startup_state);
    wal::register();
    backend_clock::detect();
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
