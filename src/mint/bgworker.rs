//! The "snowflake_id reservation" background worker: keeps the durable
//! reservation ahead of the generator so that `snowflake_nextval()` never
//! waits for an fsync under steady load. It also keeps the reservation
//! where recovery finds it:
//! - a state file deleted while the server runs is written again within a
//!   second, and at shutdown;
//! - once a checkpoint's redo point has passed the last reservation
//!   record, the reservation is logged again, so that crash recovery
//!   always replays one.
//!
//! It writes nothing while the start-up read of the high-water marks
//! (`crate::high_water`) is pending: a reservation written then could
//! be taken for a clean stop's.

use crate::mint::{reservation, shmem, wal};
use crate::{datadir, gucs};
use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags,
};
use pgrx::pg_sys;
use pgrx::prelude::*;
use snowflake_id_core::{Clock, SystemClock};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How often the worker checks the reservation.
const TICK: Duration = Duration::from_millis(100);
/// Renew only if an ID was issued within this many ms: an idle server does
/// not fsync every second; its first call after a pause renews instead.
const ACTIVE_MS: i64 = 10_000;

pub fn register() {
    BackgroundWorkerBuilder::new("snowflake_id reservation")
        .set_type("snowflake_id reservation")
        .set_library("snowflake_id")
        .set_function("snowflake_id_reserver_main")
        .enable_shmem_access(None)
        .set_start_time(BgWorkerStartTime::PostmasterStart)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

/// SIGHUP wakes the worker; SIGTERM is PostgreSQL's own `die` (see
/// [`snowflake_id_reserver_main`]).
pub fn attach_signals() {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP);
    // SAFETY: installing PostgreSQL's standard SIGTERM handler, with
    // signals still blocked (pgrx unblocks them when we attach below).
    unsafe {
        #[cfg(not(feature = "pg18"))]
        pg_sys::pqsignal(pg_sys::SIGTERM as i32, Some(die));
        #[cfg(feature = "pg18")]
        pg_sys::pqsignal_be(pg_sys::SIGTERM as i32, Some(die));
    }
}

unsafe extern "C-unwind" {
    /// PostgreSQL's SIGTERM handler for backends (postgres.c), itself: a
    /// signal handler must be the C function, not pgrx's guarded wrapper.
    fn die(postgres_signal_arg: std::ffi::c_int);
}

/// SIGTERM is PostgreSQL's own `die`, as for a backend: it sets
/// `ProcDiePending`, which also ends a wait for synchronous standbys
/// (PostgreSQL checks that flag there, not the flag a pgrx handler sets).
/// The worker then exits through `CHECK_FOR_INTERRUPTS` with the usual
/// FATAL: at shutdown, or after `pg_terminate_backend`, when the
/// postmaster restarts it a second later.
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn snowflake_id_reserver_main(_arg: pg_sys::Datum) {
    attach_signals();
    let Some(state) = shmem::state() else { return };
    let Ok(layout) = gucs::layout() else { return };
    // SAFETY: registering a callback for this process's exit (the FATAL of
    // a shutdown's SIGTERM included).
    unsafe { pg_sys::before_shmem_exit(Some(write_state_file_on_exit), pg_sys::Datum::from(0)) };
    // wait_latch is false only when the postmaster has died.
    while BackgroundWorker::wait_latch(Some(TICK)) {
        pgrx::check_for_interrupts!();
        if BackgroundWorker::sighup_received() {
            // SAFETY: standard configuration reload in a background worker.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        // A standby replays reservations; it makes none of its own.
        if state.blocked.load(Ordering::Acquire) & reservation::BLOCKED_MASK != 0
            || shmem::tracking().is_some_and(|t| !t.mark_ready.load(Ordering::Acquire))
            || crate::mint::worker::current_worker_id().is_none()
            || shmem::in_recovery()
            || shmem::binary_upgrade()
        {
            continue;
        }
        let clock = SystemClock;
        let (wall, mono) = (clock.wall_ns(), clock.mono_ns());
        let last_ms = state
            .last_issued()
            .map(|id| layout.epoch_ms() + layout.timestamp_of(id as u64) as i64)
            .unwrap_or(i64::MIN);
        let active = last_ms >= wall.div_euclid(1_000_000) - ACTIVE_MS;
        let reserved = state.reserved_until_ms.load(Ordering::Acquire) != i64::MIN;
        if reserved && (!datadir::exists() || wal::checkpoint_passed_last_record()) {
            if !datadir::exists() {
                pgrx::log!(
                    "snowflake_id: the state file \"{}\" is missing; writing it again",
                    datadir::state_path()
                );
            }
            reservation::renew(state, &layout, i64::MIN, || true);
        } else if active && state.needs_renewal(&layout, wall, mono, reservation::THRESHOLD_MS) {
            // A termination that cuts the wait for standbys short
            // publishes nothing and exits (FATAL) once the lock is released.
            reservation::renew(state, &layout, i64::MIN, || {
                state.needs_renewal(&layout, wall, mono, reservation::THRESHOLD_MS)
            });
        }
    }
}

/// At exit (a clean shutdown included): if the state file is missing,
/// write the current reservation to it, so that the next start continues
/// above it. Nothing is WAL-logged here; a file that exists is left alone.
#[pg_guard]
unsafe extern "C-unwind" fn write_state_file_on_exit(_code: std::ffi::c_int, _arg: pg_sys::Datum) {
    let Some(state) = shmem::state() else { return };
    let reserved = state.reserved_until_ms.load(Ordering::Acquire);
    if reserved == i64::MIN
        || reserved == i64::MAX
        || shmem::in_recovery()
        || datadir::exists()
        || shmem::tracking().is_some_and(|t| !t.mark_ready.load(Ordering::Acquire))
    {
        return;
    }
    let Ok(layout) = gucs::layout() else { return };
    if datadir::store(&reservation::this_server_file(&layout, reserved)).is_ok() {
        pgrx::log!(
            "snowflake_id: the state file \"{}\" was missing; written at exit",
            datadir::state_path()
        );
    }
}
