//! snowflake_id: Twitter-Snowflake-style 64-bit IDs minted in PostgreSQL
//! shared memory.
//!
//! The algorithm lives in the `snowflake_id_core` crate (no pgrx); this
//! crate is the glue, in rooms named for what the product does, bottom
//! first (each uses only the rooms above it in this list and the ground;
//! `scripts/module_graph.py` enforces it, CONTRIBUTING.md has the map):
//! - the ground, files directly in `src/`: [`errors`] (SQLSTATEs and
//!   messages), [`gucs`] (settings and the layout they define),
//!   [`datadir`] (files in the data directory), [`backtraces`] (Rust
//!   backtraces to the server log, never to clients), [`failpoint`]
//!   (named crash points of test builds);
//! - [`read`]: decoding IDs, their text, JSON and public forms;
//! - [`mint`]: minting IDs and keeping them unique (the generator, shared
//!   memory, the durable reservation, WAL, the background worker, the
//!   worker-id lease);
//! - [`high_water`]: the high-water mark each database keeps of the IDs
//!   minted in it;
//! - [`convert`]: converting existing tables to snowflake keys;
//! - [`adopt`]: adopted sequences, whose `nextval()` returns Snowflake
//!   IDs (a planner hook);
//! - [`operate`]: what an administrator calls (statistics, raising the
//!   floor, the fleet check).

use mint::{backend_clock, bgworker, reservation, shmem, wal};
use pgrx::prelude::*;

pub mod adopt;
pub mod backtraces;
pub mod catalog;
pub mod convert;
pub mod datadir;
pub mod errors;
pub mod failpoint;
pub mod gucs;
pub mod high_water;
pub mod lease;
pub mod mint;
pub mod operate;
pub mod read;
pub mod utility_hook;

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
    let layout = match gucs::layout() {
        Ok(l) => l,
        Err(msg) => errors::invalid_layout(&msg),
    };
    if let Some(p) = lease::worker::check_configuration(&layout) {
        errors::invalid_setting(&p);
    }
    if gucs::leased() {
        lease::worker::draw_token();
    }
    shmem::init(reservation::startup_state);
    wal::register();
    backend_clock::detect();
    bgworker::register();
    high_water::init();
    lease::worker::register();
    adopt::init();
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
