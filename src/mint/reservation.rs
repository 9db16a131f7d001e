//! The durable reservation: `$PGDATA/snowflake_id.state` records a Unix
//! millisecond up to which this server may issue IDs. After any restart or
//! crash the generator continues strictly above it, whatever the clock says.
//!
//! - **Window:** each write reserves [`WINDOW_MS`] (2 s) beyond the
//!   generator's frontier. A restart therefore jumps IDs at most about 2 s
//!   ahead of where they were, and under steady load one fsync per second
//!   is all it costs.
//! - **Off the hot path:** the background worker (see [`crate::mint::bgworker`])
//!   renews the reservation when less than [`THRESHOLD_MS`] is left. A
//!   caller that gets ahead of it anyway (a big burst, or the first call
//!   after an idle period) takes the renewal LWLock (it sleeps, it never
//!   spins) and renews it itself.
//! - **At start-up** (and after a crash, when shared memory is rebuilt) the
//!   file is read; see [`startup_state`] for the outcomes.

use crate::datadir::{self, state_path};
use crate::mint::{shmem, worker};
use crate::{errors, gucs};
use pgrx::pg_sys;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use snowflake_id_core::starts::{self, FileFacts, FileFound, Pending, Progress, StartFacts};
use snowflake_id_core::{
    compatibility, Clock, Compatibility, GeneratorState, Layout, StateFile, SystemClock,
};
use std::sync::atomic::Ordering;

pub const WINDOW_MS: i64 = 2_000;
pub const THRESHOLD_MS: i64 = 1_000;

/// `GeneratorState::blocked` codes.
pub const BLOCKED_CONFIG_CHANGED: u64 = 1;
pub const BLOCKED_STATE_FILE: u64 = 2;
pub const BLOCKED_FOREIGN_FILE: u64 = 3;
/// A high-water mark far ahead of the clock is held back
/// (`crate::high_water`, which sets and lifts it).
pub const BLOCKED_FAR_MARK: u64 = 4;
/// The bits of `GeneratorState::blocked` that hold the codes above.
pub const BLOCKED_MASK: u64 = 0xFF;
/// Not a code: some database holds a mark far ahead of the clock
/// (`crate::high_water`), which stops minting in that database alone.
/// Set, it keeps every call off the entry point's unguarded path, so
/// that each asks whether its own database is held.
pub const HELD_SOMEWHERE: u64 = 1 << 8;
pub const BLOCKED_CODES: u64 = BLOCKED_MASK;
/// A mark more than this far ahead of both the clock and the generator
/// moves nothing by itself (issue 46): one number edited in a dump, or a
/// row from an untrusted publisher, could otherwise move every ID of the
/// server days ahead, or exhaust the layout. `crate::high_water` holds
/// it back, generation stops with 55000 (a lower ID could repeat one the
/// mark covers), and `snowflake_accept_configuration()` applies it.
pub const FAR_MS: i64 = 600_000;

fn log(level: PgLogLevel, msg: String, detail: Option<String>, hint: Option<&str>) {
    errors::report(
        level,
        PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
        msg,
        detail,
        hint,
    );
}

/// A state that has reserved nothing yet: the first call renews.
fn unreserved_state() -> GeneratorState {
    let st = GeneratorState::new();
    st.reserved_until_ms
        .store(i64::MIN, std::sync::atomic::Ordering::Relaxed);
    st
}

/// Build the shared state when shared memory is created (in the
/// postmaster, at start-up and after a crash):
/// - no state file: a first start, logged; generation starts from the clock;
/// - a valid file with the same configuration, or a change that still
///   yields larger IDs (see `snowflake_id_core::compatibility`): continue
///   above its reservation;
/// - a valid file with a change that could yield smaller IDs: continue
///   above its reservation but refuse to generate until a superuser calls
///   `snowflake_accept_configuration()`;
/// - a valid file written by another cluster (its system identifier is
///   not this one's: copied from another server, or from the cluster
///   `pg_upgrade` upgraded): continue above its reservation but refuse to
///   generate until a superuser accepts;
/// - an unreadable or corrupt file: refuse to generate (never restart from
///   zero silently) until a superuser accepts.
///
/// Where the file is not provably current ([`marks_needed_at_start`]),
/// generation then waits for the start-up read of the high-water marks
/// (`crate::high_water`), which raises the generator above the mark every
/// database holds.
pub fn startup_state() -> GeneratorState {
    let st = startup_state_from_file();
    register_clean_stop();
    if gucs::leased() {
        // No worker id until the lease worker claims one.
        st.assigned_worker.store(
            snowflake_id_core::NO_WORKER,
            std::sync::atomic::Ordering::Relaxed,
        );
    }
    st
}

/// The worker id the configuration names, for comparing with the state
/// file's: none where it is leased (the file's then stands, since any
/// leased id continues above the registry's floor).
fn configured_worker() -> Option<u64> {
    if gucs::leased() {
        None
    } else {
        gucs::worker_id()
    }
}

fn startup_state_from_file() -> GeneratorState {
    let layout = &gucs::layout().expect("layout validated in _PG_init");
    let mono = SystemClock.mono_ns();
    let loaded = datadir::load();
    let found = loaded.as_ref().ok().and_then(|f| f.as_ref());
    shmem::set_marks_needed(marks_needed_at_start(found));
    let pending = found
        .filter(|f| f.system_identifier == Some(datadir::system_identifier()))
        .map_or(Pending::NONE, |f| f.pending);
    shmem::set_found_pending(
        pending_bits(pending),
        if pending.carry {
            found.map_or(i64::MIN, |f| f.reserved_until_ms)
        } else {
            i64::MIN
        },
    );
    if shmem::binary_upgrade() && starts::refuse_binary_upgrade(&file_found(found)) {
        // pg_upgrade starts the old cluster in binary-upgrade mode: the
        // new one gets no state file, and a dropped database's IDs that
        // only this file covers would be below the new server's first.
        errors::report(
            PgLogLevel::FATAL,
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "snowflake_id: the IDs of a dropped database are not yet carried into another database's high-water mark",
            Some(format!("Only the state file \"{}\" covers them, and pg_upgrade does not carry it.", state_path())),
            Some("Start this server normally once, with the extension in at least one database (CREATE EXTENSION snowflake_id where there is none): the log says \"carried the IDs of a dropped database\" about a second later. Stop it, and run pg_upgrade again."),
        );
    }
    match loaded {
        Ok(None) => {
            log(
                PgLogLevel::LOG,
                format!(
                    "snowflake_id: no state file \"{}\", starting from the high-water mark",
                    state_path()
                ),
                Some("This is expected on the first start with snowflake_id. After pg_upgrade or a lost state file, the high-water mark in the databases still keeps new IDs above every ID this server handed out.".into()),
                None,
            );
            unreserved_state()
        }
        Ok(Some(file)) => {
            let st = GeneratorState::resume_above(file.reserved_until_ms, layout, mono);
            let this = datadir::system_identifier();
            if let Some(other) = file.system_identifier.filter(|&id| id != this) {
                st.blocked
                    .store(BLOCKED_FOREIGN_FILE, std::sync::atomic::Ordering::Relaxed);
                log(
                    PgLogLevel::WARNING,
                    format!("snowflake_id: the state file \"{}\" was written by another cluster; ID generation is disabled", state_path()),
                    Some(format!("It was written by the cluster with system identifier {other}; this cluster's is {this}. Its reservation need not cover the IDs this cluster issued.")),
                    Some("If this cluster was made from that one (pg_upgrade, a copy), accept the file with SELECT snowflake_accept_configuration() as a superuser; otherwise restore this cluster's own file."),
                );
                return st;
            }
            if file.reserved_until_ms >= layout.last_unix_ms() {
                log(
                    PgLogLevel::WARNING,
                    "snowflake_id: the ID space of the configured layout is used up".into(),
                    Some(format!(
                        "The durable reservation reaches {}, the last millisecond the layout can represent; IDs up to it may have been issued.",
                        snowflake_id_core::format_epoch(layout.last_unix_ms())
                    )),
                    Some("Use a later snowflake_id.epoch or fewer worker and sequence bits, and accept the change with SELECT snowflake_accept_configuration()."),
                );
            }
            let worker = configured_worker().unwrap_or(file.worker_id);
            match compatibility(&file, layout, worker) {
                Compatibility::Same => {}
                Compatibility::SafeChange(what) => log(
                    PgLogLevel::LOG,
                    format!("snowflake_id: configuration changed since the last run ({what})"),
                    Some("New IDs are still larger than every ID issued before.".into()),
                    None,
                ),
                Compatibility::UnsafeChange(what) => {
                    st.blocked
                        .store(BLOCKED_CONFIG_CHANGED, std::sync::atomic::Ordering::Relaxed);
                    log(
                        PgLogLevel::WARNING,
                        format!("snowflake_id: configuration changed since the last run ({what}); ID generation is disabled"),
                        Some("With the new configuration new IDs could be smaller than, or equal to, IDs issued before.".into()),
                        Some("Restore the previous settings, or accept the change with SELECT snowflake_accept_configuration() as a superuser."),
                    );
                }
            }
            st
        }
        Err(e) => {
            let st = unreserved_state();
            st.blocked
                .store(BLOCKED_STATE_FILE, std::sync::atomic::Ordering::Relaxed);
            log(
                PgLogLevel::WARNING,
                format!("snowflake_id: {e}: \"{}\"; ID generation is disabled", state_path()),
                Some("Without the state file the generator cannot prove that new IDs are larger than old ones.".into()),
                Some("Restore the file from a backup, or accept starting from the clock with SELECT snowflake_accept_configuration() as a superuser."),
            );
            st
        }
    }
}

/// Describe why generation is blocked, for error messages.
pub fn blocked_reason(code: u64, layout: &Layout) -> (String, String) {
    match (code, datadir::load()) {
        (BLOCKED_CONFIG_CHANGED, Ok(Some(file))) => {
            let worker = configured_worker().unwrap_or(file.worker_id);
            let what = match compatibility(&file, layout, worker) {
                Compatibility::UnsafeChange(w) | Compatibility::SafeChange(w) => w,
                Compatibility::Same => "none now".into(),
            };
            (
                "snowflake_id configuration changed since IDs were last issued".into(),
                format!("Changed: {what}. With the new configuration new IDs could be smaller than, or equal to, IDs issued before."),
            )
        }
        (BLOCKED_FOREIGN_FILE, Ok(Some(file))) => (
            "snowflake_id state file was written by another cluster".into(),
            format!(
                "\"{}\" was written by the cluster with system identifier {}; this cluster's is {}.",
                state_path(),
                file.system_identifier.unwrap_or(0),
                datadir::system_identifier()
            ),
        ),
        (BLOCKED_FAR_MARK, _) => {
            let (mark, db) = shmem::tracking().map_or((i64::MIN, 0), |t| {
                (
                    t.mark_far_ms.load(std::sync::atomic::Ordering::Acquire),
                    t.mark_far_db.load(std::sync::atomic::Ordering::Acquire),
                )
            });
            let now = SystemClock.wall_ns().div_euclid(1_000_000);
            (
                "snowflake_id high-water mark is far ahead of the clock".into(),
                format!(
                    "A high-water mark of this server's worker id and layout, {} (in the database with OID {db}), is {} s ahead of the clock and was not applied: a mark more than {} minutes ahead moves nothing by itself. More databases hold such marks than can be held back one by one, so every database stops. If the marks are right, accept them; if not, discard each with SELECT snowflake_discard_high_water() in its database.",
                    snowflake_id_core::format_epoch(mark),
                    (mark - now) / 1000,
                    FAR_MS / 60_000
                ),
            )
        }
        (_, Err(e)) => (
            format!("snowflake_id state file is unusable: {e}"),
            format!("The file \"{}\" records the highest reserved timestamp; without it new IDs might repeat old ones.", state_path()),
        ),
        _ => (
            "snowflake_id state file is missing or changed since start-up".into(),
            format!("See \"{}\" and the server log.", state_path()),
        ),
    }
}

/// Take the renewal lock (waiting interruptibly) and, if `still_needed`
/// says so once it is held, renew the reservation: the one place that
/// pairs the lock with [`renew_locked`] and its unconfirmed case. Returns
/// the new reservation, or `None` when someone else's renewal made this
/// one unnecessary. A renewal the synchronous standbys did not confirm
/// releases the lock and ends the statement ([`interrupted`]).
pub fn renew(
    state: &GeneratorState,
    layout: &Layout,
    at_least_ms: i64,
    still_needed: impl FnOnce() -> bool,
) -> Option<i64> {
    renew_for_call(state, layout, at_least_ms, still_needed, &mut None)
}

/// [`renew`] for one minting call, whose waits for the lease
/// (`worker::wait_for_cover`) add up to at most its bound across every
/// reservation the call needs: `since` is the call's own record.
pub fn renew_for_call(
    state: &GeneratorState,
    layout: &Layout,
    at_least_ms: i64,
    still_needed: impl FnOnce() -> bool,
    since: &mut Option<i64>,
) -> Option<i64> {
    if at_least_ms != i64::MIN {
        // A lost lease refuses at once.
        worker::wait_for_cover(at_least_ms, since);
    }
    let guard = shmem::renewal_lock();
    if !still_needed() {
        return None;
    }
    match renew_locked(state, layout, at_least_ms) {
        Some(target) => Some(target),
        None => {
            drop(guard);
            interrupted()
        }
    }
}

/// The state file this server writes for a reservation up to
/// `reserved_ms`: its layout, worker id and system identifier.
pub fn this_server_file(layout: &Layout, reserved_ms: i64) -> StateFile {
    StateFile {
        epoch_ms: layout.epoch_ms(),
        worker_bits: layout.worker_bits(),
        sequence_bits: layout.sequence_bits(),
        worker_id: worker::current_worker_id().unwrap_or(0),
        reserved_until_ms: reserved_ms,
        system_identifier: Some(datadir::system_identifier()),
        stopped_at_checkpoint: None,
        pending: current_pending(),
    }
}

/// What this run has left undone (`snowflake_id_core::starts::Progress`).
pub fn progress() -> Progress {
    let Some(t) = shmem::tracking() else {
        return Progress {
            read_done: true,
            carry_wanted: i64::MIN,
            carried: i64::MIN,
            ..Progress::default()
        };
    };
    Progress {
        read_done: t.mark_ready.load(Ordering::Acquire),
        lagging: t.lag_all.load(Ordering::Acquire) || !t.lagging.is_empty(),
        held: !t.held.is_empty() || t.held_overflow.load(Ordering::Acquire),
        carry_wanted: t.carry_wanted_ms.load(Ordering::Acquire),
        carried: t.carried_ms.load(Ordering::Acquire),
    }
}

/// What every file and record written now says is pending.
pub fn current_pending() -> Pending {
    starts::pending(&progress())
}

/// A pending state as bits (`shmem::Tracking::logged_pending`).
pub fn pending_bits(p: Pending) -> u32 {
    p.marks_unread as u32 | (p.carry as u32) << 1
}

pub fn pending_of(bits: u32) -> Pending {
    Pending {
        marks_unread: bits & 1 != 0,
        carry: bits & 2 != 0,
    }
}

/// Write the state file and a reservation record now, where what is
/// pending grew since the last ones (a database left lagging, a mark
/// held back, a carry due: a crash that follows at once must not forget
/// it), or where the generator was raised by a mark above the durable
/// reservation (`at_least`: a restart with the clock behind must not
/// forget that either). Issue 62. A no-op where nothing is reserved
/// yet: the first reservation writes both.
pub fn persist(state: &GeneratorState, layout: &Layout, at_least: i64) {
    let Some(t) = shmem::tracking() else { return };
    // Nothing is written while generation is disabled: the file on disk
    // (corrupt, another cluster's, another configuration's) is what a
    // superuser decides about, and nothing is minted meanwhile.
    if shmem::in_recovery()
        || shmem::binary_upgrade()
        || worker::current_worker_id().is_none()
        || state.blocked.load(Ordering::Acquire) & BLOCKED_MASK != 0
    {
        return;
    }
    let grown = || {
        starts::must_log(
            current_pending(),
            pending_of(t.logged_pending.load(Ordering::Acquire)),
        ) || at_least > state.reserved_until_ms.load(Ordering::Acquire)
    };
    if !grown() {
        return;
    }
    let guard = shmem::renewal_lock();
    if grown() && renew_locked(state, layout, at_least).is_none() {
        drop(guard);
        interrupted();
    }
}

fn file_found(file: Option<&StateFile>) -> FileFound {
    match file {
        None => FileFound::Missing,
        Some(f) if f.system_identifier == Some(datadir::system_identifier()) => {
            FileFound::Ours(FileFacts {
                current: false,
                pending: f.pending,
            })
        }
        Some(_) => FileFound::Unusable,
    }
}

/// `pg_control` as it is on disk now: its state and the LSN of its
/// latest checkpoint. `None` when it cannot be read (its CRC is wrong).
fn control_file() -> Option<(pg_sys::DBState::Type, u64)> {
    // SAFETY: reading pg_control of this data directory into a palloc'd
    // copy, as pg_controldata does; called in the postmaster.
    unsafe {
        let mut crc_ok = false;
        let cf = pg_sys::get_controlfile(pg_sys::DataDir, &mut crc_ok);
        if cf.is_null() || !crc_ok {
            return None;
        }
        Some(((*cf).state, (*cf).checkPoint))
    }
}

/// Whether this start must read every database's high-water mark before
/// the first ID (`crate::high_water`), given the state file found: yes
/// unless the file is this cluster's and provably current, which it is
/// - after a clean stop that wrote it ([`write_at_clean_stop`]: it names
///   the shutdown checkpoint `pg_control` names);
/// - on a standby (`standby.signal`), or after a standby's clean stop:
///   the WAL it replays carries every reservation, and promotion needs
///   nothing more.
///
/// After a crash, the file could be a stale copy put back by hand: the
/// marks are read unless crash recovery replays a reservation record
/// ([`starts::Read::UnlessReplayed`]). Every ID is issued under a
/// reservation that is WAL-logged and flushed first, and reservations
/// only grow, so the last record in the WAL covers every ID the server
/// ever handed out; recovery replays it whenever it replays any (the
/// reservation worker logs one again after every checkpoint). Without a
/// file (`pg_upgrade`, a lost file) or with another cluster's or an
/// unusable one, only the marks know how far the old IDs went.
fn marks_needed_at_start(file: Option<&StateFile>) -> starts::Read {
    let control = control_file();
    let shutdown = match control {
        Some((pg_sys::DBState::DB_SHUTDOWNED, _)) => starts::Shutdown::Clean,
        Some((pg_sys::DBState::DB_SHUTDOWNED_IN_RECOVERY, _)) => starts::Shutdown::CleanInRecovery,
        // A crash, or pg_control unreadable: crash recovery that replays
        // a reservation record covers every ID (issue 55: a crash costs
        // no wait), else the marks are read.
        _ => starts::Shutdown::Crash,
    };
    let file = match file_found(file) {
        FileFound::Ours(facts) => FileFound::Ours(FileFacts {
            // Written by the clean stop that pg_control names.
            current: matches!(
                (control, file.and_then(|f| f.stopped_at_checkpoint)),
                (Some((pg_sys::DBState::DB_SHUTDOWNED, cp)), Some(at)) if cp == at
            ),
            ..facts
        }),
        other => other,
    };
    starts::read_at_start(&StartFacts {
        file,
        shutdown,
        standby: datadir::standby_signal(),
    })
}

/// Register [`write_at_clean_stop`] for the postmaster's exit, while its
/// shared memory is still attached: called where shared memory is created
/// (a crash restart runs the callbacks, with a non-zero code, and
/// creates it again); children forget it when they fork.
fn register_clean_stop() {
    // SAFETY: registering an exit callback in the process that creates
    // shared memory.
    unsafe { pg_sys::before_shmem_exit(Some(write_at_clean_stop), pg_sys::Datum::from(0)) };
}

/// At the postmaster's exit after a clean stop (every other process has
/// exited, the shutdown checkpoint is written): rewrite the state file
/// with the last ID's millisecond (or the clock, if later) as the
/// reservation, and the checkpoint's LSN, so that the next start
/// continues right above the last ID, not a window beyond it, and needs
/// no read of the marks. Nothing is written when generation is disabled,
/// while the start-up read of the marks is pending or has databases left
/// to read, in recovery or in binary-upgrade mode: the next start then
/// reads the marks.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn write_at_clean_stop(code: std::ffi::c_int, _arg: pg_sys::Datum) {
    let (Some(state), Some(t), Ok(layout)) = (shmem::state(), shmem::tracking(), gucs::layout())
    else {
        return;
    };
    let Some(worker) = worker::current_worker_id() else {
        return;
    };
    // While the start-up read has not ended, the file on disk stays: it
    // says (or its absence says) that the next start reads the marks.
    if code != 0
        || state.blocked.load(std::sync::atomic::Ordering::Acquire) & BLOCKED_MASK != 0
        || !t.mark_ready.load(std::sync::atomic::Ordering::Acquire)
        || shmem::binary_upgrade()
    {
        return;
    }
    let Some((pg_sys::DBState::DB_SHUTDOWNED, checkpoint)) = control_file() else {
        return;
    };
    let last_ms = state.last_issued().map_or(i64::MIN, |id| {
        layout.epoch_ms() + layout.timestamp_of(id as u64) as i64
    });
    let reserved = last_ms.max(SystemClock.wall_ns().div_euclid(1_000_000));
    // Issue 62: never current while a mark is unread or held (the next
    // clean start would read none); what is pending is said either way.
    let current = starts::clean_stop_current(&progress());
    let file = StateFile {
        worker_id: worker,
        stopped_at_checkpoint: current.then_some(checkpoint),
        ..this_server_file(&layout, reserved)
    };
    if datadir::store(&file).is_err() {
        // The file of the last reservation stays; the next start reads
        // the marks.
    }
}

/// Persist a reservation of at least `at_least_ms` (and `WINDOW_MS` beyond
/// the frontier): in the state file and, flushed and replicated like a
/// commit, in the WAL; then publish it. Must hold the renewal lock, and
/// must not be called during recovery.
///
/// Returns the reservation, or `None` when a cancel or a termination ended
/// the wait for synchronous standbys before they confirmed it. Nothing is
/// published then, so no ID is issued under a reservation a promoted
/// standby might not know.
#[must_use]
fn renew_locked(state: &GeneratorState, layout: &Layout, at_least_ms: i64) -> Option<i64> {
    let clock = SystemClock;
    let cur = state
        .reserved_until_ms
        .load(std::sync::atomic::Ordering::Acquire);
    // Never past the lease, never below the current reservation.
    let target = state
        .renewal_target(layout, clock.wall_ns(), clock.mono_ns(), WINDOW_MS)
        .max(at_least_ms)
        .min(worker::cap_ms())
        .max(cur);
    let logged = shmem::tracking().map_or(0, |t| t.logged_pending.load(Ordering::Acquire));
    if target <= cur
        && datadir::exists()
        && !crate::mint::wal::checkpoint_passed_last_record()
        && logged == pending_bits(current_pending())
    {
        // The lease holds the reservation back: nothing new to persist.
        return Some(cur);
    }
    let file = this_server_file(layout, target);
    if let Err(e) = datadir::store(&file) {
        errors::state_file_write(&state_path(), "extending the reservation", e);
    }
    if !crate::mint::wal::log_reservation(&file) {
        return None;
    }
    if let Some(t) = shmem::tracking() {
        t.logged_pending
            .store(pending_bits(file.pending), Ordering::Release);
    }
    state.publish_reservation(target);
    Some(target)
}

/// After [`renew_locked`] returned `None`, with the renewal lock released:
/// end the statement as the interrupt that cut the wait short would have.
/// `SyncRepWaitForLSN` answers a cancel (or a statement timeout) with a
/// WARNING and clears it, which is right for a commit that has happened
/// but not for a caller still waiting for its IDs; the cancel is raised
/// again here, so PostgreSQL reports it in its own words (57014). A
/// termination is still pending and ends the process.
fn interrupted() -> ! {
    errors::report(
        PgLogLevel::WARNING,
        PgSqlErrorCode::ERRCODE_WARNING,
        "snowflake_id reservation not confirmed by the synchronous standbys",
        Some("The reservation is durable on this server only; no ID it covers was issued.".into()),
        None,
    );
    // SAFETY: re-arming the cancel PostgreSQL cleared, exactly as its
    // signal handler sets it; interrupts are not held (the lock is
    // released).
    unsafe {
        if pg_sys::ProcDiePending == 0 {
            pg_sys::QueryCancelPending = 1;
        }
        pg_sys::InterruptPending = 1;
    }
    pgrx::check_for_interrupts!();
    errors::reservation_not_confirmed()
}
