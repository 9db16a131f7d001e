//! The adopted sequences of every database, in shared memory (issue 63):
//! [`snowflake_id_core::adopted::AdoptedTable`], its writers' LWLock, and
//! the changes a transaction makes to its database's list, applied at
//! its commit.
//!
//! A backend learns whether a sequence is adopted from here, never from a
//! catalog or a table that another role can queue a lock on: the list
//! table is read once per database after a start (by [`super::list`]),
//! and each transaction that changes it (its row triggers call
//! `snowflake_id_internal.adopt_changed_row()`) applies its changes here
//! when it commits. A `TRUNCATE` of the list, a dropped extension or two
//! commits at once unload the database instead; it is read again by the
//! next backend that needs it. A database dropped or made (`CREATE
//! DATABASE … OID` may reuse a dropped one's OID) leaves the table once
//! the statement is done. A database over its share of the table is
//! marked unfit, and its backends read the list each on their own, once
//! per change.
//!
//! Not used in recovery: a standby's backends read the list each on
//! their own (its changes arrive by WAL, with no trigger to apply them).

use crate::mint::shmem;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PgLwLock, PgSharedMemoryInitialization};
use snowflake_id_core::adopted::{AdoptedTable, Change, Published, Word};
use std::cell::{RefCell, UnsafeCell};
use std::ffi::CStr;

/// How many databases the table follows (192 KB); a database beyond them
/// is never loaded, and its backends read the list each on their own,
/// once per change.
pub const DATABASES: usize = 8192;
/// How many adopted sequences the whole server's table holds (4 MB: each
/// entry is chained to its database's others), at
/// most a quarter of them of one database; a database whose sequences
/// do not fit is not loaded, as above.
pub const SEQUENCES: usize = 262_144;

type Table = AdoptedTable<DATABASES, SEQUENCES>;

static TABLE: SharedTable = SharedTable::new(c"snowflake_id adopted sequences");

/// The table in shared memory, made there zero-filled (which is its
/// `Default`: every slot free): 4 MB, too large to build on a stack and
/// move there, as `PgAtomic` does (a debug build's postmaster overflowed
/// its stack doing so).
struct SharedTable {
    name: &'static CStr,
    inner: UnsafeCell<*const Table>,
}

// SAFETY: `inner` is written once per process, in the shared-memory
// start-up hook, before any backend code runs; the table it points to is
// made of atomics.
unsafe impl Sync for SharedTable {}

impl SharedTable {
    const fn new(name: &'static CStr) -> Self {
        Self {
            name,
            inner: UnsafeCell::new(std::ptr::null()),
        }
    }

    fn get(&self) -> &'static Table {
        // SAFETY: see `Sync`; set at start-up, before any caller (callers
        // check `usable()`, which needs the library preloaded).
        let p = unsafe { *self.inner.get() };
        assert!(
            !p.is_null(),
            "snowflake_id adopted sequences not initialised"
        );
        // SAFETY: shared memory for the life of the server.
        unsafe { &*p }
    }
}

impl PgSharedMemoryInitialization for SharedTable {
    type Value = u8;

    unsafe fn on_shmem_request(&'static self) {
        // SAFETY: called from the shared-memory request hook.
        unsafe { pg_sys::RequestAddinShmemSpace(std::mem::size_of::<Table>()) };
    }

    unsafe fn on_shmem_startup(&'static self, _: u8) {
        // SAFETY: called from the shared-memory start-up hook; an all-zero
        // table is a valid, empty one (atomics of 0: free slots).
        unsafe {
            let size = std::mem::size_of::<Table>();
            let p = shmem::attach_named(self.name, size, |p| std::ptr::write_bytes(p, 0, size));
            assert!(
                p.cast::<Table>().is_aligned(),
                "shared memory is not aligned"
            );
            *self.inner.get() = p.cast::<Table>();
        }
    }
}

/// Serialises the table's writers, and a copy of a database's set
/// against them. Taken only by this module, for the microseconds a
/// change or a copy takes: no role can queue on it.
static WRITERS: PgLwLock<u32> =
    // SAFETY: the name is unique to this extension.
    unsafe { PgLwLock::new(c"snowflake_id adopted sequences writers") };

/// Request the table: in the postmaster, at preload.
pub(super) fn init() {
    pg_shmem_init!(TABLE);
    pg_shmem_init!(WRITERS);
    // SAFETY: callbacks registered once, in the postmaster, before any
    // backend exists; every backend inherits them.
    unsafe {
        pg_sys::RegisterXactCallback(Some(on_xact), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(on_subxact), std::ptr::null_mut());
        PREV_ACCESS = pg_sys::object_access_hook;
        pg_sys::object_access_hook = Some(on_access);
    }
}

/// Whether the table is in use here: the library is preloaded and the
/// server is not in recovery.
fn usable() -> bool {
    shmem::is_preloaded() && !shmem::in_recovery()
}

/// The word of this database (lock-free), or `None` where the table is
/// not in use.
pub(super) fn word() -> Option<Word> {
    // SAFETY: MyDatabaseId is set in a backend of a database.
    usable().then(|| TABLE.get().word(unsafe { pg_sys::MyDatabaseId }.to_u32()))
}

/// This database's word and, where it is loaded, its adopted sequences.
pub(super) fn copy() -> (Word, Option<Vec<pg_sys::Oid>>) {
    let _shared = WRITERS.share();
    // SAFETY: as in `word`.
    let (w, seqs) = TABLE
        .get()
        .seqs_of(unsafe { pg_sys::MyDatabaseId }.to_u32());
    (
        w,
        seqs.map(|s| s.into_iter().map(pg_sys::Oid::from).collect()),
    )
}

/// Whether any of `seqs` may be in this database's list: false only where
/// the table holds the database's set (committed adoptions, applied at
/// their commit, before their locks go) and none of them is in it, nor
/// adopted by this transaction. No snapshot: a `REPEATABLE READ`
/// transaction sees adoptions committed after it began.
pub(super) fn may_list(seqs: &[pg_sys::Oid]) -> bool {
    if !usable() {
        return true;
    }
    match copy().1 {
        Some(set) => seqs.iter().any(|s| set.contains(s) || adopting(*s)),
        None => true,
    }
}

/// Make `seqs`, read from the list after this backend saw `seen`, this
/// database's set (unless a change came in since, or it does not fit).
pub(super) fn publish(seen: Word, seqs: &[pg_sys::Oid]) -> Published {
    let seqs: Vec<u32> = seqs.iter().map(|s| s.to_u32()).collect();
    let _exclusive = WRITERS.exclusive();
    // SAFETY: as in `word`.
    TABLE
        .get()
        .publish(unsafe { pg_sys::MyDatabaseId }.to_u32(), seen, &seqs)
}

/// Database `db` was dropped, or made (perhaps with a dropped one's
/// OID): its entry goes.
pub(super) fn forget_database(db: u32) {
    if usable() {
        let _exclusive = WRITERS.exclusive();
        TABLE.get().drop_database(db);
    }
}

/// A change of this transaction, made at subtransaction level `level`,
/// to the list of database `db`; `seen` is the database's word read at
/// `PRE_COMMIT`.
struct Pending {
    level: i32,
    db: u32,
    change: Change,
}

thread_local! {
    static PENDING: RefCell<Vec<Pending>> = const { RefCell::new(Vec::new()) };
    /// The words read at `PRE_COMMIT`, per database with changes.
    static SEEN: RefCell<Vec<(u32, Word)>> = const { RefCell::new(Vec::new()) };
}

/// Record a change of this transaction to database `db`'s list, applied
/// at its commit.
pub(super) fn note(db: pg_sys::Oid, change: Change) {
    // Without preload there is no table, and no callback to apply it.
    if !shmem::is_preloaded() {
        return;
    }
    // SAFETY: the current subtransaction's nesting level.
    let level = unsafe { pg_sys::GetCurrentTransactionNestLevel() };
    PENDING.with(|p| {
        p.borrow_mut().push(Pending {
            level,
            db: db.to_u32(),
            change,
        })
    });
}

/// Whether this transaction has adopted sequence `seq` of this database,
/// not yet committed (its last change to the list adds it): the guards of
/// [`super::utility`] hold for it as for a committed adoption (the
/// red-team review of 2337972, F1: in the adopting transaction `CYCLE`,
/// `SET UNLOGGED` and a `RESTART` passed unchecked).
pub(super) fn adopting(seq: pg_sys::Oid) -> bool {
    // SAFETY: in a backend of a database.
    let db = unsafe { pg_sys::MyDatabaseId }.to_u32();
    let seq = seq.to_u32();
    PENDING.with(|p| {
        p.borrow()
            .iter()
            .filter(|c| c.db == db)
            .fold(false, |now, c| match c.change {
                Change::Add(s) if s == seq => true,
                Change::Remove(s) if s == seq => false,
                Change::Forget => false,
                _ => now,
            })
    })
}

/// Whether this transaction has adopted any sequence of this database,
/// not yet committed.
pub(super) fn adopting_any() -> bool {
    // SAFETY: in a backend of a database.
    let db = unsafe { pg_sys::MyDatabaseId }.to_u32();
    PENDING.with(|p| {
        p.borrow()
            .iter()
            .any(|c| c.db == db && matches!(c.change, Change::Add(_)))
    })
}

#[pg_guard]
unsafe extern "C-unwind" fn on_subxact(
    event: pg_sys::SubXactEvent::Type,
    _mysub: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    // SAFETY: the nesting level of the subtransaction ending.
    let level = unsafe { pg_sys::GetCurrentTransactionNestLevel() };
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        match event {
            pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB => p.retain(|c| c.level < level),
            pg_sys::SubXactEvent::SUBXACT_EVENT_COMMIT_SUB => {
                for c in p.iter_mut().filter(|c| c.level >= level) {
                    c.level = level - 1;
                }
            }
            _ => {}
        }
    });
}

#[pg_guard]
unsafe extern "C-unwind" fn on_xact(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    if PENDING.with(|p| p.borrow().is_empty()) {
        return;
    }
    match event {
        XACT_EVENT_PRE_COMMIT | XACT_EVENT_PARALLEL_PRE_COMMIT => {
            // The words just before the commit becomes visible.
            let table = TABLE.get();
            let seen = PENDING.with(|p| {
                let mut dbs: Vec<u32> = p.borrow().iter().map(|c| c.db).collect();
                dbs.sort_unstable();
                dbs.dedup();
                dbs.into_iter().map(|d| (d, table.word(d))).collect()
            });
            SEEN.with(|s| *s.borrow_mut() = seen);
        }
        XACT_EVENT_PRE_PREPARE => {
            // Its changes would commit in another session, which would not
            // know them: unload the database at once instead (a loader
            // that reads before COMMIT PREPARED publishes the list as it
            // was; nothing in shared memory can say when the commit
            // comes). Refuse, as PostgreSQL refuses for temporary objects.
            PENDING.with(|p| p.borrow_mut().clear());
            super::errors::adopt_prepare();
        }
        XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT => {
            let pending = PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()));
            let seen = SEEN.with(|s| std::mem::take(&mut *s.borrow_mut()));
            if !usable() {
                return;
            }
            let table = TABLE.get();
            let _exclusive = WRITERS.exclusive();
            for (db, w) in seen {
                let changes: Vec<Change> = pending
                    .iter()
                    .filter(|c| c.db == db)
                    .map(|c| c.change)
                    .collect();
                table.apply(db, w, &changes);
            }
        }
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT | XACT_EVENT_PREPARE => {
            PENDING.with(|p| p.borrow_mut().clear());
            SEEN.with(|s| s.borrow_mut().clear());
        }
        _ => {}
    }
}

static mut PREV_ACCESS: pg_sys::object_access_hook_type = None;

/// A dropped extension unloads its database at commit (its list goes
/// without a row trigger). (A dropped or new database leaves the table
/// once the statement is done: `super::utility`.)
#[pg_guard]
unsafe extern "C-unwind" fn on_access(
    kind: pg_sys::ObjectAccessType::Type,
    class: pg_sys::Oid,
    object: pg_sys::Oid,
    sub: i32,
    arg: *mut std::ffi::c_void,
) {
    // SAFETY: the previous hook with PostgreSQL's arguments; then a
    // syscache look-up in a backend.
    unsafe {
        if let Some(prev) = PREV_ACCESS {
            prev(kind, class, object, sub, arg);
        }
        if kind != pg_sys::ObjectAccessType::OAT_DROP || !usable() {
            return;
        }
        if class == pg_sys::ExtensionRelationId
            && object == pg_sys::get_extension_oid(c"snowflake_id".as_ptr(), true)
        {
            note(pg_sys::MyDatabaseId, Change::Forget);
            super::labels::forget();
        }
    }
}

/// `snowflake_id_internal.adopt_changed_row(old, new)`: the list's row
/// triggers report each row's change (`old` the sequence of a deleted or
/// updated row, `new` of an inserted or updated one; both NULL for a
/// `TRUNCATE`), applied to the table at commit. Also makes every backend
/// of the database plan again once the caller commits (a relcache
/// invalidation of the list). Not for direct use (revoked from PUBLIC).
#[pg_extern(sql = false)]
pub fn adopt_changed_row(old: Option<pg_sys::Oid>, new: Option<pg_sys::Oid>) {
    // SAFETY: in a backend of a database.
    let db = unsafe { pg_sys::MyDatabaseId };
    match (old, new) {
        (None, None) => note(db, Change::Forget),
        (old, new) => {
            if let Some(o) = old.filter(|o| Some(*o) != new) {
                note(db, Change::Remove(o.to_u32()));
            }
            if let Some(n) = new {
                note(db, Change::Add(n.to_u32()));
            }
        }
    }
    super::adopt_changed(false);
}
