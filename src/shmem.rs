//! Shared memory: one [`GeneratorState`] per server, shared by every
//! backend of every database. Only available when the library is loaded
//! through `shared_preload_libraries`.
//!
//! This is the one home of the preload state: [`preloading`] (the library
//! is being loaded by the postmaster now) and [`is_preloaded`] (it was, so
//! shared memory exists). It depends on nothing else in the extension: the
//! initial state is computed by a function [`init`] is given.

use pgrx::lwlock::PgLwLockExclusiveGuard;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, AssertPGRXSharedMemory, PgAtomic, PgLwLock};
use snowflake_id_core::GeneratorState;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

static STATE: PgAtomic<AssertPGRXSharedMemory<GeneratorState>> =
    // SAFETY: the name is unique to this extension.
    unsafe { PgAtomic::new(c"snowflake_id generator state") };

/// Serialises writers of the durable reservation; holds nothing else.
static RENEWAL: PgLwLock<u64> =
    // SAFETY: the name is unique to this extension.
    unsafe { PgLwLock::new(c"snowflake_id reservation") };

/// Set in the postmaster when shared memory was requested; inherited by
/// every backend it forks. Process-local by nature.
static PRELOADED: AtomicBool = AtomicBool::new(false);

/// True while `shared_preload_libraries` is being processed.
pub fn preloading() -> bool {
    // SAFETY: reading a plain global flag of the server.
    unsafe { pg_sys::process_shared_preload_libraries_in_progress }
}

/// True while the server is in recovery: a standby, or crash or
/// point-in-time recovery. IDs are not minted then.
pub fn in_recovery() -> bool {
    // SAFETY: RecoveryInProgress() may be called in any process.
    unsafe { pg_sys::RecoveryInProgress() }
}

/// Computes the initial state when shared memory is created.
static INITIAL: OnceLock<fn() -> GeneratorState> = OnceLock::new();

/// Request and initialise the shared state. Call from `_PG_init` only
/// while preloading. `initial` computes the state each time shared memory
/// is created: at start-up, and again after a crash restart.
pub fn init(initial: fn() -> GeneratorState) {
    debug_assert!(preloading());
    let _ = INITIAL.set(initial);
    // The initial value is computed in the postmaster when shared memory is
    // created (start-up and crash restart).
    pg_shmem_init!(
        STATE = unsafe { AssertPGRXSharedMemory::new(INITIAL.get().expect("set just before")()) }
    );
    pg_shmem_init!(RENEWAL);
    PRELOADED.store(true, Ordering::Relaxed);
}

/// Whether the library was preloaded (so the generator exists). Safe to
/// call before shared memory is attached.
#[inline]
pub fn is_preloaded() -> bool {
    PRELOADED.load(Ordering::Relaxed)
}

/// The shared generator state, or `None` when the library was not preloaded.
#[inline]
pub fn state() -> Option<&'static GeneratorState> {
    if is_preloaded() {
        Some(STATE.get())
    } else {
        None
    }
}

/// Take the reservation-renewal lock (an LWLock: waiters sleep).
pub fn renewal_lock() -> PgLwLockExclusiveGuard<'static, u64> {
    RENEWAL.exclusive()
}
