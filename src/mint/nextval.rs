//! `snowflake_nextval()`: the generator, as SQL.

use crate::mint::{backend_clock, bound, reservation, shmem, worker};
use crate::read::decode;
use crate::{errors, gucs};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use snowflake_id_core::{
    Attempt, Block, Clock, Config, Events, GenError, GeneratorState, LastMillisecond, SystemClock,
};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, Ordering};

/// Returns a new ID, unique and strictly greater than every ID this server
/// issued before, in any backend and any database.
///
/// Lock-free: one `fetch_add` on shared memory in the common case, which
/// [`snowflake_nextval_entry`], the function's C entry point, takes before
/// any of pgrx's call machinery; everything else runs here.
/// VOLATILE (every call differs) and PARALLEL SAFE (the state is in shared
/// memory, so parallel workers draw from the same generator).
///
/// Requires `shared_preload_libraries = 'snowflake_id'` and
/// `snowflake_id.worker_id` to be set; fails with SQLSTATE 55000 otherwise.
/// Refused on a standby (during recovery) with SQLSTATE 25006, like
/// `nextval()`: a standby shares the primary's worker id.
///
/// ```sql
/// CREATE TABLE orders (
///     id   bigint PRIMARY KEY DEFAULT snowflake_nextval(),
///     item text
/// );
/// INSERT INTO orders (item) VALUES ('book') RETURNING id;
/// SELECT snowflake_nextval() FROM generate_series(1, 3);
/// ```
#[pg_extern(
    volatile,
    parallel_safe,
    sql = "CREATE FUNCTION \"snowflake_nextval\"() RETURNS bigint /* i64 */\nSTRICT VOLATILE PARALLEL SAFE\nLANGUAGE c /* Rust */\nAS 'MODULE_PATHNAME', 'snowflake_nextval_entry';"
)]
pub fn snowflake_nextval() -> i64 {
    // Every wait of the call comes before its ID is computed (issue 55):
    // the start-up read of the marks here (after the checks that need
    // no wait), the mark's raise below.
    let (mut state, mut cfg) = generator();
    if bound::prepare(held_somewhere(state)) {
        (state, cfg) = generator();
    }
    let mut again = RAISES_BEFORE_ID;
    // One budget for the lease's cover across every ID the call computes.
    let mut since = None;
    loop {
        let mut ev = Events::default();
        let result = if backend_clock::in_use() {
            backend_clock::cached(|clock| next_one(state, &cfg, clock, &mut ev, &mut since))
        } else {
            next_one(state, &cfg, &SystemClock, &mut ev, &mut since)
        };
        if ev.step_back_ns.is_some() || ev.reanchored {
            report_clock_events(state, &ev);
        }
        match result {
            Ok(id) => {
                if !bound::covers(id) && again > 0 {
                    // The database's mark must be raised first, which
                    // waits for its flush (or its table's lock): this ID
                    // is dropped (a gap, never handed out) and the next
                    // one is computed after the wait.
                    again -= 1;
                    bound::check(id, &cfg.layout);
                    (state, cfg) = generator();
                    continue;
                }
                bound::check(id, &cfg.layout);
                LAST.store(id, Ordering::Relaxed);
                return id;
            }
            Err(e) => refuse(e),
        }
    }
}

/// Whether some database holds a high-water mark back
/// ([`reservation::HELD_SOMEWHERE`]): every call then asks whether it is
/// its own.
#[inline(always)]
fn held_somewhere(state: &GeneratorState) -> bool {
    state.blocked.load(Ordering::Acquire) & reservation::HELD_SOMEWHERE != 0
}

/// How many times a call raises its database's mark and computes its ID
/// again: a raise covers [`crate::high_water`]'s 5 s beyond the
/// generator, so the second ID is covered unless the generator moved
/// seconds ahead during the raise.
const RAISES_BEFORE_ID: u32 = 2;

/// The C entry point of the SQL function `snowflake_nextval()` (its SQL
/// names this symbol): the common case here, with no error guard, no
/// memory-context switch and no result boxing, which cost about as much
/// as the generator itself (issue 48); everything else in pgrx's wrapper
/// of [`snowflake_nextval`], which is guarded as usual.
///
/// The common case is [`GeneratorState::try_fast_with`] with a cached
/// clock reading, in the millisecond of this backend's last ID: the
/// checks of [`generator`] that can change after that ID was issued
/// (the blocked flag, the worker id), all of them plain loads, and the
/// window that ID left. Nothing here calls PostgreSQL, allocates, raises
/// an error or can panic, which is what makes running it unguarded
/// sound. Whenever any of it does not hold (the first call, a new
/// millisecond, a real clock read due, a leased worker id, a blocked
/// generator, an ID at this database's bound), it issues nothing, or
/// drops the one ID it took (a gap, never handed out), and the guarded
/// wrapper runs the whole call.
///
/// # Safety
/// Called by PostgreSQL's function manager with a valid `fcinfo`, as
/// every V1 function is.
#[no_mangle]
pub unsafe extern "C-unwind" fn snowflake_nextval_entry(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    match fast_path() {
        Some(id) => pg_sys::Datum::from(id),
        // SAFETY: the same call, handed on.
        None => unsafe { guarded(fcinfo) },
    }
}

/// pgrx's guarded wrapper of [`snowflake_nextval`], kept out of line so
/// that the common case keeps a small stack frame.
///
/// # Safety
/// As [`snowflake_nextval_entry`].
#[cold]
#[inline(never)]
unsafe fn guarded(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the caller's `fcinfo`.
    unsafe { snowflake_nextval_wrapper(fcinfo) }
}

/// The version-1 calling convention record of [`snowflake_nextval_entry`].
#[no_mangle]
#[doc(hidden)]
pub extern "C" fn pg_finfo_snowflake_nextval_entry() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// The unguarded common case of [`snowflake_nextval_entry`]: the cached
/// clock, the checks of [`generator`] that can change within a
/// millisecond, the generator's fast path and the database's bound.
#[inline(always)]
fn fast_path() -> Option<i64> {
    // First: where the cache is not used (no invariant TSC as the clock
    // source), every call reads the clock, and nothing else is checked.
    let unix_ms = backend_clock::current_ms()?;
    // SAFETY: null, or the generator this process's guarded path found
    // (shared memory stays mapped at one address for a backend's life).
    let state = unsafe { SEEN.load(Ordering::Relaxed).as_ref() }?;
    if state.blocked.load(Ordering::Acquire) != 0 {
        return None;
    }
    // A leased worker id never takes the fast path (`try_fast_with`), so
    // the static one is the only one that matters here. It only follows
    // a window of an ID issued with this worker id in this millisecond,
    // by the guarded path (which checked the worker id against the
    // layout, and issues nothing in recovery or before the layout is
    // fixed, neither of which a backend ever goes back to) or by the fast
    // path itself after the whole test. So the layout is read, and the
    // configuration assembled, only where a value needs that test.
    let worker = gucs::worker_id()?;
    let max_lead_ms = gucs::max_lead_ms();
    let id = state.try_fast_with(worker, max_lead_ms, unix_ms, &MINE, || {
        Some(Config {
            layout: gucs::fixed_layout()?,
            worker,
            max_lead_ms,
        })
    })?;
    if !bound::covers(id) {
        return None;
    }
    LAST.store(id, Ordering::Relaxed);
    Some(id)
}

/// The shared generator as [`generator`] found it in this process, for
/// [`fast_path`]: null before this backend's first guarded call.
/// (`shmem::state()` is a plain load too, but pgrx's accessor behind it
/// would panic where shared memory was never attached, and nothing
/// unguarded may panic.) Only backends call SQL functions, and none of
/// them forks another, so the address never reaches a process that maps
/// shared memory elsewhere.
static SEEN: AtomicPtr<GeneratorState> = AtomicPtr::new(std::ptr::null_mut());

/// ERROR for a generator error; a lease past its deadline with the
/// registry's last error.
#[cold]
fn refuse(e: GenError) -> ! {
    match e {
        GenError::LeaseExpired { worker } => worker::refuse_expired(worker),
        e => errors::generator_error(e),
    }
}

/// The last ID this backend's `snowflake_nextval()` returned, or -1 before
/// the first (IDs are never negative). Process-local, as the session is.
static LAST: AtomicI64 = AtomicI64::new(-1);

/// The last ID `snowflake_nextval()` returned in this session: after
/// `snowflake_nextval(count)`, the last of its IDs. Like `lastval()`, it is
/// not transactional (a rolled-back transaction's IDs count: they were
/// issued), it is 55000 before the session's first call, and it replaces
/// `lastval()` and `currval('seq')` where code asks for the key it just
/// inserted, as PDO's `lastInsertId('seq')` and much hand-written SQL do.
/// IDs minted by parallel workers are theirs, not the session's: an
/// `INSERT`'s default runs in the leader. VOLATILE, PARALLEL RESTRICTED.
///
/// ```sql
/// INSERT INTO orders (item) VALUES ('book');
/// SELECT snowflake_lastval();   -- the new order's id
/// ```
#[pg_extern(volatile, parallel_restricted)]
pub fn snowflake_lastval() -> i64 {
    match LAST.load(Ordering::Relaxed) {
        -1 => errors::lastval_undefined(),
        id => id,
    }
}

/// The most IDs one call of `snowflake_nextval(count)` returns: the limit
/// of the `integer` argument it had before 0.7.0.
pub const MAX_COUNT: i64 = i32::MAX as i64;

/// Returns `count` new IDs at once, for bulk loads and `COPY`: the same IDs
/// `count` calls of `snowflake_nextval()` could return, increasing, but
/// taken from the shared generator as whole blocks, each with one
/// compare-and-swap, instead of one ID per call. A block is as large as
/// the call's share of the lead allows: IDs at most
/// `snowflake_id.bulk_lead_share` (default 50 %) of `snowflake_id.max_lead`
/// ahead of the clock, up to 4096 IDs per millisecond of it with the
/// default layout, so with the default 1 s two million IDs are one block.
/// Larger requests wait for the clock; the rest of the lead stays free for
/// every other caller, so a bulk load never makes single-ID callers sleep
/// (its own waits are not counted in `snowflake_stats().backpressure_waits`).
///
/// `count` is a `bigint`, so that drivers that bind a 64-bit integer
/// (Rust's sqlx, diesel and tokio-postgres, Go's pgx) call it directly; an
/// `integer` argument, a literal or an untyped parameter resolves to it as
/// before. `count` = 0 returns no rows; a negative `count`, or one above
/// [`MAX_COUNT`] (2147483647, what one call can return), is an error
/// (22023). VOLATILE, PARALLEL SAFE, STRICT.
///
/// ```sql
/// SELECT snowflake_nextval(3);
/// -- Key a bulk load without a per-row function call:
/// INSERT INTO orders (id, item)
/// SELECT id, 'item ' || n
///   FROM ROWS FROM (snowflake_nextval(1000)) WITH ORDINALITY AS t(id, n);
/// ```
#[pg_extern(volatile, parallel_safe, name = "snowflake_nextval")]
pub fn snowflake_nextval_bulk(count: i64) -> SetOfIterator<'static, i64> {
    if count < 0 {
        errors::negative_count(count);
    }
    if count > MAX_COUNT {
        errors::count_too_large(count, MAX_COUNT);
    }
    let (mut state, mut cfg) = generator();
    if bound::prepare(held_somewhere(state)) {
        (state, cfg) = generator();
    }
    let share_ms = gucs::bulk_lead_ms(cfg.max_lead_ms);
    // Every wait before the IDs are computed (issue 55): the database's
    // mark is raised first over the milliseconds the blocks will take
    // (at most the call's share of the lead). Only IDs other backends
    // took meanwhile can push the last block past it: then the check
    // below raises it again.
    let clock = SystemClock;
    let per_ms = 1u64 << cfg.layout.sequence_bits();
    let span_ms = (count as u64).div_ceil(per_ms).min(share_ms) as i64;
    bound::cover_ms(
        state
            .frontier_ms(&cfg.layout, clock.wall_ns(), clock.mono_ns())
            .saturating_add(span_ms + 1),
        &cfg.layout,
    );
    let mut blocks: Vec<Block> = Vec::new();
    let mut left = count as u64;
    let mut ev = Events::default();
    let mut failure = None;
    let mut since = None;
    while left > 0 {
        match until_issued(state, &cfg, &mut since, || {
            state.try_next_block_within(&cfg, &SystemClock, &mut ev, left, share_ms)
        }) {
            Ok(b) => {
                left -= b.count;
                blocks.push(b);
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    if ev.step_back_ns.is_some() || ev.reanchored {
        report_clock_events(state, &ev);
    }
    if let Some(e) = failure {
        refuse(e);
    }
    let layout = cfg.layout;
    if let Some(b) = blocks.last() {
        bound::check(b.last(&layout), &layout);
        LAST.store(b.last(&layout), Ordering::Relaxed);
    }
    SetOfIterator::new(blocks.into_iter().flat_map(move |b| b.ids(layout)))
}

/// Tries of [`run_of`] before it gives up: each lost try (a block cut
/// short, or across a millisecond) leaves the next starting early in a
/// millisecond with room, so only other backends' blocks in between make
/// a second try fail.
const RUN_TRIES: u32 = 16;

/// `len` consecutive integers that are all IDs of this server, minted for
/// the caller (none is handed out to anyone else): the first of them.
/// `len` is at most half a millisecond's sequence numbers (the caller
/// checks: [`run_limit`]). A block that cannot serve (it crossed into
/// the next millisecond, or was cut short) is left unused: its IDs are
/// never handed out, a gap like any rolled-back ID. For adopted
/// sequences with `INCREMENT BY n` (`crate::adopt`). Like
/// `snowflake_nextval(count)`, it takes IDs only up to its share of the
/// lead (`snowflake_id.bulk_lead_share`) and waits for the clock beyond
/// it: one role's blocks leave the rest of `max_lead` to everyone else
/// (issue 63; before, a loop of them pushed the generator to `max_lead`
/// and every single-ID caller slept on back-pressure).
pub fn run_of(len: u64) -> i64 {
    let (mut state, mut cfg) = generator();
    if bound::prepare(held_somewhere(state)) {
        (state, cfg) = generator();
    }
    let share_ms = gucs::bulk_lead_ms(cfg.max_lead_ms);
    let clock = SystemClock;
    bound::cover_ms(
        state
            .frontier_ms(&cfg.layout, clock.wall_ns(), clock.mono_ns())
            .saturating_add(2),
        &cfg.layout,
    );
    let layout = cfg.layout;
    let mut ev = Events::default();
    let mut found = None;
    let mut failure = None;
    let mut since = None;
    for _ in 0..RUN_TRIES {
        match until_issued(state, &cfg, &mut since, || {
            state.try_next_block_within(&cfg, &SystemClock, &mut ev, len, share_ms)
        }) {
            Ok(b) => {
                bound::check(b.last(&layout), &layout);
                if b.count == len && b.is_run(&layout) {
                    found = Some(b);
                    break;
                }
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    if ev.step_back_ns.is_some() || ev.reanchored {
        report_clock_events(state, &ev);
    }
    if let Some(e) = failure {
        refuse(e);
    }
    let Some(b) = found else {
        errors::no_run(len, RUN_TRIES);
    };
    LAST.store(b.last(&layout), Ordering::Relaxed);
    b.first
}

/// The longest run [`run_of`] takes: half of one millisecond's sequence
/// numbers, so that a block that crossed a millisecond leaves room for
/// the next try in the new one.
pub fn run_limit() -> u64 {
    let (_, cfg) = generator();
    (1u64 << cfg.layout.sequence_bits()) / 2
}

/// One ID: lock-free attempts, sleeping through back-pressure and waiting
/// for reservations.
#[inline(always)]
fn next_one(
    state: &GeneratorState,
    cfg: &Config,
    clock: &impl Clock,
    ev: &mut Events,
    since: &mut Option<i64>,
) -> Result<i64, GenError> {
    until_issued(state, cfg, since, || {
        state.try_next_in(cfg, clock, ev, &MINE)
    })
}

/// The wall-clock millisecond of this backend's last ID, and the window
/// that ID left (see [`LastMillisecond`]): its later calls in that
/// millisecond take the fast path, the entry point's against the window.
static MINE: LastMillisecond = LastMillisecond::new();

/// [`snowflake_id_core::until_issued`] with this server's sleep and
/// durable reservation. `since` is when the SQL call started waiting for
/// the lease's cover, if it did: the caller's own, one for the whole
/// call, so that its waits add up to a bounded total
/// (`worker::wait_for_cover`) across every ID it computes (a call that
/// raises its database's mark computes its ID again, and with a fresh
/// budget waited the whole of it again).
#[inline(always)]
fn until_issued<T>(
    state: &GeneratorState,
    cfg: &Config,
    since: &mut Option<i64>,
    attempt: impl FnMut() -> Result<Attempt<T>, GenError>,
) -> Result<T, GenError> {
    snowflake_id_core::until_issued(attempt, sleep_us, |upto_ms| {
        reserve(state, cfg, upto_ms, since)
    })
}

/// The shared generator and this call's configuration, or the ERROR that
/// explains why IDs cannot be generated here.
#[inline(always)]
fn generator() -> (&'static GeneratorState, Config) {
    let Some(state) = shmem::state() else {
        errors::not_preloaded();
    };
    SEEN.store(std::ptr::from_ref(state).cast_mut(), Ordering::Relaxed);
    refuse_during_recovery();
    let layout = decode::layout();
    let Some(worker) = worker::worker_id(state) else {
        worker::refuse_without_worker();
    };
    if worker > layout.max_worker() {
        errors::worker_out_of_range(worker, layout.max_worker());
    }
    let blocked = state.blocked.load(Ordering::Acquire);
    if blocked != 0 {
        refuse_if_blocked(blocked, &layout);
    }
    let cfg = Config {
        layout,
        worker,
        max_lead_ms: gucs::max_lead_ms(),
    };
    (state, cfg)
}

/// ERROR (55000) when generation is disabled for the server.
#[cold]
#[inline(never)]
fn refuse_if_blocked(blocked: u64, layout: &snowflake_id_core::Layout) {
    let code = blocked & reservation::BLOCKED_MASK;
    if code != 0 {
        let (msg, detail) = reservation::blocked_reason(code, layout);
        errors::generation_blocked(msg, detail);
    }
}

/// Set once this backend has seen recovery over. Recovery never starts
/// again in the life of a backend (PostgreSQL caches the same fact), so
/// later calls check one process-local flag instead of calling
/// `RecoveryInProgress()`.
static PAST_RECOVERY: AtomicBool = AtomicBool::new(false);

/// ERROR (25006) while the server is in recovery: a hot standby has the
/// primary's worker id (`pg_basebackup` copies the configuration), so the
/// IDs it minted could equal the primary's.
#[inline(always)]
pub(crate) fn refuse_during_recovery() {
    if !PAST_RECOVERY.load(Ordering::Relaxed) {
        check_recovery();
    }
}

#[cold]
#[inline(never)]
fn check_recovery() {
    if shmem::in_recovery() {
        errors::in_recovery();
    }
    PAST_RECOVERY.store(true, Ordering::Relaxed);
}

/// Ahead of the durable reservation: wait for the renewal lock (sleeping,
/// interruptibly) and renew it unless someone else just did.
#[cold]
fn reserve(state: &GeneratorState, cfg: &Config, upto_ms: i64, since: &mut Option<i64>) {
    reservation::renew_for_call(
        state,
        &cfg.layout,
        upto_ms,
        || state.reserved_until_ms.load(Ordering::Acquire) < upto_ms,
        since,
    );
}

/// Back-pressure: sleep `us` microseconds, until the reference clock
/// admits the next ID. Whole milliseconds are slept on our latch, so that
/// the wait is interruptible and ends if the postmaster dies; the rest (a
/// wait is usually a fraction of a millisecond: the rest of the current
/// one) with `pg_usleep`, because a latch timeout is whole milliseconds
/// and sleeping to the end of one would waste most of the next. Either
/// way the wait shows in `pg_stat_activity` as `Extension`.
#[cold]
fn sleep_us(us: u64) {
    let ms = us / 1000;
    let rest = us % 1000;
    // SAFETY: MyLatch is this backend's latch; WaitLatch/ResetLatch and
    // pg_usleep are the standard ways to sleep in a backend.
    // my_wait_event_info always points at valid storage (this backend's
    // PGPROC entry, or a local variable before there is one).
    unsafe {
        if ms > 0 {
            pg_sys::WaitLatch(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
                ms as _,
                pg_sys::PG_WAIT_EXTENSION,
            );
            pg_sys::ResetLatch(pg_sys::MyLatch);
        }
        if rest > 0 {
            *pg_sys::my_wait_event_info = pg_sys::PG_WAIT_EXTENSION;
            pg_sys::pg_usleep(rest as _);
            *pg_sys::my_wait_event_info = 0;
        }
    }
    pgrx::check_for_interrupts!();
}

fn report_clock_events(state: &GeneratorState, ev: &Events) {
    let now_ms = SystemClock.wall_ns().div_euclid(1_000_000);
    if !state.should_warn(now_ms) {
        return;
    }
    if let Some(ns) = ev.step_back_ns {
        errors::report(
            PgLogLevel::WARNING,
            PgSqlErrorCode::ERRCODE_WARNING,
            format!("system clock moved backwards by {:.3} s", ns as f64 / 1e9),
            Some("snowflake_nextval() continues from the last issued timestamp: IDs stay unique and increasing, and carry timestamps ahead of the clock until it catches up.".into()),
            Some("Check the time synchronisation of this server (NTP, chrony, the hypervisor)."),
        );
    }
    if ev.reanchored {
        errors::report(
            PgLogLevel::WARNING,
            PgSqlErrorCode::ERRCODE_WARNING,
            "snowflake_id re-anchored its reference clock",
            Some("IDs were further ahead of the clock than a burst can explain: the monotonic clock went backwards or snowflake_id.max_lead was lowered. Generation continues without waiting.".into()),
            None,
        );
    }
}
