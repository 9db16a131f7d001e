//! Which sequences of this database are adopted, as this backend knows
//! them: a copy of the server's table in shared memory ([`super::shared`]),
//! taken again whenever that table's word for this database moves (one
//! atomic read per statement). Where the table has not loaded this
//! database yet (after a start), this backend reads
//! `snowflake_id_internal.snowflake_adopted` (the extension's own table
//! and functions only: a schema, table and functions owned by a superuser;
//! with a fresh snapshot and no SQL), under a lock it takes only if it is
//! free at once, and publishes what it read. So no statement reads a
//! catalog that ordinary planning does not, and none waits for a lock
//! that another role can queue (issue 63). Every change of the list also
//! sends an invalidation of its table (`snowflake_id_internal.adopt_changed()`),
//! which drops every cached plan of the backend, so no plan made before an
//! adoption outlives it. [`super::planner`] and [`super::utility`] ask it which
//! swaps to make ([`active`]), [`super::calls`] whether a sequence is
//! adopted ([`is_adopted`]).

use pgrx::pg_sys;
use pgrx::prelude::*;
use snowflake_id_core::adopted::{Published, Word};
use std::cell::{Cell, RefCell};
use std::collections::HashSet;

use super::shared;
use crate::catalog;

/// The functions that take the built-ins' places.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) struct Fns {
    pub(super) nextval: pg_sys::Oid,
    pub(super) currval: pg_sys::Oid,
    pub(super) setval: pg_sys::Oid,
    pub(super) setval3: pg_sys::Oid,
    pub(super) lastval: pg_sys::Oid,
    /// `seq_identity`: an adopted identity column's draw.
    pub(super) identity: pg_sys::Oid,
    /// `seq_copy_nextval` and `seq_copy_identity`: the same, in the
    /// defaults a `COPY` builds from its swapped cache entry.
    pub(super) copy_nextval: pg_sys::Oid,
    pub(super) copy_identity: pg_sys::Oid,
    /// `seq_drawn` for `smallint`, `integer` and `bigint`: wrapped around
    /// an identity column's draw, so that `lastval()` knows of it.
    pub(super) drawn: [pg_sys::Oid; 3],
}

impl Fns {
    /// No swaps.
    pub(super) const NONE: Fns = Fns {
        nextval: pg_sys::Oid::INVALID,
        currval: pg_sys::Oid::INVALID,
        setval: pg_sys::Oid::INVALID,
        setval3: pg_sys::Oid::INVALID,
        lastval: pg_sys::Oid::INVALID,
        identity: pg_sys::Oid::INVALID,
        copy_nextval: pg_sys::Oid::INVALID,
        copy_identity: pg_sys::Oid::INVALID,
        drawn: [pg_sys::Oid::INVALID; 3],
    };

    /// The replacement of built-in function `f`, or `InvalidOid`.
    pub(super) fn swap_of(&self, f: pg_sys::Oid) -> pg_sys::Oid {
        match f.to_u32() {
            pg_sys::F_NEXTVAL => self.nextval,
            pg_sys::F_CURRVAL => self.currval,
            pg_sys::F_SETVAL_REGCLASS_INT8 => self.setval,
            pg_sys::F_SETVAL_REGCLASS_INT8_BOOL => self.setval3,
            pg_sys::F_LASTVAL => self.lastval,
            _ => pg_sys::Oid::INVALID,
        }
    }

    /// The `seq_drawn` of an identity column's type, or `InvalidOid`.
    pub(super) fn drawn_of(&self, typ: pg_sys::Oid) -> pg_sys::Oid {
        match typ {
            pg_sys::INT2OID => self.drawn[0],
            pg_sys::INT4OID => self.drawn[1],
            pg_sys::INT8OID => self.drawn[2],
            _ => pg_sys::Oid::INVALID,
        }
    }
}

/// What this backend knows of its database's adopted sequences.
enum Known {
    /// To be read (at start, and after an invalidation).
    Unknown,
    /// No extension (of a version with adoption) in this database.
    Absent,
    Loaded {
        adopted: HashSet<pg_sys::Oid>,
        fns: Fns,
    },
}

thread_local! {
    static KNOWN: RefCell<Known> = const { RefCell::new(Known::Unknown) };
    /// The table's OID once read, for the invalidation callback.
    static TABLE: Cell<pg_sys::Oid> = const { Cell::new(pg_sys::Oid::INVALID) };
    /// The swaps of the last list this backend read (`Fns::NONE` where it
    /// was empty, or none was read): used while the list cannot be read
    /// (in parallel mode; while its lock is held up), so that a statement
    /// planned then is swapped as the last list said (a swap of a sequence
    /// that is not adopted calls the built-in: harmless).
    static LAST_SWAPS: Cell<Fns> = const { Cell::new(Fns::NONE) };
    /// The word of the shared table the copy in [`KNOWN`] was taken at
    /// (`None`: read by this backend alone, in recovery).
    static COPIED_AT: Cell<Option<Word>> = const { Cell::new(None) };
    /// Whether this backend has read the list since it started.
    static EVER_READ: Cell<bool> = const { Cell::new(false) };
    /// Whether a read was skipped since the last plan-cache reset: the
    /// next read resets the plan cache again, for the plans made meanwhile.
    static SKIPPED: Cell<bool> = const { Cell::new(false) };
    /// Whether the last attempt to read the list was held up by a lock
    /// (on the list, or on the catalogs its membership is checked in) in
    /// a backend that never read it: a statement that calls one of the
    /// four is then refused (55P03); any other is planned as it is.
    static UNREADABLE: Cell<bool> = const { Cell::new(false) };
}

/// Register the invalidation callbacks: in the postmaster, at preload
/// (every backend inherits them).
pub(super) fn init() {
    // SAFETY: callbacks are registered once, in _PG_init of the
    // postmaster, before any backend exists.
    unsafe {
        pg_sys::CacheRegisterRelcacheCallback(Some(relcache_changed), pg_sys::Datum::from(0));
        pg_sys::CacheRegisterSyscacheCallback(
            pg_sys::SysCacheIdentifier::NAMESPACEOID as _,
            Some(schema_changed),
            pg_sys::Datum::from(0),
        );
    }
}

/// The other relcache handlers of adopted sequences ([`also_on_relcache`]):
/// PostgreSQL has room for ten relcache callbacks in a process, shared
/// with every other preloaded library (Citus takes several), so this room
/// registers one and calls them from it (the CI run of 6959341: "out of
/// relcache_callback_list slots" beside Citus).
static RELCACHE_HANDLERS: std::sync::RwLock<Vec<fn(pg_sys::Oid)>> =
    std::sync::RwLock::new(Vec::new());

/// Have [`relcache_changed`] call `f` too, with each invalidated
/// relation (`InvalidOid`: all of them). At preload.
pub(super) fn also_on_relcache(f: fn(pg_sys::Oid)) {
    if let Ok(mut h) = RELCACHE_HANDLERS.write() {
        h.push(f);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn relcache_changed(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    if let Ok(h) = RELCACHE_HANDLERS.read() {
        for f in h.iter() {
            f(relid);
        }
    }
    let table = TABLE.with(|t| t.get());
    if relid == pg_sys::Oid::INVALID || (relid == table && table != pg_sys::Oid::INVALID) {
        KNOWN.with(|k| *k.borrow_mut() = Known::Unknown);
        if relid == table {
            // Plans made before the change may hold calls the hook would
            // now swap (or swapped calls it would not): plan them again.
            // SAFETY: marks every cached plan of this backend invalid, as
            // PostgreSQL's own invalidation callbacks do.
            unsafe { pg_sys::ResetPlanCache() };
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn schema_changed(_arg: pg_sys::Datum, _cacheid: i32, _hash: u32) {
    // A schema created or dropped: maybe the extension's. Only an absent
    // extension needs looking for again; a loaded one hears of its table.
    KNOWN.with(|k| {
        if matches!(&*k.borrow(), Known::Absent) {
            *k.borrow_mut() = Known::Unknown;
        }
    });
}

/// How long the event trigger that forgets dropped sequences tries for
/// the list's lock (without queueing) before it fails (55P03). A
/// statement's own read of the list does not wait at all (see
/// [`held_up`]).
const LIST_LOCK_WAIT_MS: u64 = 1_000;

/// The first column of a row of `snowflake_id_internal.snowflake_adopted`
/// (`seq regclass`, NOT NULL, fixed-width).
#[repr(C)]
struct AdoptedRow {
    seq: pg_sys::Oid,
}

/// Take ACCESS SHARE on each of `rels` without queueing behind anyone,
/// trying for at most `wait_ms`; false (and none held) if not.
///
/// # Safety
/// In a transaction.
unsafe fn lock_without_queueing(rels: &[pg_sys::Oid], wait_ms: u64) -> bool {
    let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
    let mut waited = 0;
    // SAFETY: lock calls of this backend; each one taken is released on
    // failure.
    unsafe {
        loop {
            let mut got = 0;
            while got < rels.len() && pg_sys::ConditionalLockRelationOid(rels[got], lock) {
                got += 1;
            }
            if got == rels.len() {
                return true;
            }
            for r in &rels[..got] {
                pg_sys::UnlockRelationOid(*r, lock);
            }
            if waited >= wait_ms {
                return false;
            }
            pgrx::check_for_interrupts!();
            pg_sys::pg_usleep(10_000);
            waited += 10;
        }
    }
}

/// The list could not be read for a lock (only a superuser, or the
/// database's owner with `VACUUM FULL`, can queue one on it): a backend
/// that read it before goes on with what it read (see [`LAST_SWAPS`]); one
/// that never did refuses the statements that call the four
/// ([`UNREADABLE`]). Neither waits; the next statement tries again.
fn held_up() {
    SKIPPED.with(|k| k.set(true));
    if !EVER_READ.with(|e| e.get()) {
        UNREADABLE.with(|u| u.set(true));
    }
}

/// Read the list into [`KNOWN`]: only the extension's own objects (a
/// schema, table and functions of those names owned by a superuser:
/// `crate::catalog` says why that is enough), from the shared table where
/// it has this database loaded, else from the list itself (a fresh
/// snapshot, no SQL), which it then publishes there.
fn load() {
    // SAFETY: catalog look-ups through the syscache, in a transaction;
    // the list's table is scanned under its lock with a registered
    // snapshot, and its rows' first column is a NOT NULL oid.
    unsafe {
        // Not in a parallel worker or a parallel query (no new snapshot may
        // be taken there, and nothing is planned there), nor under logical
        // decoding's historic snapshot: the list stays unknown, no swap.
        if !pg_sys::IsTransactionState()
            || pg_sys::IsInParallelMode()
            || pg_sys::HistoricSnapshotActive()
        {
            SKIPPED.with(|k| k.set(true));
            return;
        }
        let absent = || {
            LAST_SWAPS.with(|l| l.set(Fns::NONE));
            KNOWN.with(|k| *k.borrow_mut() = Known::Absent)
        };
        // Only the syscache, which planning reads anyway: no pg_extension,
        // no pg_depend (a lock queued on either must not hold up anyone).
        let Some((ns, table)) = catalog::own_relation(c"snowflake_adopted") else {
            return absent();
        };
        let member_function = |name, args: &[pg_sys::Oid]| catalog::own_function(ns, name, args);
        let regclass = pg_sys::REGCLASSOID;
        let fns = Fns {
            nextval: member_function(c"seq_nextval", &[regclass]),
            currval: member_function(c"seq_currval", &[regclass]),
            setval: member_function(c"seq_setval", &[regclass, pg_sys::INT8OID]),
            setval3: member_function(c"seq_setval", &[regclass, pg_sys::INT8OID, pg_sys::BOOLOID]),
            lastval: member_function(c"seq_lastval", &[]),
            identity: member_function(c"seq_identity", &[regclass]),
            copy_nextval: member_function(c"seq_copy_nextval", &[regclass]),
            copy_identity: member_function(c"seq_copy_identity", &[regclass]),
            drawn: [pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID]
                .map(|t| member_function(c"seq_drawn", &[t])),
        };
        if [
            fns.nextval,
            fns.currval,
            fns.setval,
            fns.setval3,
            fns.lastval,
        ]
        .iter()
        .chain(&fns.drawn)
        .any(|f| *f == pg_sys::Oid::INVALID)
        {
            return absent();
        }
        TABLE.with(|t| t.set(table));
        let (word, copied) = match shared::word() {
            Some(_) => {
                let (w, seqs) = shared::copy();
                (Some(w), seqs)
            }
            None => (None, None),
        };
        let from_list = copied.is_none();
        let list = match copied {
            Some(seqs) => seqs,
            None => match read_list(table, true) {
                Some(list) => list,
                None => return held_up(),
            },
        };
        UNREADABLE.with(|u| u.set(false));
        // A sequence that is gone without a DROP (a temporary one at the
        // end of its session) leaves its OID: ignore anything that is not
        // a sequence now.
        let adopted: HashSet<pg_sys::Oid> = list
            .into_iter()
            .filter(|&seq| {
                pg_sys::get_rel_relkind(seq) == pg_sys::RELKIND_SEQUENCE as std::ffi::c_char
            })
            .collect();
        let mut copied_at = word;
        // A transaction that has written anything may have changed the
        // list, and its read shows its own changes: it publishes nothing,
        // and keeps its read until the word moves, as after a publish
        // (its own later adoptions count through `shared::adopting`). (It
        // published them, and after a rollback the server's table held a
        // list that never was: an adopted sequence was not, and its DROP
        // left its OID on the list; the red-team review of 9f88041, F1.
        // Reading again at every call instead cost 35 us per nextval()
        // with 500 adopted sequences: the review of 2e158fd, F1.)
        let wrote = pg_sys::GetTopTransactionIdIfAny() != pg_sys::InvalidTransactionId;
        if from_list && !wrote {
            if let Some(w) = word {
                let seqs: Vec<pg_sys::Oid> = adopted.iter().copied().collect();
                copied_at = match shared::publish(w, &seqs) {
                    Published::Yes => shared::word(),
                    // A change came in meanwhile: this copy is of the list
                    // as this backend read it; the next statement takes
                    // the table's (or reads again).
                    Published::Changed => None,
                    // It does not fit: this backend keeps what it read
                    // until the word moves (a change), and reads no more
                    // per statement (the red-team review's F3).
                    Published::Unfit => shared::word(),
                };
            }
        }
        COPIED_AT.with(|c| c.set(copied_at));
        LAST_SWAPS.with(|l| l.set(if adopted.is_empty() { Fns::NONE } else { fns }));
        EVER_READ.with(|e| e.set(true));
        if SKIPPED.with(|k| k.replace(false)) {
            // Plans made while the list could not be read: plan them again.
            pg_sys::ResetPlanCache();
        }
        KNOWN.with(|k| *k.borrow_mut() = Known::Loaded { adopted, fns });
    }
}

/// The OIDs in the list `table`, read with a fresh snapshot under a lock
/// taken without queueing and let go at once: a transaction that planned
/// a statement does not hold the list to its end (an exclusive lock
/// queued behind it would hold up every new session of the database).
/// When the lock is not free: `None` at once if `may_skip` (the caller
/// goes on with what it read before), else 55P03 after trying for
/// [`LIST_LOCK_WAIT_MS`].
///
/// # Safety
/// In a transaction, not in parallel mode; `table` is the list.
pub(super) unsafe fn read_list(table: pg_sys::Oid, may_skip: bool) -> Option<Vec<pg_sys::Oid>> {
    // SAFETY: the list's table scanned under its lock with a registered
    // snapshot; its rows' first column is a NOT NULL oid.
    unsafe {
        if !lock_without_queueing(&[table], if may_skip { 0 } else { LIST_LOCK_WAIT_MS }) {
            if may_skip {
                return None;
            }
            super::errors::adopt_list_locked(Some(LIST_LOCK_WAIT_MS));
        }
        let rel = pg_sys::table_open(table, pg_sys::NoLock as _);
        let snapshot = pg_sys::RegisterSnapshot(pg_sys::GetLatestSnapshot());
        let scan = pg_sys::systable_beginscan(
            rel,
            pg_sys::InvalidOid,
            false,
            snapshot,
            0,
            std::ptr::null_mut(),
        );
        let mut list = Vec::new();
        loop {
            let tup = pg_sys::systable_getnext(scan);
            if tup.is_null() {
                break;
            }
            list.push((*pg_sys::heap_tuple_get_struct::<AdoptedRow>(tup)).seq);
        }
        pg_sys::systable_endscan(scan);
        pg_sys::UnregisterSnapshot(snapshot);
        pg_sys::table_close(rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        Some(list)
    }
}

/// Read the list if this backend does not know it, or the shared
/// table's copy moved since this backend took its own (see [`load`]).
fn read_if_unknown() {
    let stale = KNOWN.with(|k| match &*k.borrow() {
        Known::Unknown => true,
        Known::Absent => false,
        Known::Loaded { .. } => {
            let now = shared::word();
            now.is_some() && now != COPIED_AT.with(|c| c.get())
        }
    });
    if stale {
        load();
    }
}

/// What this backend knows of its database, asking nothing of
/// PostgreSQL: `Some(false)` without the extension (as [`active`] answers
/// then: no swaps), `Some(true)` with its list read, `None` not yet (the
/// next [`active`] reads it).
pub(super) fn known() -> Option<bool> {
    KNOWN.with(|k| match *k.borrow() {
        Known::Absent => Some(false),
        Known::Loaded { .. } => Some(true),
        Known::Unknown => None,
    })
}

/// The swaps to make in this database's statements, if any.
pub(super) fn active() -> Option<Fns> {
    read_if_unknown();
    let adopting = super::shared::adopting_any();
    KNOWN.with(|k| match &*k.borrow() {
        Known::Loaded { adopted, fns, .. } if !adopted.is_empty() || adopting => Some(*fns),
        Known::Unknown => {
            let last = LAST_SWAPS.with(|l| l.get());
            (last.nextval != pg_sys::Oid::INVALID).then_some(last)
        }
        _ => None,
    })
}

/// Whether `seq` is adopted in this database.
///
/// This transaction's own adoptions count before it commits (every other
/// backend learns of them at the commit): a table made and filled in one
/// transaction with the switch on got the fence's 2200H, and a `RESTART`,
/// `CYCLE` or `SET UNLOGGED` there passed unchecked (the red-team review
/// of 2337972, F1).
pub(super) fn is_adopted(seq: pg_sys::Oid) -> bool {
    read_if_unknown();
    super::shared::adopting(seq)
        || KNOWN.with(
            |k| matches!(&*k.borrow(), Known::Loaded { adopted, .. } if adopted.contains(&seq)),
        )
}

/// Whether this database has adopted sequences (this transaction's own
/// adoptions included), as [`active`] answers.
pub(super) fn any_adopted() -> bool {
    active().is_some()
}

/// Whether `seq` is adopted, as this backend last read the list (no read:
/// for the planner's walk, after [`active`]).
pub(super) fn is_adopted_known(seq: pg_sys::Oid) -> bool {
    super::shared::adopting(seq)
        || KNOWN.with(
            |k| matches!(&*k.borrow(), Known::Loaded { adopted, .. } if adopted.contains(&seq)),
        )
}

/// Whether this backend last read a list with any adopted sequence in it
/// (no read: for the error path, `super::fence_hint`).
pub(super) fn any_known() -> bool {
    KNOWN
        .try_with(|k| {
            k.try_borrow()
                .is_ok_and(|k| matches!(&*k, Known::Loaded { adopted, .. } if !adopted.is_empty()))
        })
        .unwrap_or(false)
}

/// Whether this backend never read the list and its last try was held up
/// by a lock (see [`UNREADABLE`]).
pub(super) fn unreadable() -> bool {
    UNREADABLE.with(|u| u.get())
}

/// 55P03: the statement calls one of the four and the list could not be
/// read (see [`UNREADABLE`]).
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn refuse_unreadable() {
    super::errors::adopt_list_locked(None);
}
