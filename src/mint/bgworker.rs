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
//! It also holds the "snowflake_id high-water" launcher and its writers
//! (`crate::mint::high_water`): the launcher, connected to no database, starts
//! one short-lived writer per database per round.

use crate::mint::{high_water, reservation, shmem, wal};
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
    // After recovery only: a standby writes no marks; a promoted one
    // starts it.
    BackgroundWorkerBuilder::new("snowflake_id high-water launcher")
        .set_type("snowflake_id high-water launcher")
        .set_library("snowflake_id")
        .set_function("snowflake_id_high_water_main")
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

/// SIGHUP wakes the worker; SIGTERM is PostgreSQL's own `die` (see
/// [`snowflake_id_reserver_main`]).
fn attach_signals() {
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

/// The high-water launcher: a round whenever one is due (`crate::mint::high_water`).
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn snowflake_id_high_water_main(_arg: pg_sys::Datum) {
    attach_signals();
    let Some(state) = shmem::state() else { return };
    let Some(t) = shmem::tracking() else { return };
    let Ok(layout) = gucs::layout() else { return };
    // SAFETY: a connection to no database (shared catalogs only), as the
    // autovacuum launcher has; then publishing this process's latch,
    // which lives in its PGPROC, and withdrawing it at exit.
    unsafe {
        pg_sys::BackgroundWorkerInitializeConnection(std::ptr::null(), std::ptr::null(), 0);
        t.launcher_latch
            .store(pg_sys::MyLatch as usize, Ordering::Release);
        pg_sys::before_shmem_exit(Some(forget_launcher), pg_sys::Datum::from(0));
    }
    while BackgroundWorker::wait_latch(Some(TICK)) {
        pgrx::check_for_interrupts!();
        if BackgroundWorker::sighup_received() {
            // SAFETY: standard configuration reload in a background worker.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        if !shmem::in_recovery() && !shmem::binary_upgrade() {
            high_water::launcher_tick(state, &layout);
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn forget_launcher(_code: std::ffi::c_int, _arg: pg_sys::Datum) {
    if let Some(t) = shmem::tracking() {
        t.launcher_latch.store(0, Ordering::Release);
    }
}

/// Settings of a writer, whatever its database sets (`ALTER DATABASE ...
/// SET` is its owner's): its own identity (a database's `role` setting
/// would make it that role), the catalog and nothing else on
/// `search_path`, a writable transaction, bounded waits, and a commit as
/// durable as a reservation's.
const WRITER_SETTINGS: [(&std::ffi::CStr, &std::ffi::CStr); 8] = [
    (c"role", c"none"),
    // Its own writes fire no trigger: they never raise the generator.
    (c"session_replication_role", c"replica"),
    (c"search_path", c"pg_catalog, pg_temp"),
    (c"default_transaction_read_only", c"off"),
    (c"statement_timeout", c"10s"),
    (c"lock_timeout", c"5s"),
    (c"idle_in_transaction_session_timeout", c"0"),
    (c"synchronous_commit", c"on"),
];

/// A high-water writer: one database, one round (`crate::mint::high_water`).
/// The argument is the database's OID, `bgw_extra` the round's target.
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn snowflake_id_high_water_writer_main(arg: pg_sys::Datum) {
    attach_signals();
    let Some(t) = shmem::tracking() else { return };
    let Ok(target) = BackgroundWorker::get_extra().parse::<i64>() else {
        return;
    };
    let db = pg_sys::Oid::from(arg.value() as u32);
    // SAFETY: connecting as the bootstrap superuser, named: a worker that
    // names no user is initialised without session_authorization pinned,
    // so a database's `ALTER DATABASE ... SET session_authorization` (its
    // owner may set it) would make the writer that role. Then overriding
    // the database's settings for this process.
    unsafe {
        pg_sys::BackgroundWorkerInitializeConnectionByOid(
            db,
            pg_sys::Oid::from(pg_sys::BOOTSTRAP_SUPERUSERID),
            0,
        );
        for (name, value) in WRITER_SETTINGS {
            pg_sys::SetConfigOption(
                name.as_ptr(),
                value.as_ptr(),
                pg_sys::GucContext::PGC_SUSET,
                pg_sys::GucSource::PGC_S_OVERRIDE,
            );
        }
    }
    let (found, old) = BackgroundWorker::transaction(|| {
        let found = high_water::read_and_write_here(Some(target));
        (found, found.is_none() && high_water::old_version_here())
    });
    t.writer_found_ms
        .store(found.unwrap_or(i64::MIN), Ordering::Release);
    t.writer_status.store(
        if found.is_some() {
            high_water::WRITER_WRITTEN
        } else if old {
            high_water::WRITER_OLD_VERSION
        } else {
            high_water::WRITER_NO_TABLE
        },
        Ordering::Release,
    );
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
            || crate::mint::lease::current_worker_id().is_none()
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
    if reserved == i64::MIN || reserved == i64::MAX || shmem::in_recovery() || datadir::exists() {
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
