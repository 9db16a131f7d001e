//! The gate: before a backend returns an ID, its own database's mark is
//! above it (`crate::mint::bound` asks; this answers).
//!
//! Everything here happens in the minting backend, in its own database:
//! no other database, no `pg_database` read, no background worker and no
//! new connection is involved, so nothing a role does elsewhere can stop
//! or slow it. What can stop it is this database's own table: a lock
//! that a superuser's DDL holds, or that this database's owner queues,
//! for more than `row::LOCK_WAIT` (then 55P03, here only).

use super::row::{self, Open, Table};
use super::{
    apply_found, ask_again_at, database_name, ensure_ready, hold_if_far, key, next_target,
    old_version_here, refuse_if_held_here, this_database_lags, RAISE_WITHIN_MS, RECHECK_MISSING_MS,
};
use crate::errors;
use crate::gucs;
use crate::mint::{shmem, worker};
use pgrx::pg_sys;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use std::sync::atomic::Ordering;

/// `crate::mint::bound::Owner::before`, before a call computes any ID
/// (a backend's first, and every call while some database holds a mark
/// back): refuse while the start-up read of the marks runs; read this
/// database's mark from before this start, once per backend, to hold it
/// back when it is far ahead of the clock (after a start that read no
/// marks, a database made from a held one, or a hold a restart forgot),
/// and where the start-up read did not reach this database, to raise the
/// generator above it; refuse where this database holds a mark back.
/// Everything here that waits, or moves the generator, comes before the
/// ID (issue 55).
pub fn before_mint() {
    let (Some(t), Some(state)) = (super::marks(), shmem::state()) else {
        return;
    };
    ensure_ready();
    forget_on_abort();
    // A hold taken, lifted or discarded since this backend last read its
    // marks: read them again.
    let epoch = t.held_epoch.load(Ordering::Acquire);
    if SEEN_EPOCH.with(|e| e.replace(epoch)) != epoch {
        SELF_READ.with(|r| r.set(false));
        HELD_HERE.with(|h| h.set(None));
    }
    if !SELF_READ.with(|r| r.get()) {
        if let (Ok(layout), Some(worker)) = (gucs::layout(), worker::current_worker_id()) {
            let key = key(&layout, worker);
            let lags = this_database_lags();
            let unread = super::marks_unread_here();
            row::with_lock_timeout(|| read_own_mark(t, state, &layout, &key, lags, unread));
            crate::mint::reservation::persist(
                state,
                &layout,
                t.mark_found_ms.load(Ordering::Acquire),
            );
            // Only once it was read: an ERROR on the way (a cancel, a
            // lock not granted) reads it again at the next call (the
            // red-team review of issue 55).
            SELF_READ.with(|r| r.set(true));
        }
    }
    refuse_if_held_here(t, HELD_HERE.with(|h| h.get()));
}

/// Whether this backend found its database's mark far ahead of the
/// clock, and holds it back (for `snowflake_stats()`).
pub fn held_here() -> bool {
    HELD_HERE.with(|h| h.get()).is_some()
}

/// `crate::mint::bound::Owner::cover`: `ms` is the Unix ms of the largest
/// ID about to be returned here. Returns once this database's mark is
/// above it, with the Unix ms at which to ask again.
pub fn covered(ms: i64) -> i64 {
    let (Some(t), Some(state)) = (super::marks(), shmem::state()) else {
        return i64::MAX;
    };
    // Made by `before_mint` already; a no-op then.
    before_mint();
    row::with_lock_timeout(|| cover(t, state, ms))
}

fn cover(t: &shmem::Tracking, state: &snowflake_id_core::GeneratorState, ms: i64) -> i64 {
    let (Ok(layout), Some(worker)) = (gucs::layout(), worker::current_worker_id()) else {
        return i64::MAX;
    };
    let key = key(&layout, worker);
    let stamp = t.started_at.load(Ordering::Acquire);
    let table = match Table::open(pg_sys::RowExclusiveLock) {
        Open::Opened(table) => table,
        Open::Missing => {
            note_old_version(t);
            return ms.saturating_add(RECHECK_MISSING_MS);
        }
        Open::Locked => errors::high_water_locked_here(),
    };
    // A row that moves between the look and the write (a superuser's
    // UPDATE) is looked up again.
    for _ in 0..3 {
        let found = table.find(&key);
        if let Some((mark, _)) = found {
            if mark.saturating_sub(ms) > RAISE_WITHIN_MS {
                return mark - RAISE_WITHIN_MS;
            }
        }
        let target = next_target(t, state, &layout, ms);
        let mark = match found {
            None => {
                table.insert(&key, target, stamp);
                target
            }
            Some((_, tid)) => match table.raise(tid, &key, target, stamp) {
                Some(mark) => mark,
                None => continue,
            },
        };
        if mark > ms {
            return ask_again_at(mark, ms);
        }
    }
    errors::high_water_locked_here()
}

thread_local! {
    /// The mark far ahead of the clock this backend found in its own
    /// database, held back there: known to the backend itself, so that no
    /// shared slot is needed (the red-team review of issue 55).
    static HELD_HERE: std::cell::Cell<Option<i64>> = const { std::cell::Cell::new(None) };
    /// `shmem::Tracking::held_epoch` when this backend last read its marks.
    static SEEN_EPOCH: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// This backend has read its database's marks from before this start.
    static SELF_READ: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static ABORT_CALLBACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A row inserted, or raised, in a transaction that aborts is gone (an
/// insert) and the backend's threshold must not outlive it: forget the
/// threshold at every abort, so that the next ID looks at the table again.
fn forget_on_abort() {
    if !ABORT_CALLBACK.with(|c| c.replace(true)) {
        // SAFETY: registering a transaction callback for the life of this
        // backend.
        unsafe { pg_sys::RegisterXactCallback(Some(on_xact), std::ptr::null_mut()) };
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn on_xact(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    if event == pg_sys::XactEvent::XACT_EVENT_ABORT
        || event == pg_sys::XactEvent::XACT_EVENT_PARALLEL_ABORT
    {
        crate::mint::bound::forget();
    }
}

/// A database the start-up read has not reached: read the mark it held
/// before this start (marks written since are this server's own, and
/// already below the generator's frontier or its targets), and raise the
/// generator above it, or hold it back. Once per backend; only the
/// launcher takes the database off the lagging set, once it has read it.
fn read_own_mark(
    t: &shmem::Tracking,
    state: &snowflake_id_core::GeneratorState,
    layout: &snowflake_id_core::Layout,
    key: &row::Key,
    lags: bool,
    unread: bool,
) {
    let own = t.started_at.load(Ordering::Acquire);
    let found = match Table::open(pg_sys::AccessShareLock) {
        Open::Opened(table) => table.find_not_own(key, own).map(|(m, _, _)| m),
        Open::Missing => None,
        Open::Locked if lags => errors::high_water_lags_here(),
        Open::Locked => errors::high_water_locked_here(),
    };
    // SAFETY: reading this backend's database.
    let db = unsafe { pg_sys::MyDatabaseId }.to_u32();
    let Some(found) = found else { return };
    if hold_if_far(t, state, layout, found, db, &database_name()) {
        HELD_HERE.with(|h| h.set(Some(found)));
    } else if unread {
        apply_found(t, state, layout, found, db, &database_name());
    }
    // Otherwise read at start-up, or needing no read (a clean restart:
    // the generator continues above the last ID, below the last run's
    // marks, which must not add their 5 s of lead): nothing to do.
}

/// A database whose extension is older than its table (0.7.0 or before):
/// its IDs are covered by the state file and the WAL only. Named once in
/// the log.
fn note_old_version(t: &shmem::Tracking) {
    // SAFETY: reading this backend's database.
    let db = unsafe { pg_sys::MyDatabaseId }.to_u32();
    if old_version_here() && t.old_versions.insert(db) {
        errors::report(
            PgLogLevel::WARNING,
            PgSqlErrorCode::ERRCODE_WARNING,
            format!(
                "snowflake_id: database \"{}\" has the extension at a version before 0.8.0: it holds no high-water mark, and a dump of it carries none",
                database_name()
            ),
            Some("Its IDs are covered by the state file and the WAL only, not by pg_upgrade or pg_dump of that database.".into()),
            Some("Run ALTER EXTENSION snowflake_id UPDATE in that database."),
        );
    }
}
