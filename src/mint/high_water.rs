//! The high-water mark: a server-wide bound on every ID this server may
//! have handed out, kept in a WAL-logged table of the extension in every
//! database that has it (`snowflake_high_water`, see
//! `src/mint/sql/high_water.sql`), so that whatever carries a database carries
//! it: crash recovery, base backups and PITR, standbys, every `pg_upgrade`
//! mode, and `pg_dump` of any one database.
//!
//! - **Rounds.** The launcher (a background worker connected to no
//!   database, `crate::mint::bgworker`) lists the databases and, one at a time,
//!   starts a short-lived writer in each. The writer reads the largest mark
//!   of this server's configuration (worker id and layout) and raises the
//!   rows of that configuration to the round's target, [`AHEAD_MS`] beyond
//!   the generator's frontier, in one committed transaction (flushed and
//!   waited for by synchronous standbys like any commit). Only when every
//!   database that has the extension has committed does the launcher
//!   publish the target.
//! - **The invariant.** No reservation passes the published mark
//!   (`crate::mint::reservation`): every ID this server handed out, stored or
//!   not, is below the mark in every database. A round runs when the
//!   frontier comes within [`ROUND_BELOW_PERCENT`] % of [`AHEAD_MS`] of the mark while IDs are
//!   being minted, or when a caller needs it; an idle server writes
//!   nothing. Rounds leave out, for [`RECHECK_WITHOUT`], the databases
//!   found without the extension's table (an install or upgrade anywhere
//!   brings them back at once), and when rounds are slow (many
//!   databases), the mark runs further ahead: three times as far as the
//!   last round took.
//! - **Start-up, crash restart, promotion.** Generation waits
//!   ([`ensure_ready`], at most [`WAIT_MS`], then 55000) for the first
//!   round, which raises the generator above the largest mark any
//!   database holds for this configuration. So after `pg_upgrade`, a lost
//!   or stale state file, or a restore, the first ID is above every ID the
//!   old server handed out. After a restart, IDs continue at most
//!   [`AHEAD_MS`] plus the reservation window ahead of the last one.
//! - **Later rounds** raise the generator above a mark they did not write
//!   (one above the published mark: a dump restored into this server).
//! - **Scope.** A row of another worker id or another layout never moves
//!   this server: a dump restored into a server with its own worker id,
//!   and a subscriber of a `FOR ALL TABLES` publication, keep their own
//!   clocks. Only a superuser can write the table; no role can own an
//!   index, trigger, rule or policy on it, and it is read through the
//!   catalog with every operator qualified.
//!
//! ## `snowflake_high_water() → timestamptz`
//!
//! The published high-water mark: no ID this server handed out carries a
//! later time. NULL until the first round since start-up, and where the
//! library is not preloaded. VOLATILE, PARALLEL SAFE.
//!
//! ```sql
//! SELECT snowflake_high_water();
//! ```
//!
//! ## `snowflake_write_high_water() → timestamptz`
//!
//! Superuser only. Writes the published mark into this database's table
//! now, in the caller's transaction, rather than at the next round; the
//! install and upgrade scripts call it. Returns the mark written, or NULL
//! when there is none yet.
//!
//! ```sql
//! SELECT snowflake_write_high_water();
//! ```

use crate::mint::lease;
use crate::mint::shmem;
use crate::{errors, gucs};
use pgrx::bgworkers::BackgroundWorkerStatus;
use pgrx::prelude::*;
use pgrx::{pg_sys, PgLogLevel, PgSqlErrorCode};
use snowflake_id_core::{format_epoch, Clock, GeneratorState, Layout, SystemClock};
use std::sync::atomic::{AtomicBool, Ordering};

/// How far beyond the generator's frontier a round raises the mark, at
/// least: three times as far as the last round took, when rounds are
/// slower than that (many databases), so that minting never waits for
/// them.
pub const AHEAD_MS: i64 = 5_000;
/// A round runs when less than this share (in %) of the distance it
/// raises the mark by is left between the frontier and the mark (and IDs
/// were minted within [`ACTIVE_MS`]): 3.5 s of the 5 s, more than the
/// reservation window (2 s), so a renewal rarely waits for a round.
pub const ROUND_BELOW_PERCENT: i64 = 70;
/// A database found without the extension's table is visited again after
/// this long, or at once after a `CREATE EXTENSION` or an upgrade
/// anywhere (`snowflake_write_high_water()` asks for it).
pub const RECHECK_WITHOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// Rounds run while an ID was issued within this many ms.
pub const ACTIVE_MS: i64 = 10_000;
/// How long a caller waits for a round before 55000.
pub const WAIT_MS: i64 = 20_000;
/// A mark more than this far ahead of both the clock and the generator
/// moves nothing by itself (issue 46): one number edited in a dump, or
/// a row from an untrusted publisher, could otherwise move every ID of
/// the server days ahead, or exhaust the layout. It is held back
/// ([`hold_far_mark`]), generation stops with 55000 (a lower ID could
/// repeat one the mark covers), and `snowflake_accept_configuration()`
/// applies it.
pub const FAR_MS: i64 = 600_000;
/// `GeneratorState::blocked` code (within [`BLOCKED_CODES`], beside the
/// state file's): a far mark is held back.
pub const BLOCKED_FAR_MARK: u64 = 4;
/// The bits of `GeneratorState::blocked` that hold one code, as
/// `reservation::BLOCKED_MASK` (which imports this module; it asserts the
/// two are equal).
pub const BLOCKED_CODES: u64 = 0xFF;

/// A flag in `GeneratorState::blocked` (above `reservation::BLOCKED_MASK`):
/// some database lags behind the mark, and calls check whether theirs does.
pub const LAGGING_FLAG: u64 = 0x100;

/// How long a call in a lagging database waits for a round to write its
/// mark before 55000.
pub const LAG_WAIT_MS: i64 = 2_000;
/// How long the launcher waits for one writer before it stops it and
/// counts its database as lagging.
pub const WRITER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
/// A database whose writer failed is tried again after this long (it
/// hands out no ID meanwhile), so that one slow database cannot make
/// every round slow.
pub const RETRY_LAGGING: std::time::Duration = std::time::Duration::from_secs(10);

/// What a writer tells its launcher (`shmem::Tracking::writer_status`).
pub const WRITER_NONE: u32 = 0;
pub const WRITER_WRITTEN: u32 = 1;
pub const WRITER_NO_TABLE: u32 = 2;
/// No table, but the extension at a version without it (0.7.0 or
/// older): the database's owner did not run `ALTER EXTENSION … UPDATE`.
pub const WRITER_OLD_VERSION: u32 = 3;

const TABLE_SQL: &str = include_str!("sql/high_water_table.sql");
const READ_SQL: &str = include_str!("sql/high_water_read.sql");
const WRITE_SQL: &str = include_str!("sql/high_water_write.sql");

/// What the launcher remembers between rounds (process-local).
#[derive(Default)]
struct LauncherMemory {
    /// A failed round is retried no sooner than this.
    retry_after: Option<std::time::Instant>,
    /// How long the last published round took, in ms.
    last_round_ms: i64,
    /// Databases found without the extension's table, and until when
    /// rounds leave them out.
    without: std::collections::HashMap<u32, std::time::Instant>,
    /// Databases whose writer failed, and when rounds try them again.
    retry_lagging: std::collections::HashMap<u32, std::time::Instant>,
    /// Databases found with the extension at a version before 0.8.0,
    /// each named once in the log.
    old_version: std::collections::HashSet<u32>,
}

thread_local! {
    static MEMORY: std::cell::RefCell<LauncherMemory> = std::cell::RefCell::new(LauncherMemory::default());
}

/// How far a round raises the mark beyond the frontier (see [`AHEAD_MS`]),
/// never more than half of [`FAR_MS`]: the server's own mark is never one
/// it would hold back after a restart, however slow rounds get.
fn ahead_ms() -> i64 {
    MEMORY.with(|m| {
        AHEAD_MS
            .max(m.borrow().last_round_ms.saturating_mul(3))
            .min(FAR_MS / 2)
    })
}

/// Set once this backend has seen the first round done.
static READY: AtomicBool = AtomicBool::new(false);

/// Before this backend's first ID: wait until the first round since
/// start-up has raised the generator above every database's mark.
#[inline(always)]
pub fn ensure_ready() {
    if !ready() {
        wait_ready();
    }
}

/// Whether this backend has seen the first round done (it may mint
/// without waiting for one).
#[inline(always)]
pub fn ready() -> bool {
    READY.load(Ordering::Relaxed)
}

#[cold]
#[inline(never)]
fn wait_ready() {
    let Some(t) = marks() else {
        // Nothing to wait for (not preloaded, or a single-user backend).
        READY.store(true, Ordering::Relaxed);
        return;
    };
    wait_for_round(
        t,
        || t.mark_ready.load(Ordering::Acquire),
        "The high-water mark has not been read since start-up",
    );
    READY.store(true, Ordering::Relaxed);
}

/// The published mark: no reservation may pass it. `i64::MAX` where the
/// library is not preloaded (nothing is reserved then).
pub fn cap_ms() -> i64 {
    marks().map_or(i64::MAX, |t| t.mark_ms.load(Ordering::Acquire))
}

/// The shared mark, where there is one to keep: preloaded, and under a
/// postmaster. A single-user backend (`postgres --single`) starts no
/// background worker: there the mark is neither read nor written, and
/// only the state file and the WAL cover its IDs (docs/operations.md).
fn marks() -> Option<&'static shmem::Tracking> {
    // SAFETY: reading a plain global flag of this process.
    if unsafe { pg_sys::IsUnderPostmaster } {
        shmem::tracking()
    } else {
        None
    }
}

/// Wait until the published mark reaches `ms` (a round runs for it), at
/// most [`WAIT_MS`]; then 55000.
pub fn wait_for_mark(ms: i64) {
    let Some(t) = marks() else { return };
    wait_for_round(
        t,
        || t.mark_ready.load(Ordering::Acquire) && t.mark_ms.load(Ordering::Acquire) >= ms,
        "The high-water mark could not be raised in every database",
    );
}

/// Wait up to [`WAIT_MS`] until `done()`, waking the launcher while it is
/// not; then 55000 saying `what`.
fn wait_for_round(t: &shmem::Tracking, done: impl Fn() -> bool, what: &str) {
    let ok = shmem::wait_until(WAIT_MS, || {
        let d = done();
        if !d {
            wake_launcher(t);
        }
        d
    });
    if !ok {
        unavailable(t, what);
    }
}

fn wake_launcher(t: &shmem::Tracking) {
    if !t.mark_wanted.swap(true, Ordering::AcqRel) {
        let latch = t.launcher_latch.load(Ordering::Acquire);
        if latch != 0 {
            // SAFETY: the launcher's latch is in its PGPROC (shared
            // memory); SetLatch on a latch whose owner exited is harmless.
            unsafe { pg_sys::SetLatch(latch as *mut pg_sys::Latch) };
        }
    }
}

fn unavailable(t: &shmem::Tracking, what: &str) -> ! {
    let failed = t.mark_failed_db.load(Ordering::Acquire);
    let detail = if failed != 0 {
        format!("{what}; the last round could not write it in the database with OID {failed}.")
    } else if t.launcher_latch.load(Ordering::Acquire) == 0 {
        format!("{what}; the snowflake_id high-water launcher is not running.")
    } else {
        format!("{what} within {} s.", WAIT_MS / 1000)
    };
    errors::high_water_unavailable(detail)
}

/// The largest mark applied by itself: [`FAR_MS`] beyond the later of
/// the clock and the generator's frontier (a server whose IDs run ahead
/// after a restart with its clock behind keeps its own marks).
fn far_limit(frontier_ms: i64) -> i64 {
    SystemClock
        .wall_ns()
        .div_euclid(1_000_000)
        .max(frontier_ms)
        .saturating_add(FAR_MS)
}

/// Hold back a mark beyond [`far_limit`], found in database `db` (OID,
/// and its name for the log): remember it, stop generation
/// (`BLOCKED_FAR_MARK`, unless something else already stopped it), and
/// say so once per mark.
fn hold_far_mark(t: &shmem::Tracking, state: &GeneratorState, mark_ms: i64, db: u32, name: &str) {
    let before = t.mark_far_ms.fetch_max(mark_ms, Ordering::AcqRel);
    if before < mark_ms {
        t.mark_far_db.store(db, Ordering::Release);
    }
    let _ = state
        .blocked
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
            (b & BLOCKED_CODES == 0).then_some(b | BLOCKED_FAR_MARK)
        });
    if before < mark_ms {
        let ahead_s = (mark_ms - SystemClock.wall_ns().div_euclid(1_000_000)) / 1000;
        errors::report(
            PgLogLevel::WARNING,
            PgSqlErrorCode::ERRCODE_WARNING,
            format!(
                "snowflake_id: high-water mark {} in database \"{name}\" is {ahead_s} s ahead of the clock; not applied, and no ID is handed out until a superuser decides",
                format_epoch(mark_ms)
            ),
            Some(format!("A mark more than {} minutes ahead of the clock and of this server's IDs moves nothing by itself: a dump edited by hand, a row from an untrusted publisher, or a clock far behind since the mark was written.", FAR_MS / 60_000)),
            Some("If the mark is right (the clock is behind the old server's IDs), apply it with SELECT snowflake_accept_configuration() as a superuser; if not, delete its row from snowflake_id_internal.snowflake_high_water in that database and restart."),
        );
    }
}

/// A held-back mark that the clock has come within [`FAR_MS`] of is an
/// ordinary mark now: apply it and lift the hold, as a round would have
/// done had it found the mark now.
fn release_far_mark_in_reach(t: &shmem::Tracking, state: &GeneratorState, layout: &Layout) {
    let far = t.mark_far_ms.load(Ordering::Acquire);
    let clock = SystemClock;
    if far == i64::MIN
        || far > far_limit(state.frontier_ms(layout, clock.wall_ns(), clock.mono_ns()))
    {
        return;
    }
    state.raise_above(far, layout, clock.mono_ns());
    t.mark_found_ms.fetch_max(far, Ordering::AcqRel);
    t.mark_far_ms.store(i64::MIN, Ordering::Release);
    let _ = state
        .blocked
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
            (b & BLOCKED_CODES == BLOCKED_FAR_MARK).then_some(b & !BLOCKED_CODES)
        });
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

/// The launcher: make a round when one is due. Returns whether a round
/// ran and was published.
pub fn launcher_tick(state: &GeneratorState, layout: &Layout) -> bool {
    let Some(t) = shmem::tracking() else {
        return false;
    };
    if lease::current_worker_id().is_none() {
        return false;
    }
    let clock = SystemClock;
    let (wall, mono) = (clock.wall_ns(), clock.mono_ns());
    let frontier = state.frontier_ms(layout, wall, mono);
    let last_ms = state
        .last_issued()
        .map(|id| layout.epoch_ms() + layout.timestamp_of(id as u64) as i64)
        .unwrap_or(i64::MIN);
    let active = last_ms >= wall.div_euclid(1_000_000) - ACTIVE_MS;
    let mark = t.mark_ms.load(Ordering::Acquire);
    let due = !t.mark_ready.load(Ordering::Acquire)
        || t.mark_wanted.load(Ordering::Acquire)
        || (active && mark.saturating_sub(frontier) < ahead_ms() * ROUND_BELOW_PERCENT / 100);
    let now = std::time::Instant::now();
    if !due || MEMORY.with(|m| m.borrow().retry_after.is_some_and(|at| now < at)) {
        return false;
    }
    // Two passes at most: a first round that finds a higher mark raises
    // the generator, and the second writes a target above it.
    for _ in 0..2 {
        match round(t, state, layout) {
            Round::Published => {
                t.mark_wanted.store(false, Ordering::Release);
                shmem::wake_waiters();
                let took = now.elapsed().as_millis() as i64;
                MEMORY.with(|m| m.borrow_mut().last_round_ms = took);
                return true;
            }
            Round::Raised => continue,
            Round::Failed => {
                MEMORY.with(|m| {
                    m.borrow_mut().retry_after =
                        Some(std::time::Instant::now() + std::time::Duration::from_secs(1))
                });
                return false;
            }
        }
    }
    false
}

enum Round {
    Published,
    Raised,
    Failed,
}

/// A database the launcher writes into.
struct Database {
    oid: pg_sys::Oid,
    name: String,
    /// `ALLOW_CONNECTIONS false`: no writer can connect, so sessions
    /// still in it may mint nothing (issue 46, item 6).
    closed: bool,
}

fn round(t: &shmem::Tracking, state: &GeneratorState, layout: &Layout) -> Round {
    let clock = SystemClock;
    release_far_mark_in_reach(t, state, layout);
    let frontier = state.frontier_ms(layout, clock.wall_ns(), clock.mono_ns());
    let published = t.mark_ms.load(Ordering::Acquire);
    let target = frontier
        .saturating_add(ahead_ms())
        .min(layout.last_unix_ms())
        .max(published);
    // Databases known to lack the table are left out for a while, unless
    // an install or upgrade asked for all of them.
    let rescan = t.mark_rescan.swap(false, Ordering::AcqRel);
    let now = std::time::Instant::now();
    let skip: Vec<u32> = MEMORY.with(|m| {
        let mut m = m.borrow_mut();
        if rescan {
            m.without.clear();
        }
        m.without.retain(|_, until| *until > now);
        m.retry_lagging.retain(|_, until| *until > now);
        m.without
            .keys()
            .chain(m.retry_lagging.keys())
            .copied()
            .collect()
    });
    let dbs = databases();
    // Whatever this round writes is this server's own mark from now on,
    // even where the round fails half-way.
    let own = t.mark_tried_ms.fetch_max(target, Ordering::AcqRel);
    let mut found = i64::MIN;
    let mut found_in = String::new();
    let mut found_db = 0u32;
    // Forget databases that lagged and are gone.
    for v in t.lagging.oids() {
        if !dbs.iter().any(|d| d.oid.to_u32() == v) {
            unmark_lagging(t, v);
        }
    }
    for db in dbs.iter().filter(|d| d.closed) {
        // A closed database's sessions (opened before ALLOW_CONNECTIONS
        // false) would mint above a mark no writer can raise there: they
        // mint nothing until it opens again. Without sessions there is
        // nothing to stop, and nothing to write.
        // SAFETY: a read of the shared process array.
        if unsafe { pg_sys::CountDBBackends(db.oid) } > 0 {
            mark_lagging(t, db.oid.to_u32());
        } else {
            unmark_lagging(t, db.oid.to_u32());
        }
    }
    // Lagging databases first (one created while the last round ran, a
    // new tenant, say): each hands out IDs again as soon as its writer
    // commits, not only when the round is done.
    let mut order: Vec<&Database> = dbs
        .iter()
        .filter(|d| !d.closed && !skip.contains(&d.oid.to_u32()))
        .collect();
    order.sort_by_key(|d| !t.lagging.contains(d.oid.to_u32()));
    for db in order {
        let written = if database_locked(db.oid) {
            Err(WriteFail::InDatabase)
        } else {
            write_in(db.oid, target)
        };
        match written {
            Ok((WRITER_OLD_VERSION, _)) => {
                unmark_lagging(t, db.oid.to_u32());
                MEMORY.with(|m| {
                    let mut m = m.borrow_mut();
                    m.without.insert(db.oid.to_u32(), now + RECHECK_WITHOUT);
                    if m.old_version.insert(db.oid.to_u32()) {
                        errors::report(
                            PgLogLevel::WARNING,
                            PgSqlErrorCode::ERRCODE_WARNING,
                            format!(
                                "snowflake_id: database \"{}\" has the extension at a version before 0.8.0: it holds no high-water mark, and a dump of it carries none",
                                db.name
                            ),
                            Some("Its IDs are covered by the state file and the WAL only, not by pg_upgrade or pg_dump of that database.".into()),
                            Some("Run ALTER EXTENSION snowflake_id UPDATE in that database."),
                        );
                    }
                })
            }
            Ok((WRITER_NO_TABLE, _)) => {
                unmark_lagging(t, db.oid.to_u32());
                MEMORY.with(|m| {
                    m.borrow_mut()
                        .without
                        .insert(db.oid.to_u32(), now + RECHECK_WITHOUT);
                })
            }
            Ok((_, f)) => {
                unmark_lagging(t, db.oid.to_u32());
                if f > found {
                    found = f;
                    found_in.clone_from(&db.name);
                    found_db = db.oid.to_u32();
                }
            }
            Err(WriteFail::InDatabase) if mark_lagging(t, db.oid.to_u32()) => {
                // This database alone stops handing out IDs; the rest go on.
                MEMORY.with(|m| {
                    m.borrow_mut()
                        .retry_lagging
                        .insert(db.oid.to_u32(), now + RETRY_LAGGING);
                });
                t.mark_failed_db.store(db.oid.to_u32(), Ordering::Release);
                errors::report(
                    PgLogLevel::WARNING,
                    PgSqlErrorCode::ERRCODE_WARNING,
                    format!(
                        "snowflake_id: could not write the high-water mark in database \"{}\"; no ID is handed out there until it can",
                        db.name
                    ),
                    Some("Other databases go on. A dump of this database carries the mark it held when its writer last succeeded.".into()),
                    Some("See the error of the \"snowflake_id high-water writer\" above in the server log: a lock held on snowflake_id_internal.snowflake_high_water, say."),
                );
            }
            Err(why) => {
                let what = match why {
                    WriteFail::Start => "no background worker slot was free (max_worker_processes)",
                    WriteFail::InDatabase => "too many databases lag behind it already",
                };
                errors::report(
                    PgLogLevel::WARNING,
                    PgSqlErrorCode::ERRCODE_WARNING,
                    format!(
                        "snowflake_id: could not write the high-water mark in database \"{}\": {what}",
                        db.name
                    ),
                    Some("No reservation passes a mark until every database that has the extension holds it; snowflake_nextval() waits, then fails with SQLSTATE 55000.".into()),
                    Some("Keep max_worker_processes above what parallel queries and other workers use (docs/operations.md)."),
                );
                return Round::Failed;
            }
        }
    }
    // A database created meanwhile (from a template that has the
    // extension) may hold an older mark: it mints nothing until the next
    // round writes it, and the others go on (in 0.8.0 as first written
    // the whole round failed, so creating databases stopped minting
    // everywhere: issue 46). One dropped meanwhile is forgotten next
    // round.
    for db in databases() {
        if !db.closed && !dbs.iter().any(|d| d.oid == db.oid) && !mark_lagging(t, db.oid.to_u32()) {
            return Round::Failed;
        }
    }
    t.mark_failed_db.store(0, Ordering::Release);
    let ready = t.mark_ready.load(Ordering::Acquire);
    // A mark this server did not write since start-up (its own are at
    // most the largest target an earlier round tried; the writers read
    // before they write): at start-up every mark found, later a restore.
    let not_ours = found > own && found >= frontier;
    if not_ours && found > far_limit(frontier) {
        hold_far_mark(t, state, found, found_db, &found_in);
    } else if not_ours {
        state.raise_above(found, layout, clock.mono_ns());
        errors::report(
            PgLogLevel::LOG,
            PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
            format!(
                "snowflake_id: generator raised above the high-water mark {} found in database \"{found_in}\"",
                format_epoch(found)
            ),
            None,
            None,
        );
        t.mark_ms.fetch_max(target, Ordering::AcqRel);
        t.mark_found_ms.fetch_max(found, Ordering::AcqRel);
        return Round::Raised;
    }
    t.mark_ms.fetch_max(target, Ordering::AcqRel);
    if !ready {
        t.mark_found_ms.fetch_max(found, Ordering::AcqRel);
    }
    t.mark_ready.store(true, Ordering::Release);
    Round::Published
}

/// Every valid database, read from `pg_database` (a shared catalog) by
/// the launcher, which is connected to none; `closed` where a writer
/// cannot connect.
fn databases() -> Vec<Database> {
    let mut out = vec![];
    // SAFETY: the sequence autovacuum's launcher uses to list databases
    // (get_database_list): a transaction, a snapshot, a catalog scan; the
    // tuples' structs are pg_database rows while the scan holds them, and
    // their fields are copied out before the transaction ends.
    unsafe {
        pg_sys::StartTransactionCommand();
        pg_sys::GetTransactionSnapshot();
        let rel = pg_sys::table_open(pg_sys::DatabaseRelationId, pg_sys::AccessShareLock as _);
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
                    closed: !(*form).datallowconn,
                });
            }
        }
        pg_sys::table_endscan(scan);
        pg_sys::table_close(rel, pg_sys::AccessShareLock as _);
        pg_sys::CommitTransactionCommand();
    }
    out.sort_by_key(|d| d.oid.to_u32());
    out
}

/// Why a writer did not write.
enum WriteFail {
    /// It could not be started (no background worker slot free): nothing
    /// to do with its database.
    Start,
    /// It ran in its database and failed there.
    InDatabase,
}

/// The launcher's wait while it polls a writer: 10 ms on its latch (the
/// postmaster sets it when a writer it was told about stops), then any
/// pending interrupt.
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

/// Start a writer in database `db` for `target` and wait for it. Returns
/// its status and the largest mark it read.
fn write_in(db: pg_sys::Oid, target: i64) -> Result<(u32, i64), WriteFail> {
    let Some(t) = shmem::tracking() else {
        return Err(WriteFail::Start);
    };
    t.writer_status.store(WRITER_NONE, Ordering::Release);
    t.writer_found_ms.store(i64::MIN, Ordering::Release);
    // SAFETY: reading this process's pid.
    let me = unsafe { pg_sys::MyProcPid };
    // No free background worker slot (parallel queries take them and
    // give them back): try again every 10 ms for WRITER_TIMEOUT.
    let started = std::time::Instant::now();
    let handle = loop {
        let built = pgrx::bgworkers::BackgroundWorkerBuilder::new("snowflake_id high-water writer")
            .set_type("snowflake_id high-water writer")
            .set_library("snowflake_id")
            .set_function("snowflake_id_high_water_writer_main")
            .enable_spi_access()
            .set_argument(Some(pg_sys::Datum::from(db)))
            .set_extra(&target.to_string())
            .set_notify_pid(me)
            .set_restart_time(None)
            .load_dynamic();
        match built {
            Ok(h) => break h,
            Err(_) if started.elapsed() > WRITER_TIMEOUT => return Err(WriteFail::Start),
            Err(_) => nap(),
        }
    };
    // A writer can wait where no setting bounds it (connecting to a
    // database that a CREATE or DROP DATABASE holds, say): give it
    // WRITER_TIMEOUT, then stop it and count its database as lagging.
    let started = std::time::Instant::now();
    loop {
        match handle.pid() {
            Err(BackgroundWorkerStatus::Stopped) => break,
            Err(BackgroundWorkerStatus::PostmasterDied) => return Err(WriteFail::Start),
            _ if started.elapsed() > WRITER_TIMEOUT => {
                let _ = handle.terminate().wait_for_shutdown();
                return Err(WriteFail::InDatabase);
            }
            _ => nap(),
        }
    }
    match t.writer_status.load(Ordering::Acquire) {
        WRITER_NONE => Err(WriteFail::InDatabase),
        s => Ok((s, t.writer_found_ms.load(Ordering::Acquire))),
    }
}

/// Record that database `db` lags behind the mark: no ID is handed out
/// in it ([`refuse_if_this_database_lags`]) until its writer succeeds.
/// Returns false when there is no room to record it.
fn mark_lagging(t: &shmem::Tracking, db: u32) -> bool {
    let recorded = t.lagging.insert(db);
    if recorded {
        if let Some(st) = shmem::state() {
            st.blocked.fetch_or(LAGGING_FLAG, Ordering::AcqRel);
        }
    }
    recorded
}

/// Database `db` holds the mark again (or is gone): forget that it lagged.
fn unmark_lagging(t: &shmem::Tracking, db: u32) {
    t.lagging.remove(db);
    if t.lagging.is_empty() {
        if let Some(st) = shmem::state() {
            st.blocked.fetch_and(!LAGGING_FLAG, Ordering::AcqRel);
        }
    }
}

/// Whether this backend's database lags behind the mark.
pub fn this_database_lags() -> bool {
    // SAFETY: reading this backend's database.
    let db = unsafe { pg_sys::MyDatabaseId }.to_u32();
    shmem::tracking().is_some_and(|t| t.lagging.contains(db))
}

/// ERROR (55000) when this backend's database lags behind the mark: its
/// writer could not write it (its owner holds a lock on the table, say),
/// so a dump of it would not carry the IDs handed out meanwhile.
/// A database that only awaits the next round (created while the last
/// one ran) is written by it: wait up to [`LAG_WAIT_MS`] for it first.
/// The wait asks for no round: a database whose writer keeps failing
/// must not make every call there run a round over every database.
pub fn refuse_if_this_database_lags() {
    if !this_database_lags() {
        return;
    }
    let caught_up = marks().is_some() && shmem::wait_until(LAG_WAIT_MS, || !this_database_lags());
    if !caught_up {
        errors::high_water_lags_here();
    }
}

/// In the current database: whether the extension is installed at a
/// version without the high-water table (read from the catalog).
pub fn old_version_here() -> bool {
    Spi::get_one::<bool>(
        "SELECT true FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'snowflake_id'",
    )
    .ok()
    .flatten()
    .unwrap_or(false)
}

/// This server's configuration as the table's key columns.
fn config_args(layout: &Layout, worker: u64) -> [pgrx::datum::DatumWithOid<'static>; 4] {
    [
        (worker as i32).into(),
        layout.epoch_ms().into(),
        (layout.worker_bits() as i32).into(),
        (layout.sequence_bits() as i32).into(),
    ]
}

/// In the current database and transaction: read the largest mark of
/// this server's configuration and raise its rows to `target` (when
/// given). Returns `None` where the database has no table of the
/// extension, else the largest mark read (`i64::MIN`: none).
pub fn read_and_write_here(target: Option<i64>) -> Option<i64> {
    let layout = gucs::layout().ok()?;
    let worker = lease::current_worker_id()?;
    Spi::connect_mut(|client| {
        let mut rows = client.select(TABLE_SQL, None, &[])?;
        let Some(table) = rows
            .next()
            .map(|r| r.get::<String>(1))
            .transpose()?
            .flatten()
        else {
            return Ok::<_, pgrx::spi::Error>(None);
        };
        let args = config_args(&layout, worker);
        let found = client
            .select(&READ_SQL.replace("{table}", &table), None, &args)?
            .first()
            .get_one::<i64>()?
            .unwrap_or(i64::MIN);
        if let Some(target) = target {
            let [a, b, c, d] = config_args(&layout, worker);
            client.update(
                &WRITE_SQL.replace("{table}", &table),
                None,
                &[a, b, c, d, target.into()],
            )?;
        }
        Ok(Some(found))
    })
    .unwrap_or_else(|e| errors::spi_failed("snowflake_id's high-water mark", e))
}

/// The published mark: see the module documentation.
#[pg_extern(volatile, parallel_safe)]
pub fn snowflake_high_water() -> Option<TimestampWithTimeZone> {
    let t = shmem::tracking()?;
    match t.mark_ms.load(Ordering::Acquire) {
        i64::MIN => None,
        ms => Some(crate::read::decode::from_unix_ms(ms)),
    }
}

/// Write the published mark here now: see the module documentation.
#[pg_extern(volatile, parallel_unsafe)]
pub fn snowflake_write_high_water() -> Option<TimestampWithTimeZone> {
    // SAFETY: plain catalog check of the current user.
    if !unsafe { pg_sys::superuser() } {
        errors::must_be_superuser("write the snowflake_id high-water mark");
    }
    let t = shmem::tracking()?;
    // This database has the table now: the next round visits it, even if
    // an earlier one found it without, and runs now (a new tenant mints
    // at once).
    t.mark_rescan.store(true, Ordering::Release);
    wake_launcher(t);
    let ms = t.mark_ms.load(Ordering::Acquire);
    if ms == i64::MIN || shmem::in_recovery() || lease::current_worker_id().is_none() {
        return None;
    }
    read_and_write_here(Some(ms))?;
    Some(crate::read::decode::from_unix_ms(ms))
}

/// The trigger on `snowflake_id_internal.snowflake_high_water`, for every
/// row written: a mark of this server's configuration above every target
/// its own rounds tried since start-up (a restore of a dump, a
/// superuser's INSERT) raises the generator above it at once. A C
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
/// written mark of this server's configuration that its rounds did not
/// write.
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
        lease::current_worker_id(),
    ) else {
        return;
    };
    let ours = worker_id as i64 == worker as i64
        && epoch_ms == layout.epoch_ms()
        && worker_bits as u32 == layout.worker_bits()
        && sequence_bits as u32 == layout.sequence_bits();
    if !ours || mark_ms <= t.mark_tried_ms.load(Ordering::Acquire) || shmem::in_recovery() {
        return;
    }
    let clock = SystemClock;
    let frontier = state.frontier_ms(&layout, clock.wall_ns(), clock.mono_ns());
    if mark_ms > far_limit(frontier) {
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
        hold_far_mark(t, state, mark_ms, db, &name);
        return;
    }
    state.raise_above(mark_ms, &layout, SystemClock.mono_ns());
    t.mark_found_ms.fetch_max(mark_ms, Ordering::AcqRel);
    wake_launcher(t);
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
    requires = [snowflake_write_high_water, snowflake_high_water_restored]
);
