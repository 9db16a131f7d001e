//! The start-up read of every database's mark, where a start needs it
//! (no state file of this cluster, or a crash that crash recovery did
//! not cover: see `crate::mint::reservation::marks_needed_at_start`).
//!
//! The launcher (a background worker connected to no database) lists the
//! databases and reads them all, [`READERS`] short-lived readers at a
//! time, each in its own database; the largest mark of this server's
//! configuration raises the generator (or is held back when far ahead),
//! then `mark_ready` lets generation begin: no ID is computed before
//! every database was read (issue 55). A database it cannot read (locked
//! by a CREATE, DROP or RENAME DATABASE, a reader that fails or takes
//! longer than [`READER_TIMEOUT`], no worker slot free for as long) is
//! recorded as lagging: its own backends read its mark before their
//! first ID (`super::gate`), and the launcher reads it again every
//! second. After that the launcher only applies a held-back mark that
//! the clock has come within reach of; it writes nothing, ever.

use super::{
    apply_found, establish_far_base, key, old_version_here, release_far_mark_in_reach, row,
};
use crate::gucs;
use crate::mint::shmem::READERS;
use crate::mint::{bgworker, shmem, worker};
use pgrx::bgworkers::BgWorkerStartTime;
use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BackgroundWorkerStatus};
use pgrx::pg_sys;
use pgrx::prelude::*;
use snowflake_id_core::{Clock, GeneratorState, Layout, SystemClock};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long the launcher waits for one reader before it stops it and
/// counts its database as lagging.
pub const READER_TIMEOUT: Duration = Duration::from_secs(2);
/// Once a read has taken this long, a reader gets [`LATE_READER_TIMEOUT`]
/// only: a reader takes milliseconds, so only a database some role keeps
/// slow (a lock queued on a catalog, say) loses its turn, and however
/// many such databases a role with CREATEDB makes, each costs the read a
/// fraction of a second, not two.
pub const READ_BUDGET: Duration = Duration::from_secs(5);
pub const LATE_READER_TIMEOUT: Duration = Duration::from_millis(250);
/// How often the launcher looks at its work.
const TICK: Duration = Duration::from_millis(100);
/// How often the launcher tries again the databases that lag.
const LAGGING_RETRY: Duration = Duration::from_secs(1);

/// What a reader tells its launcher (`shmem::ReaderSlot::status`).
pub const READER_NONE: u32 = 0;
pub const READER_READ: u32 = 1;
pub const READER_NO_TABLE: u32 = 2;
/// A carrier raised its database's mark (issue 62).
pub const READER_CARRIED: u32 = 3;
/// The bit of a reader's argument that makes it a carrier: it raises its
/// database's mark to the slot's `found_ms` instead of reading it.
const CARRY_BIT: u64 = 1 << 62;

pub fn register() {
    // After recovery only: a standby reads no marks; a promoted one
    // starts it (and finds nothing to do: the WAL covered it).
    BackgroundWorkerBuilder::new("snowflake_id high-water launcher")
        .set_type("snowflake_id high-water launcher")
        .set_library("snowflake_id")
        .set_function("snowflake_id_high_water_main")
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

/// Wake the launcher: a caller waits for the start-up read.
pub fn wake_launcher(t: &shmem::Tracking) {
    if !t.mark_wanted.swap(true, Ordering::AcqRel) {
        set_launcher_latch(t);
    }
}

/// Wake the launcher for a carry (issue 62): it looks at its work within
/// its tick anyway.
pub fn set_launcher_latch(t: &shmem::Tracking) {
    let latch = t.launcher_latch.load(Ordering::Acquire);
    if latch != 0 {
        // SAFETY: the launcher's latch is in its PGPROC (shared memory);
        // SetLatch on a latch whose owner exited is harmless.
        unsafe { pg_sys::SetLatch(latch as *mut pg_sys::Latch) };
    }
}

/// Carry a dropped database's IDs (the reservation in
/// `carry_wanted_ms`) into another database's mark: one carrier at a
/// time, database after database, until one has raised its mark.
/// Until then every file and record says the carry is pending. Returns
/// whether nothing is left to carry.
fn carry(t: &shmem::Tracking, state: &GeneratorState, layout: &Layout) -> bool {
    let want = t.carry_wanted_ms.load(Ordering::Acquire);
    if want <= t.carried_ms.load(Ordering::Acquire) {
        return true;
    }
    let Some(dbs) = databases() else {
        return false;
    };
    let began = Instant::now();
    for db in &dbs {
        // A round takes at most the read's budget: a second later the
        // next round goes on (the launcher has other work).
        if began.elapsed() > READ_BUDGET {
            return false;
        }
        if database_locked(db.oid) || t.lagging.contains(db.oid.to_u32()) {
            continue;
        }
        t.readers[0].status.store(READER_NONE, Ordering::Release);
        t.readers[0].found_ms.store(want, Ordering::Release);
        let Some(handle) = start_worker(0, db.oid, CARRY_BIT) else {
            return false;
        };
        let began = Instant::now();
        loop {
            let stopped = matches!(
                handle.pid(),
                Err(BackgroundWorkerStatus::Stopped | BackgroundWorkerStatus::PostmasterDied)
            );
            if stopped {
                break;
            }
            if began.elapsed() > READER_TIMEOUT {
                let _ = handle.terminate().wait_for_shutdown();
                break;
            }
            nap();
        }
        if t.readers[0].status.load(Ordering::Acquire) == READER_CARRIED {
            t.carried_into.store(db.oid.to_u32(), Ordering::Release);
            t.carried_ms.fetch_max(want, Ordering::AcqRel);
            pgrx::log!(
                "snowflake_id: carried the IDs of a dropped database (up to {}) into the high-water mark of database \"{}\"",
                snowflake_id_core::format_epoch(want),
                db.name
            );
            crate::mint::reservation::persist(state, layout, i64::MIN);
            return true;
        }
    }
    false
}

/// The high-water launcher.
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn snowflake_id_high_water_main(_arg: pg_sys::Datum) {
    bgworker::attach_signals();
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
    let mut retry_after: Option<Instant> = None;
    let mut prune_at: Option<Instant> = None;
    let mut carry_after: Option<Instant> = None;
    // The first round runs at once: a start that needs the read waits
    // for it from the moment it accepts connections.
    let mut first = true;
    while std::mem::take(&mut first) || BackgroundWorker::wait_latch(Some(TICK)) {
        pgrx::check_for_interrupts!();
        if BackgroundWorker::sighup_received() {
            // SAFETY: standard configuration reload in a background worker.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        if shmem::in_recovery() || shmem::binary_upgrade() {
            continue;
        }
        release_far_mark_in_reach(t, state, &layout);
        if !t.held.is_empty() && prune_at.is_none_or(|at| Instant::now() >= at) {
            forget_dropped_holds(t, state);
            prune_at = Some(Instant::now() + LAGGING_RETRY);
        }
        if worker::current_worker_id().is_none() {
            continue;
        }
        // A carry tried and not made is tried again after a second, as a
        // lagging database is read again.
        if t.mark_ready.load(Ordering::Acquire)
            && carry_after.is_none_or(|at| Instant::now() >= at)
            && !carry(t, state, &layout)
        {
            carry_after = Some(Instant::now() + LAGGING_RETRY);
        }
        if retry_after.is_some_and(|at| Instant::now() < at) {
            continue;
        }
        if t.mark_ready.load(Ordering::Acquire) {
            if t.lag_all.load(Ordering::Acquire) {
                if read_every_database(t, state, &layout) {
                    t.lag_all.store(false, Ordering::Release);
                }
                retry_after = Some(Instant::now() + LAGGING_RETRY);
            } else if !t.lagging.is_empty() {
                read_lagging(t, state, &layout);
                retry_after = Some(Instant::now() + LAGGING_RETRY);
            }
            continue;
        }
        pgrx::log!(
            "snowflake_id: reading the high-water marks of every database before the first ID"
        );
        let began = Instant::now();
        let listed = read_every_database(t, state, &layout);
        pgrx::log!(
            "snowflake_id: read the high-water marks of {} of {} databases in {} ms{}",
            t.read_done.load(Ordering::Acquire),
            t.read_total.load(Ordering::Acquire),
            began.elapsed().as_millis(),
            if listed && t.lagging.is_empty() {
                String::new()
            } else {
                "; the others read their own before their first ID".to_string()
            }
        );
        // Not listed (a lock request queued on pg_database): every
        // database reads its own mark until a later read lists them all.
        t.lag_all.store(!listed, Ordering::Release);
        let clock = SystemClock;
        establish_far_base(
            t,
            state.frontier_ms(&layout, clock.wall_ns(), clock.mono_ns()),
        );
        t.mark_ready.store(true, Ordering::Release);
        t.mark_wanted.store(false, Ordering::Release);
        shmem::wake_waiters();
        // What the read applied, and what it left lagging or held,
        // outlive a restart that follows at once (the red-team review of
        // issue 62: no ID need be minted before it).
        crate::mint::reservation::persist(state, &layout, t.mark_found_ms.load(Ordering::Acquire));
        if !listed {
            retry_after = Some(Instant::now() + LAGGING_RETRY);
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn forget_launcher(_code: std::ffi::c_int, _arg: pg_sys::Datum) {
    if let Some(t) = shmem::tracking() {
        t.launcher_latch.store(0, Ordering::Release);
    }
}

/// A database the launcher reads.
struct Database {
    oid: pg_sys::Oid,
    name: String,
}

/// Read every database's mark and apply the largest (issue 55: no ID
/// before every database's mark of this configuration is read).
/// [`READERS`] readers run at once, each in its own database; a database
/// whose reader cannot start (no free worker slot for
/// [`READER_TIMEOUT`]), fails, or is locked (a CREATE, DROP or RENAME
/// DATABASE holds it), lags: its own sessions read its mark before their
/// first ID, and [`read_lagging`] reads it later. Returns false when the
/// databases could not be listed (`pg_database` locked), or more lag
/// than the lagging set holds.
fn read_every_database(t: &shmem::Tracking, state: &GeneratorState, layout: &Layout) -> bool {
    let Some(dbs) = databases() else {
        return false;
    };
    t.read_total.store(dbs.len() as u32, Ordering::Release);
    t.read_done.store(0, Ordering::Release);
    let mut ok = true;
    read_all(t, &dbs, |db, read| {
        t.read_done.fetch_add(1, Ordering::AcqRel);
        match read {
            Ok((READER_READ, f)) => {
                t.lagging.remove(db.oid.to_u32());
                // Each database's mark on its own: one held back as far
                // ahead holds its database alone, and every other is
                // still applied (the red-team review of issue 55: only
                // the largest was, so a far mark in one database let
                // every other mint below its own mark).
                apply_found(t, state, layout, f, db.oid.to_u32(), &db.name);
            }
            Ok(_) => {
                t.lagging.remove(db.oid.to_u32());
            }
            Err(why) => {
                t.mark_failed_db.store(db.oid.to_u32(), Ordering::Release);
                if !t.lagging.insert(db.oid.to_u32()) {
                    // More than LAGGING_DATABASES: its sessions, and every
                    // other database's, read their own marks.
                    ok = false;
                }
                pgrx::log!(
                    "snowflake_id: could not read the high-water mark of database \"{}\" at start-up ({}); its sessions read it before their first ID",
                    db.name,
                    why.text()
                );
            }
        }
    });
    if !ok {
        return false;
    }
    // A database created meanwhile, from a template that has the
    // extension, may hold a mark the loop did not see: it reads its own.
    if let Some(now) = databases() {
        for db in now {
            if !dbs.iter().any(|d| d.oid == db.oid) && !t.lagging.insert(db.oid.to_u32()) {
                return false;
            }
        }
    }
    true
}

/// A reader at work: its slot, its database, and when it started.
struct InFlight<'a> {
    slot: usize,
    db: &'a Database,
    handle: pgrx::bgworkers::DynamicBackgroundWorker,
    started: Instant,
}

/// Read the marks of `dbs`, up to [`READERS`] at a time, and hand each
/// database's outcome to `done`, in the order they finish.
fn read_all<'a>(
    t: &shmem::Tracking,
    dbs: &'a [Database],
    mut done: impl FnMut(&'a Database, Result<(u32, i64), ReadFail>),
) {
    let mut next = 0;
    let began = Instant::now();
    let mut running: Vec<InFlight<'a>> = Vec::with_capacity(READERS);
    // Since when no reader could be started while none ran.
    let mut no_slot_since: Option<Instant> = None;
    loop {
        // Start readers in the free slots.
        while running.len() < READERS && next < dbs.len() {
            let db = &dbs[next];
            if database_locked(db.oid) {
                next += 1;
                done(db, Err(ReadFail::Locked));
                continue;
            }
            let slot = (0..READERS)
                .find(|s| running.iter().all(|r| r.slot != *s))
                .expect("a free slot");
            match start_reader(t, slot, db.oid) {
                Some(handle) => {
                    running.push(InFlight {
                        slot,
                        db,
                        handle,
                        started: Instant::now(),
                    });
                    no_slot_since = None;
                    next += 1;
                }
                None if running.is_empty() => {
                    let since = *no_slot_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > READER_TIMEOUT {
                        // No slot at all: the rest lag.
                        for db in &dbs[next..] {
                            done(db, Err(ReadFail::Start));
                        }
                        next = dbs.len();
                    }
                    break;
                }
                // Wait for a running reader to free its slot.
                None => break,
            }
        }
        if running.is_empty() && next >= dbs.len() {
            return;
        }
        nap();
        let mut i = 0;
        while i < running.len() {
            let r = &running[i];
            // (The next nap exits when the postmaster is gone.)
            let stopped = matches!(
                r.handle.pid(),
                Err(BackgroundWorkerStatus::Stopped | BackgroundWorkerStatus::PostmasterDied)
            );
            let timeout = if began.elapsed() > READ_BUDGET {
                LATE_READER_TIMEOUT
            } else {
                READER_TIMEOUT
            };
            if !stopped && r.started.elapsed() <= timeout {
                i += 1;
                continue;
            }
            let r = running.swap_remove(i);
            let read = if !stopped {
                // A reader can wait where no setting bounds it
                // (connecting to a database that a CREATE or DROP
                // DATABASE holds, say): stop it, and its database lags.
                let _ = r.handle.terminate().wait_for_shutdown();
                Err(ReadFail::InDatabase)
            } else {
                let slot = &t.readers[r.slot];
                match slot.status.load(Ordering::Acquire) {
                    READER_NONE => Err(ReadFail::InDatabase),
                    s => Ok((s, slot.found_ms.load(Ordering::Acquire))),
                }
            };
            done(r.db, read);
        }
    }
}

/// A database dropped while it held a mark holds nothing any more (it
/// would keep every call off the entry point's fast path, and its mark
/// would be applied by an acceptance).
fn forget_dropped_holds(t: &shmem::Tracking, state: &GeneratorState) {
    let Some(dbs) = databases() else { return };
    let gone: Vec<u32> = t
        .held
        .oids()
        .into_iter()
        .filter(|o| !dbs.iter().any(|d| d.oid.to_u32() == *o))
        .collect();
    if gone.is_empty() {
        return;
    }
    for oid in gone {
        t.held.release(oid);
    }
    super::after_release(t, state);
}

/// After the start-up read: read the databases it left lagging, and
/// apply what they hold.
fn read_lagging(t: &shmem::Tracking, state: &GeneratorState, layout: &Layout) {
    let Some(dbs) = databases() else { return };
    let lagging = t.lagging.oids();
    for v in &lagging {
        if !dbs.iter().any(|d| d.oid.to_u32() == *v) {
            // Dropped.
            t.lagging.remove(*v);
        }
    }
    let todo: Vec<Database> = dbs
        .into_iter()
        .filter(|d| lagging.contains(&d.oid.to_u32()))
        .collect();
    read_all(t, &todo, |db, read| {
        if let Ok((status, f)) = read {
            if status == READER_READ {
                apply_found(t, state, layout, f, db.oid.to_u32(), &db.name);
            }
            t.lagging.remove(db.oid.to_u32());
        }
    });
    // What it applied outlives a restart (issue 62).
    crate::mint::reservation::persist(state, layout, t.mark_found_ms.load(Ordering::Acquire));
}

/// Every valid database, read from `pg_database` (a shared catalog) by
/// the launcher, which is connected to none; `None` when the catalog's
/// lock is not granted at once (a lock request queued on it: try later,
/// never wait behind it).
fn databases() -> Option<Vec<Database>> {
    let mut out = vec![];
    // SAFETY: the sequence autovacuum's launcher uses to list databases
    // (get_database_list): a transaction, a snapshot, a catalog scan; the
    // tuples' structs are pg_database rows while the scan holds them, and
    // their fields are copied out before the transaction ends. The lock
    // is asked for without waiting.
    unsafe {
        pg_sys::StartTransactionCommand();
        if !pg_sys::ConditionalLockRelationOid(
            pg_sys::DatabaseRelationId,
            pg_sys::AccessShareLock as _,
        ) {
            pg_sys::CommitTransactionCommand();
            return None;
        }
        pg_sys::GetTransactionSnapshot();
        let rel = pg_sys::table_open(pg_sys::DatabaseRelationId, pg_sys::NoLock as _);
        let scan = pg_sys::table_beginscan_catalog(rel, 0, std::ptr::null_mut());
        loop {
            let tup = pg_sys::heap_getnext(scan, pg_sys::ScanDirection::ForwardScanDirection);
            if tup.is_null() {
                break;
            }
            let form = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_database>(tup);
            // -2: a database whose DROP was interrupted (invalid).
            if (*form).datconnlimit != -2 {
                let name = std::ffi::CStr::from_ptr((*form).datname.data.as_ptr())
                    .to_string_lossy()
                    .into_owned();
                out.push(Database {
                    oid: (*form).oid,
                    name,
                });
            }
        }
        pg_sys::table_endscan(scan);
        pg_sys::table_close(rel, pg_sys::NoLock as _);
        pg_sys::CommitTransactionCommand();
    }
    out.sort_by_key(|d| d.oid.to_u32());
    Some(out)
}

/// Whether another session holds a lock on database `db` that a writer's
/// connection would wait for (CREATE DATABASE … TEMPLATE, RENAME or DROP
/// DATABASE, which may be held open in a transaction): asked without
/// waiting, so that such a database costs the round nothing (it lags,
/// and its sessions, if any, mint nothing until it is written).
fn database_locked(db: pg_sys::Oid) -> bool {
    // SAFETY: the lock a backend's InitPostgres takes on its database
    // (LockSharedObject(DatabaseRelationId, db, 0, RowExclusiveLock)),
    // asked for without waiting inside a short transaction of the
    // launcher, and released at once.
    unsafe {
        pg_sys::StartTransactionCommand();
        let tag = pg_sys::LOCKTAG {
            locktag_field1: 0,
            locktag_field2: pg_sys::DatabaseRelationId.to_u32(),
            locktag_field3: db.to_u32(),
            locktag_field4: 0,
            locktag_type: pg_sys::LockTagType::LOCKTAG_OBJECT as u8,
            locktag_lockmethodid: pg_sys::DEFAULT_LOCKMETHOD as u8,
        };
        let mode = pg_sys::RowExclusiveLock as pg_sys::LOCKMODE;
        let got = pg_sys::LockAcquire(&tag, mode, false, true);
        if got != pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL {
            pg_sys::LockRelease(&tag, mode, false);
        }
        pg_sys::CommitTransactionCommand();
        got == pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL
    }
}

/// Why a database was not read.
enum ReadFail {
    /// Its reader could not be started (no background worker slot free).
    Start,
    /// Another session holds a lock on the database that a connection
    /// would wait for.
    Locked,
    /// Its reader ran in its database and failed or timed out there.
    InDatabase,
}

impl ReadFail {
    fn text(&self) -> &'static str {
        match self {
            ReadFail::Start => "no background worker slot was free",
            ReadFail::Locked => "another session holds a lock on it",
            ReadFail::InDatabase => "its reader failed or took too long",
        }
    }
}

/// The launcher's wait while it polls its readers: 10 ms on its latch
/// (the postmaster sets it when a reader it was told about stops), then
/// any pending interrupt.
fn nap() {
    // SAFETY: the standard latch wait of a background worker.
    unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
            10,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
    pgrx::check_for_interrupts!();
}

/// Start a reader for database `db` in reader slot `slot`; `None` when no
/// background worker slot is free now.
fn start_reader(
    t: &shmem::Tracking,
    slot: usize,
    db: pg_sys::Oid,
) -> Option<pgrx::bgworkers::DynamicBackgroundWorker> {
    t.readers[slot].status.store(READER_NONE, Ordering::Release);
    t.readers[slot].found_ms.store(i64::MIN, Ordering::Release);
    start_worker(slot, db, 0)
}

/// Start a reader (`flags` 0) or a carrier ([`CARRY_BIT`]) in slot `slot`.
fn start_worker(
    slot: usize,
    db: pg_sys::Oid,
    flags: u64,
) -> Option<pgrx::bgworkers::DynamicBackgroundWorker> {
    // SAFETY: reading this process's pid.
    let me = unsafe { pg_sys::MyProcPid };
    BackgroundWorkerBuilder::new("snowflake_id high-water reader")
        .set_type("snowflake_id high-water reader")
        .set_library("snowflake_id")
        .set_function("snowflake_id_high_water_reader_main")
        .enable_spi_access()
        .set_argument(Some(pg_sys::Datum::from(
            flags | ((slot as u64) << 32) | db.to_u32() as u64,
        )))
        .set_notify_pid(me)
        .set_restart_time(None)
        .load_dynamic()
        .ok()
}

/// Settings of a reader, whatever its database sets (`ALTER DATABASE ...
/// SET` is its owner's): its own identity (a database's `role` setting
/// would make it that role), the catalog and nothing else on
/// `search_path`, and bounded waits.
const READER_SETTINGS: &[(&std::ffi::CStr, &std::ffi::CStr)] = &[
    (c"role", c"none"),
    (c"search_path", c"pg_catalog, pg_temp"),
    (c"statement_timeout", c"10s"),
    (c"lock_timeout", c"1s"),
    (c"idle_in_transaction_session_timeout", c"0"),
    // A database's default isolation, read-only and deferrable settings
    // would make the reader's snapshot wait for a safe one behind any
    // serializable transaction (the red-team review of issue 55).
    (c"default_transaction_isolation", c"read committed"),
    (c"default_transaction_read_only", c"off"),
    (c"default_transaction_deferrable", c"off"),
    #[cfg(any(feature = "pg17", feature = "pg18"))]
    (c"transaction_timeout", c"0"),
];

/// A high-water reader: one database, once. The argument is the
/// database's OID.
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn snowflake_id_high_water_reader_main(arg: pg_sys::Datum) {
    bgworker::attach_signals();
    let Some(t) = shmem::tracking() else { return };
    let db = pg_sys::Oid::from(arg.value() as u32);
    let carrier = arg.value() as u64 & CARRY_BIT != 0;
    let Some(slot) = t
        .readers
        .get((arg.value() as u64 & !CARRY_BIT) as usize >> 32)
    else {
        return;
    };
    // SAFETY: connecting as the bootstrap superuser, named (a worker that
    // names no user is initialised without session_authorization pinned,
    // so a database's `ALTER DATABASE ... SET session_authorization`
    // would make it that role), to a database that may not allow
    // connections (`ALLOW_CONNECTIONS false`: its mark counts too). Then
    // overriding the database's settings for this process.
    unsafe {
        pg_sys::BackgroundWorkerInitializeConnectionByOid(
            db,
            pg_sys::Oid::from(pg_sys::BOOTSTRAP_SUPERUSERID),
            pg_sys::BGWORKER_BYPASS_ALLOWCONN,
        );
        for (name, value) in READER_SETTINGS {
            pg_sys::SetConfigOption(
                name.as_ptr(),
                value.as_ptr(),
                pg_sys::GucContext::PGC_SUSET,
                pg_sys::GucSource::PGC_S_OVERRIDE,
            );
        }
    }
    if carrier {
        let want = slot.found_ms.load(Ordering::Acquire);
        let carried = BackgroundWorker::transaction(|| {
            let (Ok(layout), Some(worker)) = (gucs::layout(), worker::current_worker_id()) else {
                return false;
            };
            let key = key(&layout, worker);
            let stamp = t.started_at.load(Ordering::Acquire);
            row::with_lock_timeout(|| match row::Table::open(pg_sys::RowExclusiveLock) {
                row::Open::Opened(table) => table
                    .raise_or_insert(&key, want, stamp)
                    .is_some_and(|m| m >= want),
                _ => false,
            })
        });
        if carried {
            slot.status.store(READER_CARRIED, Ordering::Release);
        }
        return;
    }
    let found = BackgroundWorker::transaction(|| {
        let (Ok(layout), Some(worker)) = (gucs::layout(), worker::current_worker_id()) else {
            return None;
        };
        // Marks this start wrote are its own.
        let own = t.started_at.load(Ordering::Acquire);
        match row::Table::open(pg_sys::AccessShareLock) {
            row::Open::Opened(table) => Some(
                table
                    .find_not_own(&key(&layout, worker), own)
                    .map_or(i64::MIN, |(m, _, _)| m),
            ),
            row::Open::Missing => {
                if old_version_here() && t.old_versions.insert(db.to_u32()) {
                    pgrx::warning!(
                        "snowflake_id: database with OID {} has the extension at a version before 0.8.0: it holds no high-water mark, and a dump of it carries none; run ALTER EXTENSION snowflake_id UPDATE there",
                        db.to_u32()
                    );
                }
                Some(i64::MIN)
            }
            row::Open::Locked => None,
        }
    });
    let Some(found) = found else { return };
    crate::failpoint!("startup-read-of-a-database");
    slot.found_ms.store(found, Ordering::Release);
    slot.status.store(
        if found == i64::MIN {
            READER_NO_TABLE
        } else {
            READER_READ
        },
        Ordering::Release,
    );
}
