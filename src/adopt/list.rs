//! Which sequences of this database are adopted, as this backend knows
//! them: read once per backend from
//! `snowflake_id_internal.snowflake_adopted` (the extension's own table
//! and functions only, checked by their extension membership, with a
//! fresh snapshot and no SQL), and read again after an invalidation of
//! that table, which every change of a row sends
//! (`snowflake_id_internal.adopt_changed()`); the same invalidation drops
//! every cached plan of the backend, so no plan made before an adoption
//! outlives it. [`super::planner`] and [`super::utility`] ask it which
//! swaps to make ([`active`]), [`super::calls`] whether a sequence is
//! adopted ([`is_adopted`]).

use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;

/// The functions that take the built-ins' places.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) struct Fns {
    pub(super) nextval: pg_sys::Oid,
    pub(super) currval: pg_sys::Oid,
    pub(super) setval: pg_sys::Oid,
    pub(super) setval3: pg_sys::Oid,
    pub(super) lastval: pg_sys::Oid,
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

#[pg_guard]
unsafe extern "C-unwind" fn relcache_changed(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
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

/// How long a backend tries for the locks it reads the list under
/// (without queueing) before it goes on without the list (see
/// [`held_up`]): a role that holds a lock while someone queues for an
/// exclusive one (an ALTER EXTENSION) holds up a read this long at most.
const LIST_LOCK_WAIT_MS: u64 = 1_000;

/// The first column of a row of `snowflake_id_internal.snowflake_adopted`
/// (`seq regclass`, NOT NULL, fixed-width).
#[repr(C)]
struct AdoptedRow {
    seq: pg_sys::Oid,
}

/// The function `name(args)` of schema `ns` if it is a member of
/// extension `ext`, else `InvalidOid`.
///
/// # Safety
/// In a transaction.
unsafe fn member_function(
    ext: pg_sys::Oid,
    ns: pg_sys::Oid,
    name: &std::ffi::CStr,
    args: &[pg_sys::Oid],
) -> pg_sys::Oid {
    // SAFETY: a syscache look-up by name, exact argument types and schema
    // (no search path, no defaults, no privilege check: this runs for
    // every role), released at once; then its extension membership.
    unsafe {
        let types = pg_sys::buildoidvector(args.as_ptr(), args.len() as _);
        let tup = pg_sys::SearchSysCache3(
            pg_sys::SysCacheIdentifier::PROCNAMEARGSNSP as _,
            pg_sys::Datum::from(name.as_ptr()),
            pg_sys::Datum::from(types),
            pg_sys::Datum::from(ns),
        );
        pg_sys::pfree(types.cast());
        if tup.is_null() {
            return pg_sys::Oid::INVALID;
        }
        let f = (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_proc>(tup)).oid;
        pg_sys::ReleaseSysCache(tup);
        if pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, f) != ext {
            return pg_sys::Oid::INVALID;
        }
        f
    }
}

/// pg_extension and pg_depend.
const EXTENSION_RELATION: pg_sys::Oid = pg_sys::ExtensionRelationId;
const DEPEND_RELATION: pg_sys::Oid = pg_sys::Oid::from_u32(2608);

/// Take ACCESS SHARE on each of `rels` without queueing behind anyone,
/// trying for at most [`LIST_LOCK_WAIT_MS`]; false (and none held) if not.
///
/// # Safety
/// In a transaction.
unsafe fn lock_without_queueing(rels: &[pg_sys::Oid]) -> bool {
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
            if waited >= LIST_LOCK_WAIT_MS {
                return false;
            }
            pgrx::check_for_interrupts!();
            pg_sys::pg_usleep(10_000);
            waited += 10;
        }
    }
}

/// Releases ACCESS SHARE on the relations when dropped (taken by
/// [`lock_without_queueing`]).
struct UnlockOnDrop(&'static [pg_sys::Oid]);
impl Drop for UnlockOnDrop {
    fn drop(&mut self) {
        for r in self.0 {
            // SAFETY: a lock this backend took.
            unsafe { pg_sys::UnlockRelationOid(*r, pg_sys::AccessShareLock as pg_sys::LOCKMODE) };
        }
    }
}

/// The list could not be read for a lock: a backend that read it before
/// goes on with what it read (see [`LAST_SWAPS`]); one that never did
/// refuses the statements that call the four ([`UNREADABLE`]).
fn held_up() {
    SKIPPED.with(|k| k.set(true));
    if !EVER_READ.with(|e| e.get()) {
        UNREADABLE.with(|u| u.set(true));
    }
}

/// Read the list into [`KNOWN`]: only the extension's own objects (a
/// schema, table or function of that name that is not a member of the
/// installed extension is ignored: any role with CREATE on a database
/// can make them), with a fresh snapshot (a session in REPEATABLE READ
/// sees an adoption committed after its snapshot), and no SQL.
fn load() {
    // SAFETY: catalog look-ups, in a transaction; the list's table is
    // scanned under its lock with a registered snapshot, and its rows'
    // first column is a NOT NULL oid.
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
        // The schema first, from the syscache that planning reads anyway:
        // a database without it has no list, and its statements touch no
        // catalog they would not touch without the extension.
        let ns = pg_sys::get_namespace_oid(c"snowflake_id_internal".as_ptr(), true);
        if ns == pg_sys::Oid::INVALID {
            return absent();
        }
        // The extension and its members: pg_extension and pg_depend, which
        // ordinary planning does not read. A lock queued on either (CREATE
        // RULE takes one before it checks anything) must not hold up every
        // statement: take them without queueing, for at most a second.
        if !lock_without_queueing(&[EXTENSION_RELATION, DEPEND_RELATION]) {
            return held_up();
        }
        let _unlock = UnlockOnDrop(&[EXTENSION_RELATION, DEPEND_RELATION]);
        let ext = pg_sys::get_extension_oid(c"snowflake_id".as_ptr(), true);
        if ext == pg_sys::Oid::INVALID
            || pg_sys::getExtensionOfObject(pg_sys::NamespaceRelationId, ns) != ext
        {
            return absent();
        }
        let table = pg_sys::get_relname_relid(c"snowflake_adopted".as_ptr(), ns);
        if table == pg_sys::Oid::INVALID
            || pg_sys::getExtensionOfObject(pg_sys::RelationRelationId, table) != ext
        {
            return absent();
        }
        let regclass = pg_sys::REGCLASSOID;
        let fns = Fns {
            nextval: member_function(ext, ns, c"seq_nextval", &[regclass]),
            currval: member_function(ext, ns, c"seq_currval", &[regclass]),
            setval: member_function(ext, ns, c"seq_setval", &[regclass, pg_sys::INT8OID]),
            setval3: member_function(
                ext,
                ns,
                c"seq_setval",
                &[regclass, pg_sys::INT8OID, pg_sys::BOOLOID],
            ),
            lastval: member_function(ext, ns, c"seq_lastval", &[]),
            drawn: [pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID]
                .map(|t| member_function(ext, ns, c"seq_drawn", &[t])),
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
        let mut adopted = HashSet::new();
        let Some(list) = read_list(table, true) else {
            return held_up();
        };
        UNREADABLE.with(|u| u.set(false));
        for seq in list {
            // A sequence that is gone without a DROP (a temporary one at
            // the end of its session) leaves its OID: ignore anything that
            // is not a sequence now.
            if pg_sys::get_rel_relkind(seq) == pg_sys::RELKIND_SEQUENCE as std::ffi::c_char {
                adopted.insert(seq);
            }
        }
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
/// When the lock stays unavailable for [`LIST_LOCK_WAIT_MS`]: `None` if
/// `may_skip` (the caller goes on with what it read before), else 55P03.
///
/// # Safety
/// In a transaction, not in parallel mode; `table` is the list.
pub(super) unsafe fn read_list(table: pg_sys::Oid, may_skip: bool) -> Option<Vec<pg_sys::Oid>> {
    // SAFETY: the list's table scanned under its lock with a registered
    // snapshot; its rows' first column is a NOT NULL oid.
    unsafe {
        if !lock_without_queueing(&[table]) {
            if may_skip {
                return None;
            }
            crate::errors::adopt_list_locked(LIST_LOCK_WAIT_MS);
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

/// Read the list if this backend does not know it (see [`load`]).
fn read_if_unknown() {
    if KNOWN.with(|k| matches!(&*k.borrow(), Known::Unknown)) {
        load();
    }
}

/// The swaps to make in this database's statements, if any.
pub(super) fn active() -> Option<Fns> {
    read_if_unknown();
    KNOWN.with(|k| match &*k.borrow() {
        Known::Loaded { adopted, fns, .. } if !adopted.is_empty() => Some(*fns),
        Known::Unknown => {
            let last = LAST_SWAPS.with(|l| l.get());
            (last.nextval != pg_sys::Oid::INVALID).then_some(last)
        }
        _ => None,
    })
}

/// Whether `seq` is adopted in this database.
pub(super) fn is_adopted(seq: pg_sys::Oid) -> bool {
    read_if_unknown();
    KNOWN.with(|k| matches!(&*k.borrow(), Known::Loaded { adopted, .. } if adopted.contains(&seq)))
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
    crate::errors::adopt_list_locked(LIST_LOCK_WAIT_MS);
}
