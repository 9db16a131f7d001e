//! The lock-free generator state machine.
//!
//! All state that several processes share is in [`GeneratorState`], a
//! `#[repr(C)]` block of atomics that the extension places in PostgreSQL
//! shared memory. The packed state *is* the last ID issued by this server
//! (`last_id`). The hot path is one `fetch_add` on it, a read-modify-write
//! that cannot fail however many backends contend for it; a
//! compare-and-swap lifts the state to the clock only when the result was
//! not the next ID (see [`GeneratorState::try_next`]).
//!
//! # Semantics
//! - **Fresh millisecond:** the ID takes the wall-clock millisecond and a
//!   varying start sequence ([`Layout::start_sequence`]).
//! - **Same millisecond:** sequence + 1.
//! - **Sequence exhausted:** borrow the next millisecond (never spin).
//! - **Clock behind the last ID** (a step back, or borrowed milliseconds):
//!   continue from the last issued timestamp, like a hybrid logical clock.
//! - **Lead bound:** an ID may run at most `max_lead_ms` ahead of the
//!   *reference clock*; beyond that the caller is told to wait
//!   ([`Attempt::Wait`]), which is back-pressure, not spinning.
//!
//! # The reference clock: telling a step from a burst
//! The reference clock is `CLOCK_MONOTONIC + max_offset`, where `max_offset`
//! is the largest `wall - mono` difference ever observed. The monotonic
//! clock never steps, so `wall - mono` only changes when the wall clock is
//! stepped. After a backward step the reference clock keeps running on the
//! pre-step timeline, so IDs that sit ahead of the (now earlier) wall clock
//! because of the step do not count as lead, and nobody sleeps for the size
//! of the step. A forward step raises `max_offset` with it. Once IDs are
//! back on the wall clock (a call opens a fresh wall-clock millisecond), the
//! debt is repaid and `max_offset` is lowered to the wall clock again, so
//! later bursts are once more bounded by `max_lead` over the wall clock.
//!
//! `wall - mono` is measured with the two reads in a known order, so that
//! each measurement is a lower bound (`lo`) or upper bound (`hi`) of the
//! true difference. `max_offset` only ever takes lower bounds, so it never
//! runs ahead of the truth; backward steps are only reported when an upper
//! bound falls more than [`STEP_TOLERANCE_NS`] below `ref_offset`, a lower
//! bound of an earlier difference, so a preempted reader can not fake one.
//!
//! # Where things are
//! - this file: the shared state ([`GeneratorState`]), its parameters and
//!   the state machine itself (`try_next`, `try_next_block`);
//! - [`attempt`]: what one attempt returns ([`Attempt`], [`Block`]) and the
//!   one retry loop ([`until_issued`]);
//! - [`reservation`]: the durable-reservation arithmetic (start-up above a
//!   reservation, renewal targets, publishing a renewed reservation).
//!
//! Unit tests are in `tests.rs`; the multithreaded stress and model tests
//! are in `core/tests/`.

mod attempt;
mod reservation;
#[cfg(test)]
mod tests;

pub use attempt::{until_issued, Attempt, Block, BlockAttempt};
pub use reservation::DEBT_STEP_MS;

use crate::clock::Clock;
use crate::layout::Layout;
use attempt::no_host_reservation;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Backward wall-clock steps smaller than this are not reported.
pub const STEP_TOLERANCE_NS: i64 = 1_000_000;
/// No single back-pressure wait is longer than this. A required wait beyond
/// it cannot come from a burst (a burst overshoots the bound by at most a
/// millisecond or so); it means the monotonic clock itself jumped backwards
/// or `max_lead` was lowered a lot, and the reference clock is re-anchored
/// instead of stalling callers.
pub const MAX_WAIT_MS: u64 = 1_000;
/// Minimum interval between two clock-step warnings, server-wide.
pub const WARN_INTERVAL_MS: i64 = 10_000;

/// The longest pause, in spin-loop hints, between two compare-and-swap
/// attempts of the short path (1, 2, 4, ... up to this, then the general
/// path takes over).
const MAX_CAS_PAUSE: u32 = 64;

#[cfg(test)]
thread_local! {
    /// Read-modify-writes on `last_id` by this thread (tests only).
    pub(crate) static LAST_ID_RMWS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// `fetch_add`s of the fast path whose result was not the next ID.
    pub(crate) static FAST_REJECTED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts one read-modify-write on `last_id` (a no-op outside tests).
#[inline(always)]
fn count_rmw() {
    #[cfg(test)]
    LAST_ID_RMWS.with(|c| c.set(c.get() + 1));
}

const UNSET: i64 = i64::MIN;
const NO_CAP: u64 = u64::MAX;
/// [`GeneratorState::assigned_worker`] of a server whose worker id is
/// configured, not leased: every caller's `Config::worker` is accepted.
pub const STATIC_WORKER: u64 = u64::MAX;
/// [`GeneratorState::assigned_worker`] of a server that holds no lease.
pub const NO_WORKER: u64 = u64::MAX - 1;
/// [`GeneratorState::lease_deadline_ns`] of a server whose worker id is
/// not leased.
pub const NO_DEADLINE: i64 = i64::MAX;

/// Shared generator state: lives in shared memory, one per server.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct GeneratorState {
    /// The last ID issued (0 = none yet), or a value above it that was
    /// never handed out: an addition of the fast path that found no next
    /// ID to issue (see [`GeneratorState::try_next`]) stays until the
    /// next compare-and-swap lifts the state above it. Never below an ID
    /// issued.
    pub last_id: AtomicU64,
    /// The lowest `max_lead` under which a caller had to wait or
    /// re-anchor since IDs were last on the wall clock (`u64::MAX`: none).
    /// Every caller is held to it, so that sessions that disagree on
    /// `max_lead` (a reload that a running statement has not seen yet)
    /// cannot ratchet the lead up: see [`GeneratorState::try_next_block`].
    pub lead_cap_ms: AtomicU64,
    /// The wall-clock ms in which a caller last measured the clocks while
    /// the wall clock was behind the last ID (beside `last_id`, which every
    /// caller has just read; written at most once per ms).
    pub behind_seen_ms: AtomicI64,
    /// Largest lower bound of `wall_ns - mono_ns` seen so far.
    pub max_offset: AtomicI64,
    /// A lower bound of the current `wall_ns - mono_ns`, for step detection.
    pub ref_offset: AtomicI64,
    /// Wall-clock ms of the last step warning, for rate limiting.
    pub last_warning_ms: AtomicI64,
    /// IDs may carry timestamps up to this Unix ms: the durable
    /// reservation (`i64::MAX` when there is none to respect).
    pub reserved_until_ms: AtomicI64,
    /// Nonzero while generation is refused (the extension defines codes).
    pub blocked: AtomicU64,
    /// The worker id the server holds, where one is leased
    /// ([`STATIC_WORKER`]: the caller's own `Config::worker` is the
    /// truth; [`NO_WORKER`]: none is held). See [`Self::assign_worker`].
    pub assigned_worker: AtomicU64,
    /// The held lease's local deadline on [`Clock::lease_ns`]
    /// ([`NO_DEADLINE`] where the worker id is not leased): no ID is
    /// issued at or after it, whatever the lease worker is doing. See
    /// [`Self::set_lease_deadline`].
    pub lease_deadline_ns: AtomicI64,
    /// Event counters, on their own cache line: they are only touched on
    /// rare events, never on the common path.
    pub counters: Counters,
}

/// What a caller (a backend) knows from its own last ID, process-local:
/// one per backend, never in shared memory; atomics only so that it can
/// be a plain `static` (every access is `Relaxed`, an ordinary load or
/// store).
///
/// - `ms`: the wall-clock millisecond in which it last issued an ID
///   through [`GeneratorState::try_next_in`] (either of its paths), or
///   through [`GeneratorState::try_fast`] where a value outside the
///   window passed the whole test;
/// - the **window** of that millisecond: the last-ID values `lo .. lo +
///   len` (`len` 0: none) that the fast path may follow at `ms` because
///   of where they lie. They are the values of one timeline millisecond
///   (Unix ms `id_ms`, `lead` ms after `ms`) with the caller's worker id
///   (`worker`) and a sequence number below the last, which is every
///   condition of the fast path that depends on the value. What depends
///   on the shared state (the clocks measured in `ms` when `lead` is not
///   0, the lead bound, the reservation) is checked on every call, so
///   one range check replaces the value's decoding
///   ([`GeneratorState::try_fast`]).
#[derive(Debug)]
pub struct LastMillisecond {
    ms: AtomicI64,
    lo: AtomicU64,
    len: AtomicU64,
    id_ms: AtomicI64,
    lead: AtomicU64,
    worker: AtomicU64,
}

impl LastMillisecond {
    pub const fn new() -> Self {
        LastMillisecond {
            ms: AtomicI64::new(UNSET),
            lo: AtomicU64::new(0),
            len: AtomicU64::new(0),
            id_ms: AtomicI64::new(i64::MAX),
            lead: AtomicU64::new(0),
            worker: AtomicU64::new(u64::MAX),
        }
    }

    /// The wall-clock millisecond of the caller's last ID, as the type's
    /// `ms` says (`i64::MIN`: none).
    pub fn ms(&self) -> i64 {
        self.ms.load(Ordering::Relaxed)
    }

    /// Forget everything: the next call starts at the general algorithm.
    fn forget(&self) {
        self.len.store(0, Ordering::Relaxed);
        self.ms.store(UNSET, Ordering::Relaxed);
    }

    /// Remember `unix_ms` as the millisecond of an ID just issued at that
    /// wall-clock millisecond, and the window of `id`, where the fast
    /// path may follow `id`'s millisecond at all ([`GeneratorState::window_of`]).
    fn remember(&self, unix_ms: i64, window: Option<Window>) {
        match window {
            Some(w) => {
                self.lo.store(w.lo, Ordering::Relaxed);
                self.len.store(w.len, Ordering::Relaxed);
                self.id_ms.store(w.id_ms, Ordering::Relaxed);
                self.lead.store(w.lead, Ordering::Relaxed);
                self.worker.store(w.worker, Ordering::Relaxed);
            }
            None => self.len.store(0, Ordering::Relaxed),
        }
        self.ms.store(unix_ms, Ordering::Relaxed);
    }
}

impl Default for LastMillisecond {
    fn default() -> Self {
        Self::new()
    }
}

/// A window of [`LastMillisecond`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Window {
    lo: u64,
    len: u64,
    id_ms: i64,
    lead: u64,
    worker: u64,
}

/// Server-wide event counters.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct Counters {
    pub sequence_overflows: AtomicU64,
    pub clock_steps_back: AtomicU64,
    pub largest_step_back_ns: AtomicI64,
    pub backpressure_waits: AtomicU64,
    pub reservation_waits: AtomicU64,
    pub reservations_written: AtomicU64,
}

impl Default for GeneratorState {
    fn default() -> Self {
        Self::new()
    }
}

/// Run-time parameters of one call.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub layout: Layout,
    pub worker: u64,
    pub max_lead_ms: u64,
}

/// Things that happened during a call, for logging and statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Events {
    /// A backward wall-clock step was detected, of at least this many ns.
    pub step_back_ns: Option<i64>,
    /// Times the sequence wrapped and a future millisecond was borrowed.
    pub overflows: u32,
    /// Back-pressure waits requested.
    pub waits: u32,
    /// The reference clock had to be re-anchored (see [`MAX_WAIT_MS`]).
    pub reanchored: bool,
}

/// Generation failed: the clock is outside what the layout can represent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GenError {
    /// The wall clock is before the configured epoch.
    BeforeEpoch { unix_ms: i64, epoch_ms: i64 },
    /// The next ID would need a timestamp past the layout's last millisecond.
    Exhausted { last_unix_ms: i64 },
    /// The caller's worker id is not the one the server holds now (a lease
    /// was lost or changed hands since the caller read it).
    WorkerNotHeld { worker: u64 },
    /// The lease of the caller's worker id reached its local deadline
    /// ([`GeneratorState::lease_deadline_ns`]) without a renewal.
    LeaseExpired { worker: u64 },
}

impl GeneratorState {
    pub const fn new() -> Self {
        GeneratorState {
            last_id: AtomicU64::new(0),
            lead_cap_ms: AtomicU64::new(NO_CAP),
            behind_seen_ms: AtomicI64::new(UNSET),
            max_offset: AtomicI64::new(UNSET),
            ref_offset: AtomicI64::new(UNSET),
            last_warning_ms: AtomicI64::new(UNSET),
            reserved_until_ms: AtomicI64::new(i64::MAX),
            blocked: AtomicU64::new(0),
            assigned_worker: AtomicU64::new(STATIC_WORKER),
            lease_deadline_ns: AtomicI64::new(NO_DEADLINE),
            counters: Counters {
                sequence_overflows: AtomicU64::new(0),
                clock_steps_back: AtomicU64::new(0),
                largest_step_back_ns: AtomicI64::new(0),
                backpressure_waits: AtomicU64::new(0),
                reservation_waits: AtomicU64::new(0),
                reservations_written: AtomicU64::new(0),
            },
        }
    }

    /// The last ID issued, or `None` before the first.
    pub fn last_issued(&self) -> Option<i64> {
        match self.last_id.load(Ordering::Acquire) {
            0 => None,
            id => Some(id as i64),
        }
    }

    /// True for the first caller that finds the wall clock behind the last
    /// ID in wall-clock millisecond `unix_ms` (see `try_next_block`).
    #[inline]
    fn first_behind_read(&self, unix_ms: i64) -> bool {
        let seen = self.behind_seen_ms.load(Ordering::Relaxed);
        seen != unix_ms
            && self
                .behind_seen_ms
                .compare_exchange(seen, unix_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Record a `wall - mono` measurement; detect backward steps.
    #[inline]
    fn observe(&self, wall: i64, mono_after: i64, clock: &impl Clock, ev: &mut Events) {
        let lo = wall - mono_after;
        if lo > self.max_offset.load(Ordering::Relaxed) {
            self.max_offset.fetch_max(lo, Ordering::AcqRel);
        }
        let r = self.ref_offset.load(Ordering::Acquire);
        if r == UNSET || lo > r.saturating_add(STEP_TOLERANCE_NS) {
            let _ = self
                .ref_offset
                .compare_exchange(r, lo, Ordering::AcqRel, Ordering::Relaxed);
        } else if lo < r - STEP_TOLERANCE_NS {
            // Maybe a backward step, maybe just a reader preempted between
            // its two clock reads. Confirm with an upper bound.
            let m1 = clock.mono_ns();
            let w = clock.wall_ns_exact();
            let m2 = clock.mono_ns();
            let hi = w - m1;
            if hi < r - STEP_TOLERANCE_NS
                && self
                    .ref_offset
                    .compare_exchange(r, w - m2, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                ev.step_back_ns = Some(r - hi);
                self.counters
                    .clock_steps_back
                    .fetch_add(1, Ordering::Relaxed);
                self.counters
                    .largest_step_back_ns
                    .fetch_max(r - hi, Ordering::Relaxed);
            }
        }
    }

    /// Lower the reference clock's offset to `lo` (a lower bound of the
    /// current `wall - mono`), if it is ahead by more than the tolerance.
    #[inline]
    fn resync_reference(&self, lo: i64) {
        let cur = self.max_offset.load(Ordering::Acquire);
        if cur != UNSET && cur > lo.saturating_add(STEP_TOLERANCE_NS) {
            let _ = self
                .max_offset
                .compare_exchange(cur, lo, Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    /// The lead bound of a call: its own `max_lead`, or the lead cap if
    /// that is lower (see [`Self::lead_cap_ms`]).
    #[inline(always)]
    fn max_lead_ms(&self, cfg: &Config) -> u64 {
        cfg.max_lead_ms
            .min(self.lead_cap_ms.load(Ordering::Relaxed))
    }

    /// Hold every caller to at most `max_lead_ms` until IDs are back on
    /// the wall clock.
    #[inline]
    fn cap_lead(&self, max_lead_ms: u64) {
        if self.lead_cap_ms.load(Ordering::Relaxed) > max_lead_ms {
            self.lead_cap_ms.fetch_min(max_lead_ms, Ordering::Relaxed);
        }
    }

    /// The reference clock in Unix ns (see the module docs): never behind
    /// the wall clock.
    #[inline]
    fn reference_ns(&self, mono: i64, wall: i64) -> i64 {
        match self.max_offset.load(Ordering::Acquire) {
            UNSET => wall,
            off => mono.saturating_add(off).max(wall),
        }
    }

    /// One attempt at issuing an ID. Lock-free.
    ///
    /// The common case (the next sequence number in the last ID's
    /// millisecond, for the same worker, within the lead bound) takes the
    /// fast path: one wall-clock read and one `fetch_add` on the last ID,
    /// checked afterwards. A read-modify-write that adds cannot fail, so
    /// however many backends contend, each takes its ID with exactly one
    /// access to the contended cache line and never retries (a
    /// compare-and-swap loop retries whenever another backend got in
    /// between, and its throughput falls as backends are added: issue 48).
    /// When the value it added to was not one the next ID may follow (a
    /// new wall-clock millisecond, the sequence's end, another worker, the
    /// reservation's or the lead's edge), the addition is a gap that is
    /// never handed out, and the general algorithm (a block of one) lifts
    /// the state with a compare-and-swap; the ID the fast path issues is
    /// exactly the one [`Self::try_next_block`] would (a test checks this
    /// from every kind of state).
    ///
    /// A server whose worker id is leased keeps the compare-and-swap
    /// short path instead: the refusal at the lease's deadline fences it
    /// by raising the last ID to the end of its millisecond
    /// (`lease_ran_out`), and additions past that fence would reach the
    /// next millisecond's first IDs.
    #[inline(always)]
    pub fn try_next(
        &self,
        cfg: &Config,
        clock: &impl Clock,
        ev: &mut Events,
    ) -> Result<Attempt, GenError> {
        self.try_next_pausing(cfg, clock, ev, None, &mut || {})
    }

    /// [`Self::try_next`] for a caller that remembers, in `mine`, the
    /// wall-clock millisecond of its last ID (a backend: the extension).
    /// Its first call in a new wall-clock millisecond goes straight to
    /// the general algorithm, which a new millisecond needs anyway, and
    /// makes no addition that would have to be taken back; its later
    /// calls in that millisecond take the fast path.
    #[inline(always)]
    pub fn try_next_in(
        &self,
        cfg: &Config,
        clock: &impl Clock,
        ev: &mut Events,
        mine: &LastMillisecond,
    ) -> Result<Attempt, GenError> {
        self.try_next_pausing(cfg, clock, ev, Some(mine), &mut || {})
    }

    /// The fast path of [`Self::try_next_in`] alone, for a caller that
    /// may do nothing else where it calls this: the extension's entry
    /// point, which runs it before pgrx's error guard is set up, and so
    /// must neither raise an error nor report an event. `unix_ms` is the
    /// current wall-clock millisecond, which the caller knows without a
    /// clock read only while a cached reading is current.
    ///
    /// It runs only in the millisecond of the caller's last ID (`mine`),
    /// and checks the value its addition returns against the window that
    /// ID left (see [`LastMillisecond`]): one subtraction and compare
    /// instead of the value's decoding. A value outside it gets the whole
    /// test, as in [`Self::try_next_in`] (another backend moved the state
    /// on to the next millisecond, say), and opens that value's window.
    ///
    /// `Some` is exactly the ID [`Self::try_next_in`] would issue with the
    /// same clock reading. `None` issues nothing; the caller then calls
    /// [`Self::try_next_in`]. A rejected addition (taken back as usual)
    /// also forgets `mine`, so that call goes straight to the general
    /// algorithm instead of adding a second time.
    #[inline(always)]
    pub fn try_fast(&self, cfg: &Config, unix_ms: i64, mine: &LastMillisecond) -> Option<i64> {
        self.try_fast_pausing(
            cfg.worker,
            cfg.max_lead_ms,
            unix_ms,
            mine,
            || Some(*cfg),
            &mut || {},
        )
    }

    /// [`Self::try_fast`] for a caller whose configuration costs more to
    /// assemble than the common case needs: only `worker` and
    /// `max_lead_ms` (which must be those of `cfg`'s result) are read on
    /// the way, and `cfg` is called where a value outside the window needs
    /// the whole test. Where it returns `None` (the caller cannot tell its
    /// layout, which no window outlives in the extension), the addition is
    /// taken back, uncounted, and `mine` forgotten.
    #[inline(always)]
    pub fn try_fast_with(
        &self,
        worker: u64,
        max_lead_ms: u64,
        unix_ms: i64,
        mine: &LastMillisecond,
        cfg: impl FnOnce() -> Option<Config>,
    ) -> Option<i64> {
        self.try_fast_pausing(worker, max_lead_ms, unix_ms, mine, cfg, &mut || {})
    }

    /// [`Self::try_fast_with`], calling `pause` between its steps: after
    /// the caller's clock read, after the addition and before taking it
    /// back (the tests preempt the caller there).
    #[inline(always)]
    fn try_fast_pausing(
        &self,
        worker: u64,
        max_lead_ms: u64,
        unix_ms: i64,
        mine: &LastMillisecond,
        cfg: impl FnOnce() -> Option<Config>,
        pause: &mut impl FnMut(),
    ) -> Option<i64> {
        const R: Ordering = Ordering::Relaxed;
        pause();
        let len = mine.len.load(R);
        if mine.ms.load(R) != unix_ms
            || len == 0
            || mine.worker.load(R) != worker
            || self.assigned_worker.load(R) != STATIC_WORKER
        {
            return None;
        }
        count_rmw();
        let prev = self.last_id.fetch_add(1, Ordering::AcqRel);
        pause();
        // The test of `is_next_in_same_millisecond` for a value in the
        // window: what depends on the shared state, after the addition
        // (`max_lead_ms` as `Self::max_lead_ms` takes it).
        let lead = mine.lead.load(R);
        if prev.wrapping_sub(mine.lo.load(R)) < len
            && (lead == 0
                || (self.behind_seen_ms.load(R) == unix_ms
                    && lead <= max_lead_ms.min(self.lead_cap_ms.load(R))))
            && mine.id_ms.load(R) <= self.reserved_until_ms.load(Ordering::Acquire)
        {
            return Some((prev + 1) as i64);
        }
        match cfg() {
            Some(cfg) => self.fast_outside_window(&cfg, prev, unix_ms, mine, pause),
            None => {
                pause();
                self.take_back(prev);
                mine.forget();
                None
            }
        }
    }

    /// [`Self::try_fast`]'s addition returned a value outside the
    /// caller's window, or the shared state refused the window: the
    /// whole test of [`Self::try_next_in`]'s fast path, and that value's
    /// window; or the addition taken back, and `mine` forgotten.
    #[cold]
    #[inline(never)]
    fn fast_outside_window(
        &self,
        cfg: &Config,
        prev: u64,
        unix_ms: i64,
        mine: &LastMillisecond,
        pause: &mut impl FnMut(),
    ) -> Option<i64> {
        if self.is_next_in_same_millisecond(cfg, prev, unix_ms) {
            mine.remember(unix_ms, self.window_of(cfg, prev + 1, unix_ms));
            return Some((prev + 1) as i64);
        }
        pause();
        // The only event of the fast path, a borrowed millisecond, is
        // counted in shared memory by `fetch_add_rejected` itself.
        self.fetch_add_rejected(cfg, prev, unix_ms, &mut Events::default());
        mine.forget();
        None
    }

    /// The window that an ID `id` just issued at wall-clock ms `unix_ms`
    /// leaves ([`LastMillisecond`]): the values of its millisecond with
    /// its worker id and a sequence number below the last. `None` where
    /// the fast path may not follow that millisecond whatever the shared
    /// state: another worker's ID, a leased worker id, a millisecond
    /// behind the clock.
    fn window_of(&self, cfg: &Config, id: u64, unix_ms: i64) -> Option<Window> {
        let layout = &cfg.layout;
        let (ts, worker, _) = layout.split(id);
        let now = unix_ms.checked_sub(layout.epoch_ms())?;
        if worker != cfg.worker
            || self.assigned_worker.load(Ordering::Relaxed) != STATIC_WORKER
            || now < 0
            || (ts as i64) < now
        {
            return None;
        }
        Some(Window {
            lo: layout.pack(ts, worker, 0),
            len: layout.max_sequence(),
            id_ms: layout.epoch_ms() + ts as i64,
            lead: ts - now as u64,
            worker,
        })
    }

    /// [`Self::try_next`], calling `pause` between the steps of the fast
    /// path: after the clock read, after the addition and before taking
    /// it back. The tests preempt the caller there (every other caller,
    /// the clock and the reservation may move); everything else calls it
    /// with nothing to do, which compiles to nothing.
    #[inline(always)]
    fn try_next_pausing(
        &self,
        cfg: &Config,
        clock: &impl Clock,
        ev: &mut Events,
        mine: Option<&LastMillisecond>,
        pause: &mut impl FnMut(),
    ) -> Result<Attempt, GenError> {
        let unix_ms = clock.wall_ms();
        let fast = self.assigned_worker.load(Ordering::Relaxed) == STATIC_WORKER;
        let issued = if !fast {
            self.try_next_same_millisecond(cfg, clock, unix_ms)
        } else if mine.is_none_or(|m| m.ms() == unix_ms) {
            pause();
            self.try_next_fetch_add(cfg, unix_ms, ev, pause)
        } else {
            None
        };
        let a = match issued {
            Some(id) => Ok(Attempt::Issued(id)),
            None => self.try_next_general(cfg, clock, ev, fast),
        };
        if let (Some(m), Ok(Attempt::Issued(id))) = (mine, &a) {
            m.remember(unix_ms, self.window_of(cfg, *id as u64, unix_ms));
        }
        a
    }

    /// The fast path of [`Self::try_next`]: one `fetch_add`, whose result
    /// is issued when the value it added to is one the next ID may follow
    /// at wall-clock ms `unix_ms` (the same test as the short path's).
    #[inline(always)]
    fn try_next_fetch_add(
        &self,
        cfg: &Config,
        unix_ms: i64,
        ev: &mut Events,
        pause: &mut impl FnMut(),
    ) -> Option<i64> {
        count_rmw();
        let prev = self.last_id.fetch_add(1, Ordering::AcqRel);
        pause();
        if self.is_next_in_same_millisecond(cfg, prev, unix_ms) {
            return Some((prev + 1) as i64);
        }
        pause();
        self.fetch_add_rejected(cfg, prev, unix_ms, ev);
        None
    }

    /// Undo an addition that returned `prev`, if nothing changed the
    /// state since: a compare-and-swap from `prev + 1` back to `prev`.
    /// Whether it was undone.
    #[inline]
    fn take_back(&self, prev: u64) -> bool {
        count_rmw();
        self.last_id
            .compare_exchange(
                prev.wrapping_add(1),
                prev,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// The addition of the fast path found no next ID: take it back if
    /// nothing changed the state since (a compare-and-swap from `prev + 1`
    /// to `prev`), so that the general algorithm starts from the last ID
    /// issued, as it would have without the fast path. Where another
    /// backend's addition came in between, the value stays above the last
    /// ID issued, and may carry into the worker field (after the last
    /// sequence number): the general algorithm's successor of any value is
    /// above it, so nothing is issued twice, and the borrowed millisecond
    /// is counted here instead, by the one backend whose addition took
    /// the last sequence number. Taking an addition back is safe because
    /// only the backend that made it could have issued `prev + 1`, and it
    /// did not: every issued ID stays at or below the state.
    #[cold]
    #[inline(never)]
    fn fetch_add_rejected(&self, cfg: &Config, prev: u64, unix_ms: i64, ev: &mut Events) {
        #[cfg(test)]
        FAST_REJECTED.with(|c| c.set(c.get() + 1));
        if self.take_back(prev) {
            return;
        }
        let layout = &cfg.layout;
        let (ts, worker, seq) = layout.split(prev);
        if worker == cfg.worker
            && seq == layout.max_sequence()
            && unix_ms - layout.epoch_ms() <= ts as i64
        {
            ev.overflows += 1;
            self.counters
                .sequence_overflows
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The short path of [`Self::try_next`]: `None` whenever anything but
    /// "last ID + 1" could be the answer, or the CAS kept losing races.
    ///
    /// A lost CAS hands back the current last ID; it is checked against the
    /// same clock reading (exactly as if this caller had been preempted
    /// between reading the clock and the CAS) and tried again after a
    /// short, growing pause, so that contending backends neither repeat
    /// the clock read and the general algorithm for every lost race nor
    /// keep the state's cache line bouncing between them.
    #[inline(always)]
    fn try_next_same_millisecond(
        &self,
        cfg: &Config,
        _clock: &impl Clock,
        unix_ms: i64,
    ) -> Option<i64> {
        let mut last = self.last_id.load(Ordering::Acquire);
        let mut pause = 1u32;
        loop {
            if !self.is_next_in_same_millisecond(cfg, last, unix_ms) {
                return None;
            }
            count_rmw();
            match self.last_id.compare_exchange_weak(
                last,
                last + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some((last + 1) as i64),
                Err(now) if pause <= MAX_CAS_PAUSE => {
                    last = now;
                    for _ in 0..pause {
                        std::hint::spin_loop();
                    }
                    pause *= 2;
                }
                Err(_) => return None,
            }
        }
    }

    /// Whether "`last` + 1" is the next ID at wall-clock ms `unix_ms`, and
    /// may be issued without consulting anything but the short path's
    /// fields.
    #[inline(always)]
    fn is_next_in_same_millisecond(&self, cfg: &Config, last: u64, unix_ms: i64) -> bool {
        let layout = &cfg.layout;
        let (last_ts, last_worker, last_seq) = layout.split(last);
        if last_worker != cfg.worker || last_seq == layout.max_sequence() {
            return false; // another worker's ID, or a new millisecond needed
        }
        let Some(now) = unix_ms.checked_sub(layout.epoch_ms()) else {
            return false;
        };
        if now != last_ts as i64 {
            // The wall clock is behind the last ID (a burst, or a step
            // back): only when the clocks were measured in this wall-clock
            // millisecond already, and the ID is within the lead bound
            // without consulting the reference clock.
            if now > last_ts as i64
                || now < 0
                || self.behind_seen_ms.load(Ordering::Relaxed) != unix_ms
                || last_ts > (now as u64).saturating_add(self.max_lead_ms(cfg))
            {
                return false;
            }
        }
        layout.epoch_ms() + last_ts as i64 <= self.reserved_until_ms.load(Ordering::Acquire)
    }

    /// [`Self::try_next`] beyond the fast (or short) path: a block of one.
    /// With `fast`, a compare-and-swap lost to another backend goes back
    /// to the fast path as soon as the value it lost to is one the next ID
    /// may follow, instead of competing with every other backend's
    /// additions: the state was lifted (by someone else), and a
    /// `fetch_add` cannot lose.
    #[inline(never)]
    fn try_next_general(
        &self,
        cfg: &Config,
        clock: &impl Clock,
        ev: &mut Events,
        fast: bool,
    ) -> Result<Attempt, GenError> {
        loop {
            match self.block_once(cfg, clock, ev, 1, u64::MAX, fast)? {
                Some(a) => return Ok(a.map(|b| b.first)),
                None => {
                    if let Some(id) = self.try_next_fetch_add(cfg, clock.wall_ms(), ev, &mut || {})
                    {
                        return Ok(Attempt::Issued(id));
                    }
                }
            }
        }
    }

    /// One attempt at issuing up to `want` consecutive IDs with a single
    /// compare-and-swap (at least one). The block starts where a single ID
    /// would and continues at the next timeline positions, borrowing future
    /// milliseconds as needed; it is cut short where it would pass the lead
    /// bound or the layout's last millisecond, so it may hold fewer than
    /// `want` IDs. It waits for a reservation covering its whole end.
    #[inline(always)]
    pub fn try_next_block(
        &self,
        cfg: &Config,
        clock: &impl Clock,
        ev: &mut Events,
        want: u64,
    ) -> Result<BlockAttempt, GenError> {
        self.try_next_block_within(cfg, clock, ev, want, u64::MAX)
    }

    /// [`Self::try_next_block`] for a call that may take IDs only up to
    /// `share_ms` ahead of the reference clock, its share of the lead
    /// (`snowflake_nextval(count)`: `snowflake_id.bulk_lead_share`), so
    /// that the rest of `max_lead` stays free for every other caller. A
    /// block stops at the share. Held back by its share alone, the call
    /// waits for the clock (at most [`MAX_WAIT_MS`] at a time, and longer
    /// waits are not taken for a clock jump): that is the call pacing
    /// itself, not back-pressure, so it is not counted (neither in
    /// [`Events::waits`] nor in [`Counters::backpressure_waits`]), and it
    /// never holds others to a lower bound (the lead cap). With
    /// `share_ms` = `u64::MAX` this is exactly `try_next_block` (and the
    /// compiled single-ID path is the same instructions).
    #[inline(always)]
    pub fn try_next_block_within(
        &self,
        cfg: &Config,
        clock: &impl Clock,
        ev: &mut Events,
        want: u64,
        share_ms: u64,
    ) -> Result<BlockAttempt, GenError> {
        loop {
            if let Some(a) = self.block_once(cfg, clock, ev, want, share_ms, false)? {
                return Ok(a);
            }
        }
    }

    /// One attempt of [`Self::try_next_block_within`]: `None` when its
    /// compare-and-swap lost to another backend, or it re-anchored the
    /// reference clock, and it must be tried again. With
    /// `back_to_fast_path`, a lost compare-and-swap also ends the attempt
    /// (`None`) where the value it lost to is one the fast path continues
    /// (see [`Self::try_next_general`]); otherwise it is retried here.
    #[inline(always)]
    fn block_once(
        &self,
        cfg: &Config,
        clock: &impl Clock,
        ev: &mut Events,
        want: u64,
        share_ms: u64,
        back_to_fast_path: bool,
    ) -> Result<Option<BlockAttempt>, GenError> {
        let layout = &cfg.layout;
        let want = want.max(1);
        loop {
            let max_lead = self.max_lead_ms(cfg);
            let share = max_lead.min(share_ms);
            let last = self.last_id.load(Ordering::Acquire);
            let wall = clock.wall_ns();
            let unix_ms = wall.div_euclid(1_000_000);
            if unix_ms < layout.epoch_ms() {
                return Err(GenError::BeforeEpoch {
                    unix_ms,
                    epoch_ms: layout.epoch_ms(),
                });
            }
            let now = (unix_ms - layout.epoch_ms()) as u64;
            let last_ts = layout.timestamp_of(last);
            // The monotonic clock is read when the wall clock reaches a new
            // millisecond, and while it is behind the last ID (a burst, or
            // a step back) by the first caller in each wall-clock
            // millisecond, server-wide: a step is seen within a
            // millisecond, and the rest of a burst, like the
            // same-millisecond path, costs one wall-clock read and one CAS.
            let mut mono = None;
            if now > last_ts || (now < last_ts && self.first_behind_read(unix_ms)) {
                let m = clock.mono_ns();
                self.observe(wall, m, clock, ev);
                mono = Some(m);
            }
            // A leased worker id: every call off the short path checks the
            // lease's deadline itself (the short path continues a
            // millisecond that such a call opened, at most a wall-clock
            // millisecond earlier).
            let deadline = self.lease_deadline_ns.load(Ordering::Acquire);
            if deadline != NO_DEADLINE && clock.lease_ns() >= deadline {
                return Err(self.lease_ran_out(cfg, last));
            }
            let (cand, wrapped) = match layout.successor(last, now, cfg.worker) {
                Ok(x) => x,
                Err(_) => {
                    return Err(GenError::Exhausted {
                        last_unix_ms: layout.last_unix_ms(),
                    })
                }
            };
            let cand_ts = layout.timestamp_of(cand);
            let first_pos = layout.position(cand);
            let mut end_pos = first_pos
                .saturating_add(want - 1)
                .min(layout.max_position());
            let mut end_ts = end_pos >> layout.sequence_bits();
            // The reference clock is never behind the wall clock, so a block
            // that ends within max_lead (or the call's share) of the wall
            // clock is within the bound without reading the monotonic
            // clock: a burst ahead of the clock costs one clock read per
            // ID, like any other call.
            if end_ts > now.saturating_add(share) {
                let m = mono.unwrap_or_else(|| clock.mono_ns());
                // A block that opens a fresh wall-clock millisecond is sized
                // against the wall clock itself: its CAS repays any debt of
                // a step back or a restart and lowers the reference clock
                // to the wall clock (below), so a block sized against the
                // old reference could end as far ahead as the step was, and
                // every later caller would wait for it (or re-anchor).
                let reference_ns = if now > last_ts {
                    wall
                } else {
                    self.reference_ns(m, wall)
                };
                let reference = reference_ns.div_euclid(1_000_000) - layout.epoch_ms();
                let limit = reference.saturating_add(max_lead as i64);
                if cand_ts as i64 > limit {
                    let excess = (cand_ts as i64 - limit) as u64;
                    // Whoever is held back holds everyone to its bound
                    // until IDs are back on the wall clock: a session still
                    // running under a higher, older max_lead cannot borrow
                    // a whole lead again after every re-anchor.
                    self.cap_lead(cfg.max_lead_ms);
                    if excess <= MAX_WAIT_MS {
                        ev.waits += 1;
                        self.counters
                            .backpressure_waits
                            .fetch_add(1, Ordering::Relaxed);
                        // The ID is admitted when the reference clock
                        // reaches the start of millisecond
                        // cand_ts - max_lead: sleep exactly until then
                        // (rounded up to a microsecond), not to the end
                        // of a whole millisecond.
                        let admit_ns = (cand_ts as i64 - max_lead as i64 + layout.epoch_ms())
                            .saturating_mul(1_000_000);
                        let wait_ns = admit_ns.saturating_sub(reference_ns).max(1);
                        return Ok(Some(BlockAttempt::Wait((wait_ns as u64).div_ceil(1_000))));
                    }
                    // Not a burst: re-anchor the reference clock so that
                    // this ID is exactly at the bound, and go on.
                    let target_ms = cand_ts as i64 - max_lead as i64 + layout.epoch_ms();
                    self.max_offset
                        .fetch_max(target_ms.saturating_mul(1_000_000) - m, Ordering::AcqRel);
                    ev.reanchored = true;
                    return Ok(None);
                }
                let share_limit = reference.saturating_add(share as i64);
                if cand_ts as i64 > share_limit {
                    // Within max_lead, beyond this call's share: the rest
                    // of the lead is left to the others. Wait until the
                    // reference clock reaches cand_ts - share.
                    let admit_ns = (cand_ts as i64 - share as i64 + layout.epoch_ms())
                        .saturating_mul(1_000_000);
                    let wait_ns = admit_ns
                        .saturating_sub(reference_ns)
                        .clamp(1, MAX_WAIT_MS as i64 * 1_000_000);
                    return Ok(Some(BlockAttempt::Wait((wait_ns as u64).div_ceil(1_000))));
                }
                if end_ts as i64 > share_limit {
                    // A block stops at the bound, or at the call's share
                    // (share_limit >= cand_ts here).
                    end_ts = share_limit as u64;
                    end_pos = ((end_ts + 1) << layout.sequence_bits()) - 1;
                }
            }
            let end_unix_ms = layout.epoch_ms() + end_ts as i64;
            if end_unix_ms > self.reserved_until_ms.load(Ordering::Acquire) {
                self.counters
                    .reservation_waits
                    .fetch_add(1, Ordering::Relaxed);
                return Ok(Some(BlockAttempt::Reserve(end_unix_ms)));
            }
            // Read after the reservation: a reservation raised for a newly
            // assigned worker id is published after the assignment, so a
            // caller that saw it sees the assignment too
            // (`Self::assign_worker`).
            let assigned = self.assigned_worker.load(Ordering::Acquire);
            if assigned != STATIC_WORKER && assigned != cfg.worker {
                return Err(GenError::WorkerNotHeld { worker: cfg.worker });
            }
            let end = layout.at_position(end_pos, cfg.worker);
            count_rmw();
            let swapped =
                self.last_id
                    .compare_exchange_weak(last, end, Ordering::AcqRel, Ordering::Acquire);
            if let Err(now_last) = swapped {
                if back_to_fast_path && self.is_next_in_same_millisecond(cfg, now_last, unix_ms) {
                    return Ok(None);
                }
                continue;
            }
            {
                // Checked again after the compare-and-swap: a caller held
                // up between the check above and its swap (preempted,
                // stopped) hands out nothing it swapped after the deadline.
                if deadline != NO_DEADLINE && clock.lease_ns() >= deadline {
                    return Err(self.lease_ran_out(cfg, end));
                }
                // Milliseconds borrowed: the first ID's wrap, and every
                // millisecond boundary the block crosses.
                let borrowed = wrapped as u64 + (end_ts - cand_ts);
                if borrowed > 0 {
                    ev.overflows += borrowed as u32;
                    self.counters
                        .sequence_overflows
                        .fetch_add(borrowed, Ordering::Relaxed);
                }
                if cand_ts == now && now > last_ts {
                    // IDs are back on the wall clock: any debt from a step
                    // back or a restart jump is repaid, so the reference
                    // clock returns to the wall clock and later bursts are
                    // bounded by max_lead again (each caller's own).
                    if let Some(m) = mono {
                        self.resync_reference(wall - m);
                    }
                    if self.lead_cap_ms.load(Ordering::Relaxed) != NO_CAP {
                        self.lead_cap_ms.store(NO_CAP, Ordering::Relaxed);
                    }
                }
                return Ok(Some(BlockAttempt::Issued(Block {
                    first: cand as i64,
                    count: end_pos - first_pos + 1,
                })));
            }
        }
    }

    /// The lease's deadline passed: fence the short path and refuse. The
    /// last ID is raised to a full sequence in its millisecond, so that a
    /// short-path compare-and-swap prepared before (by a caller that read
    /// the last ID before the deadline) fails, and every later caller
    /// comes here through the general path. Only ever raises the last ID.
    #[cold]
    #[inline(never)]
    fn lease_ran_out(&self, cfg: &Config, last: u64) -> GenError {
        let layout = &cfg.layout;
        let fence = layout.pack(
            layout.timestamp_of(last),
            layout.max_worker(),
            layout.max_sequence(),
        );
        count_rmw();
        self.last_id.fetch_max(fence, Ordering::AcqRel);
        GenError::LeaseExpired { worker: cfg.worker }
    }

    /// Publish the held lease's local deadline on [`Clock::lease_ns`]
    /// (the lease worker, after each grant or renewal; [`NO_DEADLINE`]
    /// where the worker id is not leased).
    pub fn set_lease_deadline(&self, deadline_ns: i64) {
        self.lease_deadline_ns.store(deadline_ns, Ordering::Release);
    }

    /// Issue an ID, sleeping through back-pressure with `sleep_us`. Only
    /// for states without a durable reservation (tests, tools): a
    /// reservation request is a logic error here.
    pub fn next_id(
        &self,
        cfg: &Config,
        clock: &impl Clock,
        ev: &mut Events,
        sleep_us: impl FnMut(u64),
    ) -> Result<i64, GenError> {
        until_issued(
            || self.try_next(cfg, clock, ev),
            sleep_us,
            no_host_reservation,
        )
    }

    /// Issue a block of up to `want` IDs (see [`Self::try_next_block`]),
    /// sleeping through back-pressure. Like [`Self::next_id`], only for
    /// states without a durable reservation.
    pub fn next_block(
        &self,
        cfg: &Config,
        clock: &impl Clock,
        ev: &mut Events,
        want: u64,
        sleep_us: impl FnMut(u64),
    ) -> Result<Block, GenError> {
        until_issued(
            || self.try_next_block(cfg, clock, ev, want),
            sleep_us,
            no_host_reservation,
        )
    }

    /// Server-wide rate limiter for clock-step warnings: true at most once
    /// per [`WARN_INTERVAL_MS`].
    pub fn should_warn(&self, now_ms: i64) -> bool {
        let prev = self.last_warning_ms.load(Ordering::Acquire);
        if prev != UNSET && now_ms.saturating_sub(prev) < WARN_INTERVAL_MS && now_ms >= prev {
            return false;
        }
        self.last_warning_ms
            .compare_exchange(prev, now_ms, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// How far the last issued ID is ahead of `wall_unix_ms` (negative when
    /// behind), in ms.
    pub fn lead_ms(&self, layout: &Layout, wall_unix_ms: i64) -> Option<i64> {
        self.last_issued()
            .map(|id| layout.epoch_ms() + layout.timestamp_of(id as u64) as i64 - wall_unix_ms)
    }
}
