//! This database's row of the high-water table, read and raised from C,
//! by the backend that mints: no SQL, no trigger, no function of any
//! role runs, and no transaction commits.
//!
//! A raise is an in-place write of the row's `mark_ms` (and `written_at`),
//! WAL-logged as a generic record (`GenericXLogFinish`) and flushed
//! before any ID it covers is returned, as `nextval()` writes a
//! sequence's page: crash recovery, base backups, standbys, `pg_upgrade`
//! and `pg_dump` see it like any other content of the table, whether the
//! caller's transaction commits or not. The row itself is inserted
//! transactionally, by `CREATE EXTENSION` or by the first mint of a new
//! configuration (worker id or layout) here.

use crate::errors;
use pgrx::pg_sys;
use std::time::{Duration, Instant};

/// This server's configuration, as the table's key columns.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Key {
    pub worker_id: i32,
    pub epoch_ms: i64,
    pub worker_bits: i32,
    pub sequence_bits: i32,
}

/// Where a row's columns lie in its data: every column fixed-width and
/// NOT NULL, so the offsets follow from their alignment.
const OFF_WORKER: usize = 0;
const OFF_EPOCH: usize = 8;
const OFF_WORKER_BITS: usize = 16;
const OFF_SEQUENCE_BITS: usize = 20;
const OFF_MARK: usize = 24;
const OFF_WRITTEN: usize = 32;
const ROW_LEN: usize = 40;
/// The column types, in order: what the offsets assume.
const TYPES: [pg_sys::Oid; 6] = [
    pg_sys::INT4OID,
    pg_sys::INT8OID,
    pg_sys::INT4OID,
    pg_sys::INT4OID,
    pg_sys::INT8OID,
    pg_sys::TIMESTAMPTZOID,
];

/// How long a raise waits for the table's lock (only a superuser's DDL
/// or `VACUUM FULL` can hold one that conflicts, or a lock request queued
/// by the database's owner) before the call fails (55000) in this
/// database alone.
pub const LOCK_WAIT: Duration = Duration::from_secs(1);

/// The catalogs [`table_oid`] reads on a syscache miss, locked first
/// without waiting (for at most [`LOCK_WAIT`]): a lock request queued on
/// one of them (a `CREATE RULE` on a catalog takes its lock before it
/// checks rights) cannot hold a backend here for longer. (It also reads
/// the owners' pg_authid rows, as every connection does at log-in.)
const CATALOGS: [pg_sys::Oid; 2] = [pg_sys::NamespaceRelationId, pg_sys::RelationRelationId];

thread_local! {
    /// This backend's answer of [`table_oid`] (its database never
    /// changes); forgotten when the relation's cache entry is invalidated
    /// (a DROP, an ALTER), so that the lookup reads no catalog at all in
    /// the steady state.
    static CACHED: std::cell::Cell<Option<Option<pg_sys::Oid>>> = const { std::cell::Cell::new(None) };
    static CALLBACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn forget_table(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    let forget = CACHED.with(|c| match c.get() {
        Some(Some(oid)) => relid == pg_sys::InvalidOid || relid == oid,
        _ => true,
    });
    if forget {
        CACHED.with(|c| c.set(None));
    }
}

/// A catalog [`cached_table_oid`] needs stayed locked for [`LOCK_WAIT`].
#[derive(Debug)]
pub struct CatalogLocked;

/// Like [`table_oid`], from this backend's cache where it has the
/// answer.
pub fn cached_table_oid() -> Result<Option<pg_sys::Oid>, CatalogLocked> {
    if let Some(known) = CACHED.with(|c| c.get()) {
        return Ok(known);
    }
    if !CALLBACK.with(|c| c.replace(true)) {
        // SAFETY: registering a relcache invalidation callback for the
        // life of this backend.
        unsafe {
            pg_sys::CacheRegisterRelcacheCallback(Some(forget_table), pg_sys::Datum::from(0))
        };
    }
    let mode = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
    let start = Instant::now();
    let mut held = vec![];
    for cat in CATALOGS {
        if !lock_within(cat, mode, start) {
            for c in held {
                // SAFETY: releasing what was taken just above.
                unsafe { pg_sys::UnlockRelationOid(c, mode) };
            }
            return Err(CatalogLocked);
        }
        held.push(cat);
    }
    let oid = table_oid();
    for c in held {
        // SAFETY: releasing what was taken just above.
        unsafe { pg_sys::UnlockRelationOid(c, mode) };
    }
    // Only an answer that names a table is kept: a missing one is looked
    // up again (CREATE EXTENSION sends no invalidation this backend's
    // cache would hear of).
    if oid.is_some() {
        CACHED.with(|c| c.set(Some(oid)));
    }
    Ok(oid)
}

/// Run `f` with `lock_timeout` at [`LOCK_WAIT`] for this transaction's
/// current nesting level only: opening the table can rebuild its cache
/// entry, which locks catalogs and waits in their queues, where a lock
/// request queued by any role that can connect here would otherwise hold
/// the call for as long as she likes (then 55P03 here).
pub fn with_lock_timeout<T>(f: impl FnOnce() -> T) -> T {
    let ms = std::ffi::CString::new(LOCK_WAIT.as_millis().to_string()).expect("digits");
    // SAFETY: PostgreSQL's way to set a setting for a stretch of code, as
    // a function's SET clause does: a new nesting level, the value saved
    // in it, and the level popped afterwards (an ERROR in between pops it
    // with the transaction's abort).
    unsafe {
        let nest = pg_sys::NewGUCNestLevel();
        pg_sys::set_config_option(
            c"lock_timeout".as_ptr(),
            ms.as_ptr(),
            pg_sys::GucContext::PGC_SUSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
        let out = f();
        pg_sys::AtEOXact_GUC(true, nest);
        out
    }
}

/// Take `oid`'s lock in `mode` without ever waiting in its queue, trying
/// again every 5 ms (interruptibly) until [`LOCK_WAIT`] after `start`.
fn lock_within(oid: pg_sys::Oid, mode: pg_sys::LOCKMODE, start: Instant) -> bool {
    // SAFETY: conditional lock requests and a latch wait in a backend.
    unsafe {
        while !pg_sys::ConditionalLockRelationOid(oid, mode) {
            if start.elapsed() > LOCK_WAIT {
                return false;
            }
            pg_sys::WaitLatch(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
                5,
                pg_sys::PG_WAIT_EXTENSION,
            );
            pg_sys::ResetLatch(pg_sys::MyLatch);
            pgrx::check_for_interrupts!();
        }
    }
    true
}

/// The extension's table in this database, found through the syscache
/// (`crate::catalog`: never a name on `search_path`, and neither
/// `pg_extension` nor `pg_depend`, on which any role can queue a lock),
/// or `None` where the extension, or a version of it with the table, is
/// not installed here.
pub fn table_oid() -> Option<pg_sys::Oid> {
    crate::catalog::own_relation(c"snowflake_high_water").map(|(_, rel)| rel)
}

/// The table, opened under `mode`, or why not.
pub struct Table {
    rel: pg_sys::Relation,
    mode: pg_sys::LOCKMODE,
}

pub enum Open {
    Opened(Table),
    /// No table of the extension here.
    Missing,
    /// Its lock was not granted within [`LOCK_WAIT`].
    Locked,
}

impl Table {
    /// Open the table under `mode`, waiting at most [`LOCK_WAIT`]
    /// (interruptibly) for the lock.
    pub fn open(mode: u32) -> Open {
        match Self::open_once(mode) {
            // A cached OID of a table dropped since: look it up again (the
            // extension may have been created anew).
            Open::Missing if CACHED.with(|c| c.get()).is_none() => Self::open_once(mode),
            other => other,
        }
    }

    fn open_once(mode: u32) -> Open {
        let oid = match cached_table_oid() {
            Ok(Some(oid)) => oid,
            Ok(None) => return Open::Missing,
            Err(CatalogLocked) => return Open::Locked,
        };
        let mode = mode as pg_sys::LOCKMODE;
        if !lock_within(oid, mode, Instant::now()) {
            return Open::Locked;
        }
        // SAFETY: the relation is opened only once its lock is held, and
        // only if it still exists (a stale cached OID is dropped).
        unsafe {
            let rel = pg_sys::try_table_open(oid, pg_sys::NoLock as _);
            if rel.is_null() {
                pg_sys::UnlockRelationOid(oid, mode);
                CACHED.with(|c| c.set(None));
                return Open::Missing;
            }
            let t = Table { rel, mode };
            if !t.shape_is_known() {
                drop(t);
                errors::high_water_table_altered();
            }
            Open::Opened(t)
        }
    }

    /// Whether the table still has the columns the offsets assume (a
    /// superuser could alter it).
    fn shape_is_known(&self) -> bool {
        // SAFETY: the relation is open; its tuple descriptor lives as long.
        let desc = unsafe { pgrx::PgTupleDesc::from_pg_unchecked((*self.rel).rd_att) };
        desc.len() == TYPES.len()
            && desc
                .iter()
                .zip(TYPES)
                .all(|(a, t)| !a.attisdropped && a.atttypid == t)
    }

    /// The live row of `key` with the largest mark: its mark and where it
    /// lies. Rows of other configurations are never read as ours.
    pub fn find(&self, key: &Key) -> Option<(i64, pg_sys::ItemPointerData)> {
        self.find_not_own(key, i64::MIN).map(|(m, _, tid)| (m, tid))
    }

    /// Like [`Table::find`], leaving out the rows stamped `own` (this
    /// start's own writes: see [`Table::raise`]): the mark, its stamp,
    /// and where it lies.
    pub fn find_not_own(&self, key: &Key, own: i64) -> Option<(i64, i64, pg_sys::ItemPointerData)> {
        let mut best: Option<(i64, i64, pg_sys::ItemPointerData)> = None;
        self.each(key, |mark, written, tid| {
            if written != own && best.is_none_or(|(m, _, _)| mark > m) {
                best = Some((mark, written, tid));
            }
        });
        best
    }

    /// Every live row of `key`: its mark and where it lies.
    pub fn rows(&self, key: &Key) -> Vec<(i64, pg_sys::ItemPointerData)> {
        let mut out = vec![];
        self.each(key, |mark, _, tid| out.push((mark, tid)));
        out
    }

    /// Call `f` with the mark, the stamp and the place of every live row
    /// of `key`. Rows of other configurations are never read as ours.
    fn each(&self, key: &Key, mut f: impl FnMut(i64, i64, pg_sys::ItemPointerData)) {
        // SAFETY: a heap scan of an open relation under SnapshotSelf
        // (committed rows and this transaction's own, as of now); each
        // tuple's data is read while the scan holds it.
        unsafe {
            let scan = pg_sys::table_beginscan(
                self.rel,
                &raw mut pg_sys::SnapshotSelfData,
                0,
                std::ptr::null_mut(),
            );
            loop {
                let tup = pg_sys::heap_getnext(scan, pg_sys::ScanDirection::ForwardScanDirection);
                if tup.is_null() {
                    break;
                }
                if let Some(data) = row_data((*tup).t_data, (*tup).t_len as usize) {
                    if read_key(data) == *key {
                        f(
                            read_i64(data, OFF_MARK),
                            read_i64(data, OFF_WRITTEN),
                            (*tup).t_self,
                        );
                    }
                }
            }
            pg_sys::table_endscan(scan);
        }
    }

    /// Raise the row at `tid` (of `key`) to `target` in place, never
    /// lowering it, and flush the record. Returns the row's mark
    /// afterwards, or `None` when the row at `tid` is not `key`'s any
    /// more (look again).
    ///
    /// `stamp` goes into `written_at`: the stamp of the start that writes
    /// (`shmem::Tracking::started_at`, random: `starts::start_stamp`), so
    /// that a reader can tell this start's own marks from all others,
    /// whatever the clocks did.
    pub fn raise(
        &self,
        tid: pg_sys::ItemPointerData,
        key: &Key,
        target: i64,
        stamp: i64,
    ) -> Option<i64> {
        self.write(tid, key, target, stamp, false)
    }

    /// Lower the row at `tid` (of `key`) to `target` in place, never
    /// raising it, as [`Table::raise`] writes: a superuser's
    /// `snowflake_discard_high_water()` of a mark held back as far ahead
    /// of the clock, and only that.
    pub fn lower(
        &self,
        tid: pg_sys::ItemPointerData,
        key: &Key,
        target: i64,
        stamp: i64,
    ) -> Option<i64> {
        self.write(tid, key, target, stamp, true)
    }

    fn write(
        &self,
        tid: pg_sys::ItemPointerData,
        key: &Key,
        target: i64,
        stamp: i64,
        lower: bool,
    ) -> Option<i64> {
        let block = ((tid.ip_blkid.bi_hi as u32) << 16) | tid.ip_blkid.bi_lo as u32;
        let offset = tid.ip_posid;
        // SAFETY: the buffer is pinned and locked exclusively while the
        // page is read and changed; the change goes through the generic
        // WAL API (which copies the page, logs the difference and applies
        // it in a critical section); the record is flushed before this
        // returns.
        unsafe {
            let buf = pg_sys::ReadBuffer(self.rel, block);
            pg_sys::LockBuffer(buf, pg_sys::BUFFER_LOCK_EXCLUSIVE as _);
            let page = pg_sys::BufferGetPage(buf);
            let Some(cur) = item_data(page, offset)
                .filter(|d| read_key(*d) == *key)
                .map(|d| read_i64(d, OFF_MARK))
            else {
                pg_sys::UnlockReleaseBuffer(buf);
                return None;
            };
            match row_state(item_header(page, offset).expect("read just above")) {
                RowState::Live => {}
                RowState::Gone => {
                    pg_sys::UnlockReleaseBuffer(buf);
                    return None;
                }
                RowState::Busy => {
                    pg_sys::UnlockReleaseBuffer(buf);
                    errors::high_water_row_busy();
                }
            }
            if (!lower && cur >= target) || (lower && cur <= target) {
                pg_sys::UnlockReleaseBuffer(buf);
                return Some(cur);
            }
            let state = pg_sys::GenericXLogStart(self.rel);
            let copy = pg_sys::GenericXLogRegisterBuffer(state, buf, 0);
            let data = item_data(copy, offset).expect("the same page, locked");
            write_i64(data, OFF_MARK, target);
            write_i64(data, OFF_WRITTEN, stamp);
            let lsn = pg_sys::GenericXLogFinish(state);
            pg_sys::UnlockReleaseBuffer(buf);
            crate::failpoint!("mark-raise-before-flush");
            pg_sys::XLogFlush(lsn);
            crate::failpoint!("mark-raise-after-flush");
            self.write_out(block);
            Some(target)
        }
    }

    /// Raise `key`'s row to `target`, or insert it there where there is
    /// none: the mark afterwards (`None` when the row moved between the
    /// look and the write: look again).
    pub fn raise_or_insert(&self, key: &Key, target: i64, stamp: i64) -> Option<i64> {
        match self.find(key) {
            Some((_, tid)) => self.raise(tid, key, target, stamp),
            None => {
                self.insert(key, target, stamp);
                Some(target)
            }
        }
    }

    /// Insert a row of `key` at `mark`, in the caller's transaction,
    /// stamped as [`Table::raise`] stamps.
    pub fn insert(&self, key: &Key, mark: i64, stamp: i64) {
        // SAFETY: forming a tuple of the table's own descriptor (checked
        // by `shape_is_known`) and inserting it without firing triggers or
        // checking rights, as the extension's own write.
        unsafe {
            if pg_sys::IsInParallelMode() {
                errors::high_water_row_in_parallel();
            }
            let mut values = [
                pg_sys::Datum::from(key.worker_id),
                pg_sys::Datum::from(key.epoch_ms),
                pg_sys::Datum::from(key.worker_bits),
                pg_sys::Datum::from(key.sequence_bits),
                pg_sys::Datum::from(mark),
                pg_sys::Datum::from(stamp),
            ];
            let mut nulls = [false; 6];
            let tup = pg_sys::heap_form_tuple(
                (*self.rel).rd_att,
                values.as_mut_ptr(),
                nulls.as_mut_ptr(),
            );
            // Frozen: visible at once to every snapshot, and kept
            // whatever becomes of the caller's transaction (a rolled-back
            // savepoint, a prepared transaction never committed, an
            // abort), like the in-place raises; the caller's IDs are
            // covered from the flush below (issue 55).
            pg_sys::heap_insert(
                self.rel,
                tup,
                pg_sys::GetCurrentCommandId(true),
                pg_sys::HEAP_INSERT_FROZEN as _,
                std::ptr::null_mut(),
            );
            let at = (*tup).t_self.ip_blkid;
            pg_sys::heap_freetuple(tup);
            crate::failpoint!("mark-insert-before-flush");
            pg_sys::XLogFlush(pg_sys::XactLastRecEnd);
            crate::failpoint!("mark-insert-after-flush");
            self.write_out(((at.bi_hi as u32) << 16) | at.bi_lo as u32);
        }
    }

    /// Write block `block` of the table out to the kernel now, not at the
    /// next checkpoint (issue 62): `pg_resetwal` after a crash throws the
    /// WAL away, and must still find the mark that covers the IDs handed
    /// out. Called after the record is flushed: the page is in the buffer
    /// cache, so this reads nothing.
    fn write_out(&self, block: u32) {
        // SAFETY: pinning and share-locking one buffer of an open
        // relation, as FlushOneBuffer requires, then releasing it.
        unsafe {
            let buf = pg_sys::ReadBuffer(self.rel, block);
            pg_sys::LockBuffer(buf, pg_sys::BUFFER_LOCK_SHARE as _);
            pg_sys::FlushOneBuffer(buf);
            pg_sys::UnlockReleaseBuffer(buf);
        }
    }
}

/// What the row's `xmax` says of it, for an in-place raise.
enum RowState {
    /// Live: no transaction updated or deleted it (or one that did
    /// aborted, or only locked it).
    Live,
    /// A committed UPDATE or DELETE replaced it: look again.
    Gone,
    /// A transaction that has not ended updated or deleted it: a raise of
    /// this version would be lost when it commits.
    Busy,
}

/// See [`RowState`].
///
/// # Safety
/// `hdr` is a heap tuple header on a page the caller holds locked.
unsafe fn row_state(hdr: pg_sys::HeapTupleHeader) -> RowState {
    // SAFETY: see above; the transaction status lookups take their own
    // locks, as heap visibility checks under a buffer lock do.
    unsafe {
        let im = (*hdr).t_infomask as u32;
        if im & pg_sys::HEAP_XMAX_INVALID != 0 {
            return RowState::Live;
        }
        let locked_only = im & pg_sys::HEAP_XMAX_LOCK_ONLY != 0
            || im & (pg_sys::HEAP_XMAX_IS_MULTI | pg_sys::HEAP_LOCK_MASK)
                == pg_sys::HEAP_XMAX_EXCL_LOCK;
        if locked_only {
            return RowState::Live;
        }
        if im & pg_sys::HEAP_XMAX_IS_MULTI != 0 {
            // An update among lockers: whether it ended is not worth the
            // multixact lookup here; the caller says so, and the next
            // call looks again.
            return RowState::Busy;
        }
        let xmax = (*hdr).t_choice.t_heap.t_xmax;
        if pg_sys::TransactionIdIsCurrentTransactionId(xmax)
            || pg_sys::TransactionIdIsInProgress(xmax)
        {
            RowState::Busy
        } else if pg_sys::TransactionIdDidCommit(xmax) {
            RowState::Gone
        } else {
            RowState::Live
        }
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // SAFETY: closing what `open` opened and releasing its lock now,
        // not at the end of the caller's transaction.
        unsafe {
            let oid = (*self.rel).rd_id;
            pg_sys::table_close(self.rel, pg_sys::NoLock as _);
            pg_sys::UnlockRelationOid(oid, self.mode);
        }
    }
}

/// A row's data, where it has the table's shape (no nulls, long enough).
///
/// # Safety
/// `hdr` points at a heap tuple of `len` bytes that stays valid while the
/// result is used.
unsafe fn row_data(hdr: pg_sys::HeapTupleHeader, len: usize) -> Option<*mut u8> {
    // SAFETY: see above.
    unsafe {
        let hoff = (*hdr).t_hoff as usize;
        let has_nulls = (*hdr).t_infomask & pg_sys::HEAP_HASNULL as u16 != 0;
        (!has_nulls && len >= hoff + ROW_LEN).then(|| hdr.cast::<u8>().add(hoff))
    }
}

/// The header and length of the normal item at `offset` on a locked heap
/// page.
///
/// # Safety
/// `page` is a heap page locked by the caller.
unsafe fn item(
    page: pg_sys::Page,
    offset: pg_sys::OffsetNumber,
) -> Option<(pg_sys::HeapTupleHeader, usize)> {
    // SAFETY: see above; the item id is checked before its item is read.
    unsafe {
        if offset == 0 || offset > pg_sys::PageGetMaxOffsetNumber(page) {
            return None;
        }
        let iid = pg_sys::PageGetItemId(page, offset);
        if (*iid).lp_flags() != pg_sys::LP_NORMAL {
            return None;
        }
        let hdr = pg_sys::PageGetItem(page, iid) as pg_sys::HeapTupleHeader;
        Some((hdr, (*iid).lp_len() as usize))
    }
}

/// The header of the normal item at `offset` on a locked heap page.
///
/// # Safety
/// As [`item`].
unsafe fn item_header(
    page: pg_sys::Page,
    offset: pg_sys::OffsetNumber,
) -> Option<pg_sys::HeapTupleHeader> {
    // SAFETY: see above.
    unsafe { item(page, offset).map(|(h, _)| h) }
}

/// The data of the normal item at `offset` on a locked heap page.
///
/// # Safety
/// As [`item`].
unsafe fn item_data(page: pg_sys::Page, offset: pg_sys::OffsetNumber) -> Option<*mut u8> {
    // SAFETY: see above.
    unsafe { item(page, offset).and_then(|(h, len)| row_data(h, len)) }
}

fn read_key(data: *mut u8) -> Key {
    Key {
        worker_id: read_i32(data, OFF_WORKER),
        epoch_ms: read_i64(data, OFF_EPOCH),
        worker_bits: read_i32(data, OFF_WORKER_BITS),
        sequence_bits: read_i32(data, OFF_SEQUENCE_BITS),
    }
}

fn read_i32(data: *mut u8, off: usize) -> i32 {
    // SAFETY: `data` is a row of at least ROW_LEN bytes (`row_data`).
    unsafe { data.add(off).cast::<i32>().read_unaligned() }
}

fn read_i64(data: *mut u8, off: usize) -> i64 {
    // SAFETY: as `read_i32`.
    unsafe { data.add(off).cast::<i64>().read_unaligned() }
}

fn write_i64(data: *mut u8, off: usize, v: i64) {
    // SAFETY: as `read_i32`, on a page copy the caller may change.
    unsafe { data.add(off).cast::<i64>().write_unaligned(v) }
}
