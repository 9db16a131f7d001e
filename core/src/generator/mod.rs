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
//! - this file: the shared state ([`GeneratorState`]), its parameters,
//!   what a caller remembers of its last ID ([`LastMillisecond`]), and
//!   the entry points that sleep through back-pressure (`next_id`,
//!   `next_block`);
//! - `fast_path.rs`: the state machine's single-ID paths (`try_next`,
//!   `try_next_in`, `try_fast`: one `fetch_add`, or the compare-and-swap
//!   short path of a leased worker id);
//! - `general.rs`: the general algorithm (`try_next_block`: one
//!   compare-and-swap from any state, the lead bound, the reservation,
//!   the lease's deadline);
//! - `reference.rs`: the reference clock (measuring `wall - mono`,
//!   detecting steps, the lead cap, rate-limiting step warnings);
//! - [`attempt`]: what one attempt returns ([`Attempt`], [`Block`]) and the
//!   one retry loop ([`until_issued`]);
//! - [`reservation`]: the durable-reservation arithmetic (start-up above a
//!   reservation, renewal targets, publishing a renewed reservation).
//!
//! Unit tests are in `tests.rs` (shared helpers) and `tests/`, one file
//! per subject; the multithreaded stress and model tests are in
//! `core/tests/`.

mod attempt;
mod fast_path;
mod general;
mod reference;
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

    /// How far the last issued ID is ahead of `wall_unix_ms` (negative when
    /// behind), in ms.
    pub fn lead_ms(&self, layout: &Layout, wall_unix_ms: i64) -> Option<i64> {
        self.last_issued()
            .map(|id| layout.epoch_ms() + layout.timestamp_of(id as u64) as i64 - wall_unix_ms)
    }
}
