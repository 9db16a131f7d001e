//! The high-water mark: a bound on the IDs minted in a database, kept in
//! that database's table `snowflake_id_internal.snowflake_high_water`
//! (see `sql/high_water.sql`), so that whatever carries the database
//! carries it: crash recovery, base backups and PITR, standbys, every
//! `pg_upgrade` mode, and `pg_dump` of the database.
//!
//! - **Each database on its own.** Before an ID is returned, the backend
//!   that mints it makes sure its own database's mark is above it
//!   ([`gate`], asked through `crate::mint::bound`). When less than
//!   [`RAISE_WITHIN_MS`] is left, it raises the mark to [`AHEAD_MS`]
//!   beyond the generator's frontier itself: an in-place write of the
//!   row, WAL-logged and flushed, with no commit, no background worker,
//!   no new connection and no other database involved ([`row`]). A
//!   minting database writes about once every 1.5 s; an idle one never.
//! - **Start-up.** A clean stop leaves the state file at the last ID
//!   (`crate::mint::reservation`), and a standby follows the WAL: then the
//!   marks are not needed and the first ID comes at once. After a start
//!   without a state file of this cluster (`pg_upgrade`, a lost or
//!   corrupt file) or after a crash (a stale state file could have been
//!   put back), the launcher reads every database's mark first ([`scan`]),
//!   and generation waits for it ([`ensure_ready`], at most [`WAIT_MS`],
//!   then 55000). A database it could not read reads its own mark at its
//!   first ID.
//! - **Restores.** A mark of this server's configuration written by a
//!   restore raises the generator at once (the trigger below). A mark
//!   more than [`FAR_MS`] ahead of the clock and of the generator is
//!   held back: reported, and applied only by
//!   `snowflake_accept_configuration()`.
//! - **Scope.** A row of another worker id or another layout never moves
//!   this server. Only a superuser can write the table; no role can own
//!   an index, trigger, rule or policy on it, and it is read through the
//!   catalog.
//!
//! ## `snowflake_high_water() → timestamptz`
//!
//! This database's high-water mark for this server's worker id and
//! layout: no ID minted here carries a later time. NULL where the
//! database holds none yet (no ID minted here since the extension was
//! created), where the extension has no table (a version before 0.8.0)
//! and where the library is not preloaded. VOLATILE, PARALLEL SAFE.
//!
//! ```sql
//! SELECT snowflake_high_water();
//! ```
//!
//! ## `snowflake_write_high_water() → timestamptz`
//!
//! Superuser only. Raises this database's mark to [`AHEAD_MS`] beyond the
//! generator now, or creates its row; the install and upgrade scripts
//! call it, so that a new tenant's first ID needs no write. Returns the
//! mark, or NULL where none can be written (a standby, no worker id).
//!
//! ```sql
//! SELECT snowflake_write_high_water();
//! ```

pub mod drops;
pub mod gate;
pub mod row;
pub mod scan;

use crate::mint::reservation::{BLOCKED_CODES, HELD_SOMEWHERE};
pub use crate::mint::reservation::{BLOCKED_FAR_MARK, FAR_MS};
use crate::mint::{bound, shmem, worker};
use crate::{errors, gucs};
use pgrx::prelude::*;
use pgrx::{pg_sys, PgLogLevel, PgSqlErrorCode};
use snowflake_id_core::starts;
use snowflake_id_core::{format_epoch, Clock, GeneratorState, Layout, SystemClock, DEBT_STEP_MS};
use std::sync::atomic::{AtomicBool, Ordering};

/// How far beyond the generator's frontier a database's mark is raised.
pub const AHEAD_MS: i64 = 5_000;
/// A mark is raised when less than this is left between the next ID and
/// it: 3.5 s of the 5 s, so that a mark is raised before any ID needs it.
pub const RAISE_WITHIN_MS: i64 = 3_500;
/// Where the extension has no table (a version before 0.8.0), look again
/// after this long.
pub const RECHECK_MISSING_MS: i64 = 10_000;
/// How long a caller waits for the start-up read of the marks before
/// 55000.
pub const WAIT_MS: i64 = 20_000;

/// Register the gate and the launcher: `_PG_init`, while preloading.
pub fn init() {
    bound::set_owner(bound::Owner {
        before: gate::before_mint,
        cover: gate::covered,
    });
    scan::register();
    drops::init();
}

/// Set once this backend has seen the marks read since start-up.
static READY: AtomicBool = AtomicBool::new(false);

/// Before this backend's first ID: refuse (55000, saying how far the read
/// has got) until the start-up read of the marks, where one is needed,
/// has raised the generator above them. A call waits [`GRACE_MS`] for a
/// read about to end (a new cluster's few databases take milliseconds);
/// during a longer read it fails (issue 55), as PostgreSQL refuses
/// connections while it starts, rather than hold its locks and
/// connection for seconds. The ID is computed after the wait.
pub fn ensure_ready() {
    if READY.load(Ordering::Relaxed) {
        return;
    }
    let Some(t) = marks() else {
        // Nothing to wait for (not preloaded, or a single-user backend).
        READY.store(true, Ordering::Relaxed);
        return;
    };
    wait_for_read(t, GRACE_MS);
    READY.store(true, Ordering::Relaxed);
}

/// How long a call waits for a start-up read of the marks about to end
/// before it fails with 55000: below the second an INSERT may wait.
pub const GRACE_MS: i64 = 500;

/// Wait until the start-up read of the marks is done, at most
/// [`WAIT_MS`], then 55000: for a superuser's decision
/// (`snowflake_accept_configuration()`), which must see every mark.
pub fn wait_ready() {
    if let Some(t) = marks() {
        wait_for_read(t, WAIT_MS);
    }
}

/// Wait at most `ms` for the start-up read of the marks (waking the
/// launcher), then 55000 with how far it has got.
fn wait_for_read(t: &shmem::Tracking, ms: i64) {
    let ok = shmem::wait_until(ms, || {
        let d = t.mark_ready.load(Ordering::Acquire);
        if !d {
            scan::wake_launcher(t);
        }
        d
    });
    if !ok {
        unavailable(t);
    }
}

/// The shared tracking, where there are marks to keep: preloaded, and
/// under a postmaster. A single-user backend (`postgres --single`) starts
/// no background worker: there the marks are neither read nor raised,
/// and only the state file and the WAL cover its IDs
/// (docs/operations.md).
fn marks() -> Option<&'static shmem::Tracking> {
    // SAFETY: reading a plain global flag of this process.
    if unsafe { pg_sys::IsUnderPostmaster } {
        shmem::tracking()
    } else {
        None
    }
}

fn unavailable(t: &shmem::Tracking) -> ! {
    let failed = t.mark_failed_db.load(Ordering::Acquire);
    let (done, total) = (
        t.read_done.load(Ordering::Acquire),
        t.read_total.load(Ordering::Acquire),
    );
    let what = "The high-water marks of the databases have not all been read since start-up";
    let progress = if total == 0 {
        "the read has not listed the databases yet".to_string()
    } else {
        format!("the read has got through {done} of {total} databases")
    };
    let detail = if t.launcher_latch.load(Ordering::Acquire) == 0 {
        format!("{what}: {progress}, and the snowflake_id high-water launcher is not running.")
    } else if failed != 0 {
        format!("{what}: {progress}; the last database it could not read has OID {failed}.")
    } else {
        format!("{what}: {progress}.")
    };
    errors::high_water_unavailable(detail)
}

/// This server's configuration as the table's key.
pub fn key(layout: &Layout, worker: u64) -> row::Key {
    row::Key {
        worker_id: worker as i32,
        epoch_ms: layout.epoch_ms(),
        worker_bits: layout.worker_bits() as i32,
        sequence_bits: layout.sequence_bits() as i32,
    }
}

/// The mark the next raise writes: [`AHEAD_MS`] beyond the later of
/// `ms` and the generator's frontier, never past the layout. Recorded as
/// this server's own before it is written.
///
/// While the generator's reference clock runs ahead of the wall clock
/// (after a start above the marks or a reservation: its lead is debt), the
/// mark goes [`AHEAD_MS`] beyond the wall clock and at most
/// `DEBT_STEP_MS` beyond the IDs, not [`AHEAD_MS`] beyond the reference:
/// the next start without a state file resumes above the whole mark, and
/// would otherwise add its lead again at every such start (issue 55).
fn next_target(t: &shmem::Tracking, state: &GeneratorState, layout: &Layout, ms: i64) -> i64 {
    let clock = SystemClock;
    let (wall, mono) = (clock.wall_ns(), clock.mono_ns());
    let target = match state.in_debt(layout, wall, mono) {
        Some((wall_ms, last_ms)) => wall_ms
            .saturating_add(AHEAD_MS)
            .max(ms.max(last_ms).saturating_add(DEBT_STEP_MS)),
        None => ms
            .max(state.frontier_ms(layout, wall, mono))
            .saturating_add(AHEAD_MS),
    }
    .min(layout.last_unix_ms());
    t.mark_tried_ms.fetch_max(target, Ordering::AcqRel);
    target
}

/// Where a backend whose last ID is at `ms` asks again, with this
/// database's mark at `mark` (above `ms`): [`RAISE_WITHIN_MS`] before the
/// mark, or, for a mark that close (in debt, see [`next_target`]),
/// halfway to it, so that a mark close to the IDs is not asked for again
/// at every call.
fn ask_again_at(mark: i64, ms: i64) -> i64 {
    if mark.saturating_sub(ms) > RAISE_WITHIN_MS {
        mark - RAISE_WITHIN_MS
    } else {
        ms + (mark - ms) / 2
    }
}

/// Whether some database was not read at start-up yet: then every
/// backend reads its own database's marks from before this start before
/// its first ID (`gate`), since a database made from a lagging template
/// after the listing lags without being listed.
pub fn this_database_lags() -> bool {
    crate::mint::reservation::progress().lagging
}

/// Whether this backend's database must apply its marks of earlier
/// starts itself: some database lags, or holds a mark back (issue 62:
/// this one may be a copy of it made since, whose marks nobody read).
pub fn marks_unread_here() -> bool {
    let p = crate::mint::reservation::progress();
    p.lagging || p.held
}

/// Apply a mark found in database `db` (named `name`) that this server
/// did not write since start-up: raise the generator above it, or hold
/// it back when it is far ahead ([`hold_far_mark`]).
fn apply_found(
    t: &shmem::Tracking,
    state: &GeneratorState,
    layout: &Layout,
    found: i64,
    db: u32,
    name: &str,
) {
    let clock = SystemClock;
    let frontier = state.frontier_ms(layout, clock.wall_ns(), clock.mono_ns());
    // Issue 62: judged against the durable reservation, not the clock: a
    // mark the clock has passed is applied all the same (and made
    // durable by the caller, `reservation::persist`), or a restart with
    // the clock stepped back would forget it.
    let reserved = state.reserved_until_ms.load(Ordering::Acquire);
    match starts::judge_mark(found, reserved, far_limit(t, frontier), true) {
        starts::Verdict::Hold => {
            hold_far_mark(t, state, found, db, name, false);
            return;
        }
        starts::Verdict::Nothing => return,
        starts::Verdict::Raise => {}
    }
    state.raise_above(found, layout, clock.mono_ns());
    t.mark_found_ms.fetch_max(found, Ordering::AcqRel);
    errors::report(
        PgLogLevel::LOG,
        PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
        format!(
            "snowflake_id: generator raised above the high-water mark {} found in database \"{name}\"",
            format_epoch(found)
        ),
        None,
        None,
    );
}

/// A mark found in database `db` that this server did not write since
/// start-up, in a database the start-up read covered or that needed none:
/// held back when it is far ahead ([`hold_far_mark`]), left alone
/// otherwise (the generator is above it, or it is the last run's own,
/// 5 s beyond where that run's IDs went).
fn hold_if_far(
    t: &shmem::Tracking,
    state: &GeneratorState,
    layout: &Layout,
    found: i64,
    db: u32,
    name: &str,
) -> bool {
    let clock = SystemClock;
    let frontier = state.frontier_ms(layout, clock.wall_ns(), clock.mono_ns());
    let far = found > far_limit(t, frontier);
    if far {
        hold_far_mark(t, state, found, db, name, false);
    }
    far
}

/// The largest mark applied by itself: [`FAR_MS`] beyond the later of
/// the clock and the generator's frontier (a server whose IDs run ahead
/// after a restart with its clock behind keeps its own marks).
///
/// The generator's part is its frontier when it was last established
/// (`shmem::Tracking::far_base_ms`: the start-up read, an acceptance;
/// the frontier at the first use otherwise), not its frontier now: marks
/// restored one after another, each within reach of the last, never
/// step the generator further than that.
fn far_limit(t: &shmem::Tracking, frontier_ms: i64) -> i64 {
    let base = match t.far_base_ms.compare_exchange(
        i64::MIN,
        frontier_ms,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => frontier_ms,
        Err(b) => b,
    };
    SystemClock
        .wall_ns()
        .div_euclid(1_000_000)
        .max(base)
        .saturating_add(FAR_MS)
}

/// The generator was established anew (the start-up read, a superuser's
/// acceptance): later marks are judged from here.
pub fn establish_far_base(t: &shmem::Tracking, frontier_ms: i64) {
    t.far_base_ms.store(frontier_ms, Ordering::Release);
}

/// Hold back a mark beyond [`far_limit`], found in database `db` (OID,
/// and its name for the log): remember it, stop minting in that
/// database alone (issue 55; in every database where more hold one than
/// [`shmem::HELD_DATABASES`]), and say so once per mark.
///
/// `restored`: the mark was written into a database whose backends may
/// be minting already (a restore): they read their marks again before
/// their next ID. A mark found by a read needs no such thing: every
/// backend reads its database's marks before its first ID.
fn hold_far_mark(
    t: &shmem::Tracking,
    state: &GeneratorState,
    mark_ms: i64,
    db: u32,
    name: &str,
    restored: bool,
) {
    let before = t.held.mark_of(db).unwrap_or(i64::MIN);
    if !t.held.hold(db, mark_ms) {
        // No slot: the database's own backends hold it (each reads its
        // marks before its first ID, and again at the epoch below); no
        // other database stops (the red-team review of issue 55).
        t.held_overflow.store(true, Ordering::Release);
    }
    state.blocked.fetch_or(HELD_SOMEWHERE, Ordering::AcqRel);
    if restored {
        t.held_epoch.fetch_add(1, Ordering::AcqRel);
    }
    if t.mark_far_ms.fetch_max(mark_ms, Ordering::AcqRel) < mark_ms {
        t.mark_far_db.store(db, Ordering::Release);
    }
    if before < mark_ms {
        let ahead_s = (mark_ms - SystemClock.wall_ns().div_euclid(1_000_000)) / 1000;
        errors::report(
            PgLogLevel::WARNING,
            PgSqlErrorCode::ERRCODE_WARNING,
            format!(
                "snowflake_id: high-water mark {} in database \"{name}\" is {ahead_s} s ahead of the clock; not applied, and no ID is handed out in that database until a superuser decides",
                format_epoch(mark_ms)
            ),
            Some(format!("A mark more than {} minutes ahead of the clock and of this server's IDs moves nothing by itself: a dump edited by hand, a row from an untrusted publisher, or a clock far behind since the mark was written. Other databases go on minting on the clock.", FAR_MS / 60_000)),
            Some(DECIDE_HINT),
        );
    }
}

/// What a superuser decides about a held mark.
const DECIDE_HINT: &str = "If the mark is right (the clock is behind the old server's IDs), apply it with SELECT snowflake_accept_configuration(); if not, discard it with SELECT snowflake_discard_high_water() in that database. Both as a superuser.";

/// A database holds no mark any more (discarded, dropped): the largest
/// held is the others', and with none left every call may take the fast
/// path again. Where more databases held marks than could be held one by
/// one, the server-wide stop stays until a superuser accepts.
fn after_release(t: &shmem::Tracking, state: &GeneratorState) {
    t.held_epoch.fetch_add(1, Ordering::AcqRel);
    if t.held_overflow.load(Ordering::Acquire) {
        // Holds outside the shared slots are known to their backends
        // only: the largest stays, and every call keeps asking.
        return;
    }
    t.mark_far_ms.store(
        t.held.largest().map_or(i64::MIN, |(_, m)| m),
        Ordering::Release,
    );
    lift_held_somewhere(t, state);
}

/// Clear [`HELD_SOMEWHERE`] if nothing is held, and set it again if a
/// hold came in meanwhile (a restore in another backend between the
/// look and the clear: the red-team review of issue 55).
fn lift_held_somewhere(t: &shmem::Tracking, state: &GeneratorState) {
    if !t.held.is_empty() || t.held_overflow.load(Ordering::Acquire) {
        return;
    }
    state.blocked.fetch_and(!HELD_SOMEWHERE, Ordering::AcqRel);
    if !t.held.is_empty() || t.held_overflow.load(Ordering::Acquire) {
        state.blocked.fetch_or(HELD_SOMEWHERE, Ordering::AcqRel);
    }
}

/// Nothing is held back any more: lift what [`hold_far_mark`] set.
fn release_all_holds(t: &shmem::Tracking, state: &GeneratorState) {
    t.held.clear();
    t.held_overflow.store(false, Ordering::Release);
    t.mark_far_ms.store(i64::MIN, Ordering::Release);
    t.held_epoch.fetch_add(1, Ordering::AcqRel);
    let _ = state
        .blocked
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
            Some(if b & BLOCKED_CODES == BLOCKED_FAR_MARK {
                b & !BLOCKED_CODES
            } else {
                b
            })
        });
    lift_held_somewhere(t, state);
}

/// Whether this backend's database holds a mark far ahead of the clock:
/// then nothing is minted here (the ERROR says which mark, and what a
/// superuser decides).
fn refuse_if_held_here(t: &shmem::Tracking, own: Option<i64>) {
    // SAFETY: reading this backend's database.
    let db = unsafe { pg_sys::MyDatabaseId }.to_u32();
    let Some(mark) = own.max(t.held.mark_of(db)) else {
        return;
    };
    let now = SystemClock.wall_ns().div_euclid(1_000_000);
    errors::far_mark_here(
        format!(
            "This database holds the high-water mark {}, {} s ahead of the clock, of this server's worker id and layout; a mark more than {} minutes ahead moves nothing by itself, and no ID is handed out below it here. Other databases go on minting on the clock.",
            format_epoch(mark),
            (mark - now) / 1000,
            FAR_MS / 60_000
        ),
        DECIDE_HINT,
    )
}

/// A held-back mark that the clock has come within [`FAR_MS`] of is an
/// ordinary mark now: apply the largest and lift every hold, as the
/// start-up read would have done had it found them now.
fn release_far_mark_in_reach(t: &shmem::Tracking, state: &GeneratorState, layout: &Layout) {
    let far = largest_held(t);
    let clock = SystemClock;
    if far == i64::MIN
        || far
            > far_limit(
                t,
                state.frontier_ms(layout, clock.wall_ns(), clock.mono_ns()),
            )
    {
        return;
    }
    state.raise_above(far, layout, clock.mono_ns());
    t.mark_found_ms.fetch_max(far, Ordering::AcqRel);
    release_all_holds(t, state);
    crate::mint::reservation::persist(state, layout, far);
    errors::report(
        PgLogLevel::LOG,
        PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
        format!(
            "snowflake_id: the held-back high-water mark {} is within {} minutes of the clock now; applied",
            format_epoch(far),
            FAR_MS / 60_000
        ),
        None,
        None,
    );
}

/// The largest mark held back anywhere (`i64::MIN`: none): the shared
/// slots', and the largest recorded, which also counts databases whose
/// backends hold their marks themselves.
fn largest_held(t: &shmem::Tracking) -> i64 {
    t.held
        .largest()
        .map_or(i64::MIN, |(_, m)| m)
        .max(t.mark_far_ms.load(Ordering::Acquire))
}

/// Apply every held-back mark (`snowflake_accept_configuration()`):
/// raise the generator above the largest and lift every hold. Returns the
/// mark applied; 22008 when it is at the layout's last millisecond.
pub fn apply_held_marks(state: &GeneratorState, layout: &Layout) -> Option<i64> {
    let t = shmem::tracking()?;
    let far = largest_held(t);
    if far == i64::MIN {
        return None;
    }
    if far >= layout.last_unix_ms() {
        errors::far_mark_exhausts(far, layout.last_unix_ms());
    }
    state.raise_above(far, layout, SystemClock.mono_ns());
    t.mark_found_ms.fetch_max(far, Ordering::AcqRel);
    release_all_holds(t, state);
    crate::mint::reservation::persist(state, layout, far);
    Some(far)
}

/// Whether some database holds a mark far ahead of the clock, and
/// whether it is this backend's (for `snowflake_stats()`).
pub fn held_marks() -> (bool, bool) {
    let Some(t) = shmem::tracking() else {
        return (false, false);
    };
    // SAFETY: reading this backend's database.
    let here = t.held.contains(unsafe { pg_sys::MyDatabaseId }.to_u32()) || gate::held_here();
    (
        !t.held.is_empty() || t.held_overflow.load(Ordering::Acquire),
        here,
    )
}

/// In the current database: whether the extension is installed at a
/// version without the high-water table (read from the catalog).
pub fn old_version_here() -> bool {
    // SAFETY: syscache lookups in a backend connected to a database.
    let installed =
        unsafe { pg_sys::get_extension_oid(c"snowflake_id".as_ptr(), true) != pg_sys::InvalidOid };
    installed && row::table_oid().is_none()
}

/// The current database's name, for the log.
fn database_name() -> String {
    // SAFETY: reading this backend's database and its name.
    unsafe {
        let p = pg_sys::get_database_name(pg_sys::MyDatabaseId);
        if p.is_null() {
            String::new()
        } else {
            std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    }
}

/// This database's mark: see the module documentation.
#[pg_extern(volatile, parallel_safe)]
pub fn snowflake_high_water() -> Option<TimestampWithTimeZone> {
    shmem::tracking()?;
    let layout = gucs::layout().ok()?;
    let worker = worker::current_worker_id()?;
    let oid = row::table_oid()?;
    if !may_read(oid) {
        errors::high_water_not_readable();
    }
    let row::Open::Opened(table) = row::Table::open(pg_sys::AccessShareLock) else {
        return None;
    };
    let (ms, _) = table.find(&key(&layout, worker))?;
    Some(crate::read::decode::from_unix_ms(ms))
}

/// Whether the current user may see this database's mark: the roles
/// that may read its table (issue 55: the function showed it to every
/// role that could connect), and members of `pg_read_all_stats`.
fn may_read(table: pg_sys::Oid) -> bool {
    // SAFETY: ACL and role-membership checks of the current user.
    unsafe {
        let me = pg_sys::GetUserId();
        pg_sys::pg_class_aclcheck(table, me, pg_sys::ACL_SELECT as _)
            == pg_sys::AclResult::ACLCHECK_OK
            || pg_sys::has_privs_of_role(me, pg_sys::Oid::from(pg_sys::ROLE_PG_READ_ALL_STATS))
    }
}

/// Superuser only. Discard the high-water mark this database holds back
/// as far ahead of the clock: lower it, in place, to 5 s beyond this
/// server's generator, and mint here again on the clock. The decision
/// for a mark that is wrong (a dump edited by hand, a row from an
/// untrusted publisher); a mark that is right is applied with
/// `snowflake_accept_configuration()` instead. Returns the mark now,
/// NULL where this database holds no mark of this server's
/// configuration. EXECUTE is revoked from PUBLIC.
///
/// ```sql
/// SELECT snowflake_discard_high_water();
/// ```
#[pg_extern(volatile, parallel_unsafe)]
pub fn snowflake_discard_high_water() -> Option<TimestampWithTimeZone> {
    // SAFETY: plain catalog check of the current user.
    if !unsafe { pg_sys::superuser() } {
        errors::must_be_superuser("discard a snowflake_id high-water mark");
    }
    let (Some(t), Some(state), Ok(layout)) = (marks(), shmem::state(), gucs::layout()) else {
        return None;
    };
    crate::mint::nextval::refuse_during_recovery();
    let worker = worker::current_worker_id()?;
    let key = key(&layout, worker);
    let table = match row::Table::open(pg_sys::RowExclusiveLock) {
        row::Open::Opened(table) => table,
        row::Open::Missing => return None,
        row::Open::Locked => errors::high_water_locked_here(),
    };
    let clock = SystemClock;
    let limit = far_limit(
        t,
        state.frontier_ms(&layout, clock.wall_ns(), clock.mono_ns()),
    );
    let target = next_target(t, state, &layout, i64::MIN);
    let stamp = t.started_at.load(Ordering::Acquire);
    let mut discarded = vec![];
    let mut kept = i64::MIN;
    let mut kept_below: Option<i64> = None;
    for (mark, tid) in table.rows(&key) {
        if mark > limit {
            table.lower(tid, &key, target, stamp);
            discarded.push(mark);
            kept = kept.max(target);
        } else {
            kept = kept.max(mark);
            kept_below = kept_below.max(Some(mark));
        }
    }
    drop(table);
    // SAFETY: reading this backend's database.
    let db = unsafe { pg_sys::MyDatabaseId }.to_u32();
    t.held.release(db);
    after_release(t, state);
    // The rows it kept are this database's marks from before (issue 62:
    // a start-up read that met the far row saw no other): applied now.
    if let Some(below) = kept_below {
        apply_found(t, state, &layout, below, db, &database_name());
    }
    // Every row of this database was read and decided here.
    t.lagging.remove(db);
    crate::mint::reservation::persist(state, &layout, i64::MIN);
    bound::forget();
    for mark in &discarded {
        errors::report(
            PgLogLevel::LOG,
            PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
            format!(
                "snowflake_id: the high-water mark {} of database \"{}\" was discarded by a superuser; lowered to {}",
                format_epoch(*mark),
                database_name(),
                format_epoch(target)
            ),
            None,
            None,
        );
    }
    (kept != i64::MIN).then(|| crate::read::decode::from_unix_ms(kept))
}

/// The trigger on `snowflake_id_internal.snowflake_high_water` for UPDATE,
/// DELETE and TRUNCATE, by anyone (issue 55): only snowflake_id writes
/// its marks. An UPDATE held open would take the in-place raises made
/// meanwhile with the old row version, and a DELETE would leave the
/// database's IDs uncovered. Fired ALWAYS, so that
/// `session_replication_role` does not turn it off; a superuser who
/// disables it still meets the writer's own check of the row
/// (`row::Table::raise`: minting stops here while the change is open).
#[pg_trigger]
fn snowflake_high_water_guard<'a>(
    trigger: &'a PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, AllocatedByPostgres>>, PgHeapTupleError> {
    let what = match trigger.op() {
        Ok(PgTriggerOperation::Update) => "update",
        Ok(PgTriggerOperation::Delete) => "delete from",
        Ok(PgTriggerOperation::Truncate) => "truncate",
        _ => return Ok(None),
    };
    errors::high_water_by_hand(what)
}

/// Raise this database's mark now: see the module documentation.
#[pg_extern(volatile, parallel_unsafe)]
pub fn snowflake_write_high_water() -> Option<TimestampWithTimeZone> {
    // SAFETY: plain catalog check of the current user.
    if !unsafe { pg_sys::superuser() } {
        errors::must_be_superuser("write the snowflake_id high-water mark");
    }
    let (Some(t), Some(state), Ok(layout)) = (marks(), shmem::state(), gucs::layout()) else {
        return None;
    };
    let worker = worker::current_worker_id()?;
    if shmem::in_recovery() || shmem::binary_upgrade() {
        return None;
    }
    let key = key(&layout, worker);
    let table = match row::Table::open(pg_sys::RowExclusiveLock) {
        row::Open::Opened(table) => table,
        row::Open::Missing => return None,
        row::Open::Locked => errors::high_water_locked_here(),
    };
    let target = next_target(t, state, &layout, i64::MIN);
    let stamp = t.started_at.load(Ordering::Acquire);
    let ms = table.raise_or_insert(&key, target, stamp).unwrap_or(target);
    // This backend's next ID looks at the mark again.
    bound::forget();
    Some(crate::read::decode::from_unix_ms(ms))
}

/// The trigger on `snowflake_id_internal.snowflake_high_water`, for every
/// row written by SQL: a mark of this server's configuration (a restore
/// of a dump, a superuser's INSERT) raises the generator above it at
/// once. A C
/// function, bound by OID when the trigger was created: no name is looked
/// up when it fires (a schema renamed and replaced by its owner cannot
/// put her function there). It acts only for its own table, and only
/// for a superuser's write (only superusers can write the table).
#[pg_trigger]
fn snowflake_high_water_restored<'a>(
    trigger: &'a PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, AllocatedByPostgres>>, PgHeapTupleError> {
    // SAFETY: reading the trigger's relation and the current user.
    let (own_table, superuser) = unsafe {
        let rel = trigger.relation().map(|r| r.oid()).ok();
        let ns = rel.map(|r| pg_sys::get_rel_namespace(r));
        let nsname = ns.map(|n| pg_sys::get_namespace_name(n));
        let own = nsname.is_some_and(|p| {
            !p.is_null() && std::ffi::CStr::from_ptr(p) == c"snowflake_id_internal"
        }) && rel.is_some_and(|r| {
            let name = pg_sys::get_rel_name(r);
            !name.is_null() && std::ffi::CStr::from_ptr(name) == c"snowflake_high_water"
        });
        (own, pg_sys::superuser())
    };
    if !own_table || !superuser {
        return Ok(None);
    }
    if let Some(new) = trigger.new() {
        let get = |name: &str| new.get_by_name::<i64>(name).ok().flatten();
        let get32 = |name: &str| new.get_by_name::<i32>(name).ok().flatten();
        if let (Some(w), Some(e), Some(wb), Some(sb), Some(m)) = (
            get32("worker_id"),
            get("epoch_ms"),
            get32("worker_bits"),
            get32("sequence_bits"),
            get("mark_ms"),
        ) {
            raise_for_restored(w, e, wb, sb, m);
        }
    }
    Ok(None)
}

/// See [`snowflake_high_water_restored`]: raise the generator above a
/// mark of this server's configuration written by SQL.
fn raise_for_restored(
    worker_id: i32,
    epoch_ms: i64,
    worker_bits: i32,
    sequence_bits: i32,
    mark_ms: i64,
) {
    let (Some(t), Some(state), Ok(layout), Some(worker)) = (
        shmem::tracking(),
        shmem::state(),
        gucs::layout(),
        worker::current_worker_id(),
    ) else {
        return;
    };
    let ours = worker_id as i64 == worker as i64
        && epoch_ms == layout.epoch_ms()
        && worker_bits as u32 == layout.worker_bits()
        && sequence_bits as u32 == layout.sequence_bits();
    // Every write that fires this trigger is a superuser's SQL (a restore,
    // a hand edit): the extension's own writes go through `row` and fire
    // none. Raising above a mark below the generator changes nothing.
    if !ours || shmem::in_recovery() {
        return;
    }
    let clock = SystemClock;
    let frontier = state.frontier_ms(&layout, clock.wall_ns(), clock.mono_ns());
    if mark_ms > far_limit(t, frontier) {
        // SAFETY: reading this backend's database and its name.
        let (db, name) = unsafe {
            let db = pg_sys::MyDatabaseId;
            let p = pg_sys::get_database_name(db);
            let name = if p.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
            };
            (db.to_u32(), name)
        };
        hold_far_mark(t, state, mark_ms, db, &name, true);
        crate::mint::reservation::persist(state, &layout, i64::MIN);
        return;
    }
    state.raise_above(mark_ms, &layout, SystemClock.mono_ns());
    t.mark_found_ms.fetch_max(mark_ms, Ordering::AcqRel);
    crate::mint::reservation::persist(state, &layout, mark_ms);
    errors::report(
        PgLogLevel::LOG,
        PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
        format!(
            "snowflake_id: generator raised above a high-water mark {} written into this database",
            format_epoch(mark_ms)
        ),
        None,
        None,
    );
}

extension_sql_file!(
    "sql/high_water.sql",
    name = "high_water",
    requires = [
        snowflake_write_high_water,
        snowflake_high_water_restored,
        snowflake_high_water_guard,
        snowflake_discard_high_water
    ]
);
