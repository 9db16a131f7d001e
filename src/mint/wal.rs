//! The write-ahead log of reservations: a custom WAL resource manager.
//!
//! Every durable reservation (see [`crate::mint::reservation`]) is also a WAL
//! record, inserted and flushed (and, with synchronous replication, waited
//! for like a commit) before any ID it covers is returned. Redo, on a
//! standby or in crash recovery, raises the shared generator state above
//! the replayed reservation and persists it in the standby's own state
//! file, so a promoted standby, or a server recovered to a point in time,
//! continues strictly above every ID the primary could have issued up to
//! the replayed point.
//!
//! The resource manager ID is [`RM_ID`] (199, in the extension range
//! 128–255, clear of the IDs listed on the PostgreSQL wiki's
//! CustomWALResourceManagers page). It is registered in `_PG_init` while
//! preloading, so every server that replays this WAL, standbys included,
//! must preload the library: without it, recovery stops with PostgreSQL's
//! "resource manager with ID 199 not registered".

use crate::mint::shmem;
use crate::{datadir, errors, gucs};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use snowflake_id_core::{format_epoch, Clock, StateFile, SystemClock};
use std::sync::atomic::Ordering;

/// Our resource manager ID.
pub const RM_ID: u8 = 199;
/// The one record type: a reservation (the high four bits of `xl_info`
/// belong to the resource manager).
const XLOG_RESERVE: u8 = 0x10;
/// Flags of a reservation record (issue 62): what was pending when it
/// was written (`snowflake_id_core::starts::Pending`), in the resource
/// manager's bits of `xl_info`.
const XLOG_MARKS_UNREAD: u8 = 0x20;
const XLOG_CARRY: u8 = 0x40;

/// The record's payload: the reservation and the configuration it was
/// made under (the fields of the state file).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Reservation {
    reserved_until_ms: i64,
    epoch_ms: i64,
    worker_id: u64,
    worker_bits: u32,
    sequence_bits: u32,
}

impl Reservation {
    fn from_file(f: &StateFile) -> Self {
        Reservation {
            reserved_until_ms: f.reserved_until_ms,
            epoch_ms: f.epoch_ms,
            worker_id: f.worker_id,
            worker_bits: f.worker_bits,
            sequence_bits: f.sequence_bits,
        }
    }

    /// The state file of this server for a replayed record: a physical
    /// replica shares the primary's system identifier.
    fn to_file(self) -> StateFile {
        StateFile {
            epoch_ms: self.epoch_ms,
            worker_bits: self.worker_bits,
            sequence_bits: self.sequence_bits,
            worker_id: self.worker_id,
            reserved_until_ms: self.reserved_until_ms,
            system_identifier: Some(datadir::system_identifier()),
            stopped_at_checkpoint: None,
            pending: snowflake_id_core::starts::Pending::NONE,
        }
    }

    /// The payload of a record of ours, if it has the expected size.
    ///
    /// # Safety
    /// `record` is the reader state PostgreSQL passes to redo and desc.
    unsafe fn of(record: *mut pg_sys::XLogReaderState) -> Option<Self> {
        let decoded = (*record).record;
        if decoded.is_null()
            || (*decoded).header.xl_info & XLOG_RESERVE == 0
            || (*decoded).main_data_len as usize != std::mem::size_of::<Self>()
            || (*decoded).main_data.is_null()
        {
            return None;
        }
        Some(std::ptr::read_unaligned(
            (*decoded).main_data as *const Self,
        ))
    }
}

/// The resource manager, as PostgreSQL keeps a pointer to it.
struct Rmgr(pg_sys::RmgrData);
// SAFETY: a pointer to a static C string and function pointers, never
// written; PostgreSQL only reads it.
unsafe impl Sync for Rmgr {}

static RMGR: Rmgr = Rmgr(pg_sys::RmgrData {
    rm_name: c"snowflake_id".as_ptr(),
    rm_redo: Some(redo),
    rm_desc: Some(desc),
    rm_identify: Some(identify),
    rm_startup: None,
    rm_cleanup: None,
    rm_mask: None,
    rm_decode: None,
});

/// Register the resource manager. Call from `_PG_init` while preloading.
pub fn register() {
    // SAFETY: called while shared_preload_libraries is processed, as
    // RegisterCustomRmgr requires; RMGR lives for the life of the process.
    unsafe { pg_sys::RegisterCustomRmgr(RM_ID, &RMGR.0 as *const pg_sys::RmgrData as _) };
}

/// WAL-log a reservation that has just been written to the state file:
/// insert the record, flush it, and wait for synchronous standbys as a
/// commit would. Returns whether the reservation is as durable as a
/// commit: `false` when the wait for the standbys was ended by a cancel or
/// a termination before they confirmed it (PostgreSQL then has sent its
/// WARNING, and left a termination pending). Must not be called during
/// recovery.
#[must_use]
pub fn log_reservation(file: &StateFile) -> bool {
    let mut rec = Reservation::from_file(file);
    // SAFETY: the standard sequence for inserting a WAL record of a custom
    // resource manager; `rec` outlives XLogInsert, which copies it.
    let lsn = unsafe {
        pg_sys::XLogBeginInsert();
        pg_sys::XLogRegisterData(
            &mut rec as *mut Reservation as _,
            std::mem::size_of::<Reservation>() as _,
        );
        let info = XLOG_RESERVE
            | if file.pending.marks_unread {
                XLOG_MARKS_UNREAD
            } else {
                0
            }
            | if file.pending.carry { XLOG_CARRY } else { 0 };
        let lsn = pg_sys::XLogInsert(RM_ID, info);
        crate::failpoint!("reservation-wal-inserted");
        pg_sys::XLogFlush(lsn);
        crate::failpoint!("reservation-wal-flushed");
        let _on = SynchronousCommitOn::set();
        pg_sys::SyncRepWaitForLSN(lsn, false);
        lsn
    };
    // An interrupt is what ends the wait early; without one, the wait
    // ended because the standbys confirmed the record or are no longer
    // required (when synchronous_standby_names is emptied, the waiters
    // are woken just before the status byte read below is cleared).
    // SAFETY: reading this backend's interrupt flags; interrupts are held
    // (we hold the renewal LWLock), so a pending one is still pending.
    let interrupted = unsafe { pg_sys::ProcDiePending != 0 || pg_sys::InterruptPending != 0 };
    if let Some(t) = shmem::tracking() {
        t.last_reservation_lsn.fetch_max(lsn, Ordering::AcqRel);
    }
    !interrupted || standbys_confirmed(lsn)
}

/// Whether a checkpoint's redo point has passed the last reservation
/// record, or none was written since start-up: crash recovery would then
/// replay no record of the current reservation, and only the state file
/// would tell it (a stale file put back by hand would lower the floor).
/// The reservation worker then logs the reservation again
/// (`crate::mint::bgworker`).
pub fn checkpoint_passed_last_record() -> bool {
    let Some(t) = shmem::tracking() else {
        return false;
    };
    let last = t.last_reservation_lsn.load(Ordering::Acquire);
    // SAFETY: GetRedoRecPtr reads shared XLog state under its spinlock.
    // `last` is the end of the record: recovery that starts at or after it
    // does not replay it.
    last == 0 || unsafe { pg_sys::GetRedoRecPtr() } >= last
}

/// `synchronous_commit = on` for this backend while alive, whatever the
/// session set: whether a reservation waits for the synchronous standbys
/// is the server's decision (`synchronous_standby_names`, which only the
/// configuration can set), never a session's. A session with
/// `synchronous_commit = local` or `off` (or `remote_write`) would
/// otherwise publish, for every session, a reservation no standby had
/// confirmed, and a promoted standby could repeat the IDs under it. `on`
/// is the most a non-commit wait uses (`SyncRepWaitForLSN` caps it at a
/// flush). Restored when dropped, also when an ERROR unwinds.
struct SynchronousCommitOn(Option<i32>);

impl SynchronousCommitOn {
    fn set() -> Self {
        // SAFETY: reading this backend's GUC variable.
        let cur = unsafe { pg_sys::synchronous_commit } as u32;
        if cur == pg_sys::SyncCommitLevel::SYNCHRONOUS_COMMIT_REMOTE_FLUSH
            || cur == pg_sys::SyncCommitLevel::SYNCHRONOUS_COMMIT_REMOTE_APPLY
        {
            return SynchronousCommitOn(None);
        }
        // Set as a GUC, so that its assign hook also sets the wait mode
        // SyncRepWaitForLSN reads. Outside a transaction (the reservation
        // worker, when the configuration says `off`) there is nowhere to
        // save the old value: the process keeps `on` from then on.
        // SAFETY: reading this backend's transaction state.
        if !unsafe { pg_sys::IsTransactionState() } {
            gucs::pin_setting(c"synchronous_commit", c"on");
            return SynchronousCommitOn(None);
        }
        SynchronousCommitOn(Some(gucs::push_setting(c"synchronous_commit", c"on", true)))
    }
}

impl Drop for SynchronousCommitOn {
    fn drop(&mut self) {
        if let Some(nest) = self.0 {
            gucs::pop_settings(nest);
        }
    }
}

/// Whether the synchronous standbys have confirmed `lsn` (flushed it, the
/// level [`SynchronousCommitOn`] waits for), or none are required: the
/// test `SyncRepWaitForLSN` makes before it waits, made again after it
/// returned. It returns early, with only a WARNING, on a cancel or a
/// termination.
fn standbys_confirmed(lsn: pg_sys::XLogRecPtr) -> bool {
    // SYNC_REP_WAIT_FLUSH, the wait mode of synchronous_commit = on.
    let mode = 1;
    // SAFETY: WalSndCtl is shared memory set up at start-up; the status
    // byte and the LSNs are written under SyncRepLock. Read without it, a
    // confirmation can at worst look missing, never the reverse: a WAL
    // sender publishes the LSN before it sets our latch.
    unsafe {
        if pg_sys::max_wal_senders == 0 || pg_sys::WalSndCtl.is_null() {
            return true;
        }
        let ctl = pg_sys::WalSndCtl;
        let status = std::ptr::read_volatile(&raw const (*ctl).sync_standbys_status) as u32;
        if status & pg_sys::SYNC_STANDBY_DEFINED == 0 {
            return true;
        }
        std::ptr::read_volatile(&raw const (*ctl).lsn[mode]) >= lsn
    }
}

/// Redo: raise the generator above the replayed reservation, and keep it
/// in this server's state file so that a restart (which replays only from
/// the last restart point) still knows it. The reservation is a Unix
/// millisecond; the floor above it is placed in this server's own layout,
/// as at start-up.
#[pg_guard]
unsafe extern "C-unwind" fn redo(record: *mut pg_sys::XLogReaderState) {
    let Some(rec) = Reservation::of(record) else {
        return;
    };
    let info = (*(*record).record).header.xl_info;
    let pending = snowflake_id_core::starts::Pending {
        marks_unread: info & XLOG_MARKS_UNREAD != 0,
        carry: info & XLOG_CARRY != 0,
    };
    if let Some(state) = shmem::state() {
        if let Ok(layout) = gucs::layout() {
            state.raise_above(rec.reserved_until_ms, &layout, SystemClock.mono_ns());
            covers_crash(&rec, &layout, pending);
        }
        persist_replayed(&snowflake_id_core::StateFile {
            pending,
            ..rec.to_file()
        });
    }
}

/// After a crash (`starts::Read::UnlessReplayed`), a replayed
/// reservation of this layout makes the start-up read of the marks
/// unnecessary: recovery replays the WAL to its end, where the last
/// reservation the server made lies, and that one covers every ID it
/// handed out, whatever the state file says (issue 55: a crash costs no
/// wait). A record of another layout says nothing about this one's IDs.
fn covers_crash(
    rec: &Reservation,
    layout: &snowflake_id_core::Layout,
    pending: snowflake_id_core::starts::Pending,
) {
    use snowflake_id_core::starts::{read_after_replay, Read};
    let Some(t) = shmem::tracking() else { return };
    if rec.epoch_ms != layout.epoch_ms()
        || rec.worker_bits != layout.worker_bits()
        || rec.sequence_bits != layout.sequence_bits()
    {
        return;
    }
    if pending.carry {
        // A carry the primary had not made yet is due here too.
        t.carry_wanted_ms
            .fetch_max(rec.reserved_until_ms, Ordering::AcqRel);
    }
    let planned = shmem::read_of(t.planned_read.load(Ordering::Acquire));
    // The last record replayed decides (issue 62: one written while a
    // database lagged, or held a mark, keeps the read).
    if read_after_replay(planned, Some(pending)) {
        t.mark_ready.store(false, Ordering::Release);
        t.unless_replayed
            .store(planned == Read::UnlessReplayed, Ordering::Release);
        return;
    }
    if planned == Read::No {
        t.mark_ready.store(true, Ordering::Release);
    }
    if t.unless_replayed.swap(false, Ordering::AcqRel) {
        t.mark_ready.store(true, Ordering::Release);
        errors::report(
            PgLogLevel::LOG,
            PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
            format!(
                "snowflake_id: crash recovery replayed the reservation up to {}; the high-water marks need not be read",
                format_epoch(rec.reserved_until_ms)
            ),
            None,
            None,
        );
    }
}

/// Keep a replayed reservation in this server's state file when it is
/// newer than the file's: recovery after a restart starts at the last
/// restart point, so older records are not replayed again. A failure is
/// logged, not raised: the record stays in the WAL until the next restart
/// point, and recovery must go on.
fn persist_replayed(file: &StateFile) {
    let newer = match datadir::load() {
        Ok(Some(cur)) => cur.reserved_until_ms < file.reserved_until_ms,
        _ => true,
    };
    if newer {
        if let Err(e) = datadir::store(file) {
            errors::report(
                PgLogLevel::WARNING,
                PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
                format!(
                    "snowflake_id: could not write state file \"{}\" while replaying a reservation: {e}",
                    datadir::state_path()
                ),
                None,
                None,
            );
        }
    }
}

/// `pg_waldump` / `pg_walinspect` description of a record.
#[pg_guard]
unsafe extern "C-unwind" fn desc(buf: pg_sys::StringInfo, record: *mut pg_sys::XLogReaderState) {
    let text = match Reservation::of(record) {
        Some(r) => format!(
            "reserved until {}; worker {}, epoch {}, worker_bits {}, sequence_bits {}",
            format_epoch(r.reserved_until_ms),
            r.worker_id,
            format_epoch(r.epoch_ms),
            r.worker_bits,
            r.sequence_bits
        ),
        None => "unknown record".to_string(),
    };
    let c = std::ffi::CString::new(text).unwrap_or_default();
    pg_sys::appendStringInfoString(buf, c.as_ptr());
}

#[pg_guard]
unsafe extern "C-unwind" fn identify(info: u8) -> *const std::ffi::c_char {
    if info & XLOG_RESERVE != 0 {
        c"RESERVE".as_ptr()
    } else {
        std::ptr::null()
    }
}
