//! The lock-free generator state machine.
//!
//! All state that several processes share is in [`GeneratorState`], a
//! `#[repr(C)]` block of atomics that the extension places in PostgreSQL
//! shared memory. The hot path is one compare-and-swap on `last_id`, the last
//! ID issued by this server (the packed state *is* the last ID).
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

use crate::clock::Clock;
use crate::layout::Layout;
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

const UNSET: i64 = i64::MIN;
const NO_CAP: u64 = u64::MAX;

/// Shared generator state: lives in shared memory, one per server.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct GeneratorState {
    /// The last ID issued (0 = none yet).
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
    /// Event counters, on their own cache line: they are only touched on
    /// rare events, never on the common path.
    pub counters: Counters,
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

/// What one attempt produced: an ID ([`GeneratorState::try_next`]) or a
/// [`Block`] ([`GeneratorState::try_next_block`]), or what to do first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempt<T = i64> {
    Issued(T),
    /// Back-pressure: sleep this many microseconds (until the reference
    /// clock admits the next ID), then try again.
    Wait(u64),
    /// The next ID needs a reservation up to this Unix ms to be persisted
    /// first; extend it (see [`GeneratorState::renewal_target`]) and retry.
    Reserve(i64),
}

/// A run of consecutive IDs of one worker, issued by one compare-and-swap:
/// `count` IDs at consecutive timeline positions starting at `first`
/// (see [`Layout::position`]), crossing millisecond boundaries as needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub first: i64,
    pub count: u64,
}

impl Block {
    /// The IDs of the block, in increasing order.
    pub fn ids(self, layout: Layout) -> impl Iterator<Item = i64> {
        let first = layout.position(self.first as u64);
        let worker = layout.split(self.first as u64).1;
        (first..first + self.count).map(move |p| layout.at_position(p, worker) as i64)
    }

    /// The last ID of the block.
    pub fn last(self, layout: &Layout) -> i64 {
        let (_, worker, _) = layout.split(self.first as u64);
        layout.at_position(layout.position(self.first as u64) + self.count - 1, worker) as i64
    }
}

/// What one block attempt produced (see [`GeneratorState::try_next_block`]).
pub type BlockAttempt = Attempt<Block>;

impl<T> Attempt<T> {
    /// The same outcome with the issued value converted.
    #[inline]
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Attempt<U> {
        match self {
            Attempt::Issued(x) => Attempt::Issued(f(x)),
            Attempt::Wait(us) => Attempt::Wait(us),
            Attempt::Reserve(ms) => Attempt::Reserve(ms),
        }
    }
}

/// Repeat `attempt` until it issues (an ID or a block), sleeping through
/// back-pressure with `sleep_us` and persisting a reservation with
/// `reserve` (its argument: the Unix ms to reserve up to) when asked to.
/// The one retry loop of every caller: [`GeneratorState::next_id`],
/// [`GeneratorState::next_block`] and the extension's SQL functions.
#[inline(always)]
pub fn until_issued<T>(
    mut attempt: impl FnMut() -> Result<Attempt<T>, GenError>,
    mut sleep_us: impl FnMut(u64),
    mut reserve: impl FnMut(i64),
) -> Result<T, GenError> {
    loop {
        match attempt()? {
            Attempt::Issued(x) => return Ok(x),
            Attempt::Wait(us) => sleep_us(us),
            Attempt::Reserve(ms) => reserve(ms),
        }
    }
}

/// The `reserve` of states without a durable reservation (tests, tools),
/// which never ask for one.
fn no_host_reservation(ms: i64) {
    unreachable!("reservation to {ms} requested without a host")
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

    /// State for a server that persisted a reservation up to
    /// `reserved_ms` before it stopped or crashed: every ID it issues now
    /// carries a later millisecond, and the reference clock starts there
    /// too, so a clock that is behind does not count as lead.
    ///
    /// A reservation at or past the layout's last millisecond means IDs up
    /// to the end of the layout may have been issued: the ID space is used
    /// up, and every call fails with [`GenError::Exhausted`]. A reservation
    /// before the epoch covers no ID at all.
    pub fn resume_above(reserved_ms: i64, layout: &Layout, mono_ns: i64) -> Self {
        let st = Self::new();
        st.reserved_until_ms.store(reserved_ms, Ordering::Relaxed);
        st.raise_above(reserved_ms, layout, mono_ns);
        st
    }

    /// Make every later ID carry a millisecond after `reserved_ms` (or fail
    /// with [`GenError::Exhausted`] when that is past the layout), and start
    /// the reference clock there: what [`Self::resume_above`] does at
    /// start-up, for a reservation learnt later, such as one replayed from
    /// the write-ahead log on a standby. Only ever raises the state, so
    /// replaying an older reservation changes nothing. Not for a state that
    /// is issuing IDs concurrently with a lower floor in mind: the caller
    /// makes sure nobody mints meanwhile (a server in recovery refuses).
    pub fn raise_above(&self, reserved_ms: i64, layout: &Layout, mono_ns: i64) {
        let floor_ms = reserved_ms.min(layout.last_unix_ms());
        if let Ok(off) = layout.offset_of(floor_ms) {
            let floor = layout.pack(off, layout.max_worker(), layout.max_sequence());
            self.last_id.fetch_max(floor, Ordering::AcqRel);
        }
        let next_ns = reserved_ms.saturating_add(1).saturating_mul(1_000_000);
        // UNSET is i64::MIN, so this sets an unset offset too.
        self.max_offset
            .fetch_max(next_ns.saturating_sub(mono_ns), Ordering::AcqRel);
    }

    /// The Unix ms that the generator has used or may soon use: the
    /// latest of the last ID's timestamp, the wall clock and the
    /// reference clock.
    pub fn frontier_ms(&self, layout: &Layout, wall_ns: i64, mono_ns: i64) -> i64 {
        let wall_ms = wall_ns.div_euclid(1_000_000);
        let last =
            layout.epoch_ms() + layout.timestamp_of(self.last_id.load(Ordering::Acquire)) as i64;
        let reference = match self.max_offset.load(Ordering::Acquire) {
            UNSET => wall_ms,
            off => mono_ns.saturating_add(off).div_euclid(1_000_000),
        };
        wall_ms.max(last).max(reference)
    }

    /// The reservation to persist next: `window_ms` beyond the frontier,
    /// but not past the layout's last millisecond (no ID can carry a later
    /// one), and never below the current one.
    pub fn renewal_target(
        &self,
        layout: &Layout,
        wall_ns: i64,
        mono_ns: i64,
        window_ms: i64,
    ) -> i64 {
        let cur = self.reserved_until_ms.load(Ordering::Acquire);
        let base = self.frontier_ms(layout, wall_ns, mono_ns);
        base.saturating_add(window_ms)
            .min(layout.last_unix_ms())
            .max(if cur == i64::MAX { i64::MIN } else { cur })
    }

    /// True when less than `threshold_ms` of the reservation is left and it
    /// can still grow (it does not cover the layout's end yet).
    pub fn needs_renewal(
        &self,
        layout: &Layout,
        wall_ns: i64,
        mono_ns: i64,
        threshold_ms: i64,
    ) -> bool {
        let cur = self.reserved_until_ms.load(Ordering::Acquire);
        cur != i64::MAX
            && cur < layout.last_unix_ms()
            && cur.saturating_sub(self.frontier_ms(layout, wall_ns, mono_ns)) < threshold_ms
    }

    /// Publish a reservation that has been made durable.
    /// It replaces "unbounded" (`i64::MAX`) and otherwise only grows.
    pub fn publish_reservation(&self, reserved_ms: i64) {
        let mut cur = self.reserved_until_ms.load(Ordering::Acquire);
        while cur == i64::MAX || cur < reserved_ms {
            match self.reserved_until_ms.compare_exchange_weak(
                cur,
                reserved_ms,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
        self.counters
            .reservations_written
            .fetch_add(1, Ordering::Relaxed);
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

    /// One attempt at issuing an ID. Lock-free: it retries its CAS only when
    /// another process issued an ID in between.
    ///
    /// The common case (the next sequence number in the last ID's
    /// millisecond, for the same worker, within the lead bound) takes a
    /// short path: one wall-clock read, a few compares and the CAS. It
    /// issues exactly the ID that [`Self::try_next_block`] with a count of
    /// 1 would (a test checks this from every kind of state), and leaves
    /// everything else to it.
    #[inline(always)]
    pub fn try_next(
        &self,
        cfg: &Config,
        clock: &impl Clock,
        ev: &mut Events,
    ) -> Result<Attempt, GenError> {
        if let Some(id) = self.try_next_same_millisecond(cfg, clock) {
            return Ok(Attempt::Issued(id));
        }
        self.try_next_general(cfg, clock, ev)
    }

    /// The short path of [`Self::try_next`]: `None` whenever anything but
    /// "last ID + 1" could be the answer, or the CAS lost a race.
    #[inline(always)]
    fn try_next_same_millisecond(&self, cfg: &Config, clock: &impl Clock) -> Option<i64> {
        let layout = &cfg.layout;
        let last = self.last_id.load(Ordering::Acquire);
        let unix_ms = clock.wall_ms();
        let (last_ts, last_worker, last_seq) = layout.split(last);
        if last_worker != cfg.worker || last_seq == layout.max_sequence() {
            return None; // another worker's ID, or a new millisecond needed
        }
        let now = unix_ms.checked_sub(layout.epoch_ms())?;
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
                return None;
            }
        }
        if layout.epoch_ms() + last_ts as i64 > self.reserved_until_ms.load(Ordering::Acquire) {
            return None;
        }
        self.last_id
            .compare_exchange(last, last + 1, Ordering::AcqRel, Ordering::Relaxed)
            .ok()
            .map(|_| (last + 1) as i64)
    }

    /// [`Self::try_next`] beyond the short path: a block of one.
    #[inline(never)]
    fn try_next_general(
        &self,
        cfg: &Config,
        clock: &impl Clock,
        ev: &mut Events,
    ) -> Result<Attempt, GenError> {
        Ok(self.try_next_block(cfg, clock, ev, 1)?.map(|b| b.first))
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
        let layout = &cfg.layout;
        let want = want.max(1);
        loop {
            let max_lead = self.max_lead_ms(cfg);
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
            // that ends within max_lead of the wall clock is within the
            // bound without reading the monotonic clock: a burst ahead of
            // the clock costs one clock read per ID, like any other call.
            if end_ts > now.saturating_add(max_lead) {
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
                        return Ok(BlockAttempt::Wait((wait_ns as u64).div_ceil(1_000)));
                    }
                    // Not a burst: re-anchor the reference clock so that
                    // this ID is exactly at the bound, and go on.
                    let target_ms = cand_ts as i64 - max_lead as i64 + layout.epoch_ms();
                    self.max_offset
                        .fetch_max(target_ms.saturating_mul(1_000_000) - m, Ordering::AcqRel);
                    ev.reanchored = true;
                    continue;
                }
                if end_ts as i64 > limit {
                    // A block stops at the bound (limit >= cand_ts here).
                    end_ts = limit as u64;
                    end_pos = ((end_ts + 1) << layout.sequence_bits()) - 1;
                }
            }
            let end_unix_ms = layout.epoch_ms() + end_ts as i64;
            if end_unix_ms > self.reserved_until_ms.load(Ordering::Acquire) {
                self.counters
                    .reservation_waits
                    .fetch_add(1, Ordering::Relaxed);
                return Ok(BlockAttempt::Reserve(end_unix_ms));
            }
            let end = layout.at_position(end_pos, cfg.worker);
            if self
                .last_id
                .compare_exchange_weak(last, end, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
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
                return Ok(BlockAttempt::Issued(Block {
                    first: cand as i64,
                    count: end_pos - first_pos + 1,
                }));
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{ManualClock, SystemClock};
    use std::sync::Arc;

    const MS: i64 = 1_000_000;
    // 2025-06-01 00:00:00 UTC in ns, and an arbitrary monotonic origin.
    const T0: i64 = 1_748_736_000_000 * MS;
    const M0: i64 = 12_345 * MS;

    fn cfg(max_lead_ms: u64) -> Config {
        Config {
            layout: Layout::default_layout(),
            worker: 42,
            max_lead_ms,
        }
    }

    fn issue(st: &GeneratorState, c: &Config, clock: &ManualClock) -> (i64, Events) {
        let mut ev = Events::default();
        match st.try_next(c, clock, &mut ev).unwrap() {
            Attempt::Issued(id) => (id, ev),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn ids_carry_time_and_worker() {
        let st = GeneratorState::new();
        let c = cfg(1000);
        let clock = ManualClock::new(T0, M0);
        let (id, _) = issue(&st, &c, &clock);
        let p = c.layout.decode(id).unwrap();
        assert_eq!(p.unix_ms, T0 / MS);
        assert_eq!(p.worker, 42);
        assert_eq!(st.last_issued(), Some(id));
    }

    #[test]
    fn sequence_overflow_borrows_next_millisecond() {
        let st = GeneratorState::new();
        let c = cfg(1000);
        let clock = ManualClock::new(T0, M0);
        let mut prev = 0;
        let mut overflows = 0;
        // Three full milliseconds' worth of IDs with the clock frozen.
        for _ in 0..3 * 4096 {
            let (id, ev) = issue(&st, &c, &clock);
            assert!(id > prev);
            prev = id;
            overflows += ev.overflows;
        }
        let p = c.layout.decode(prev).unwrap();
        assert!(p.unix_ms >= T0 / MS + 2 && p.unix_ms <= T0 / MS + 3);
        assert!((2..=3).contains(&overflows), "{overflows}");
    }

    fn step_back(step_ns: i64) {
        let st = GeneratorState::new();
        let c = cfg(1000);
        let clock = ManualClock::new(T0, M0);
        let mut ids = vec![];
        for _ in 0..10 {
            ids.push(issue(&st, &c, &clock).0);
            clock.advance(MS);
        }
        let before = *ids.last().unwrap();
        clock.step_wall(-step_ns);
        let mut steps = vec![];
        // Keep going for a while at a modest rate: no waits, no decrease,
        // and the timestamp stays at the last issued one (HLC).
        for i in 0..2000 {
            let mut ev = Events::default();
            match st.try_next(&c, &clock, &mut ev).unwrap() {
                Attempt::Issued(id) => ids.push(id),
                other => panic!("{other:?} after a step back at {i}"),
            }
            if let Some(s) = ev.step_back_ns {
                steps.push(s);
            }
            if i % 3 == 0 {
                clock.advance(MS);
            }
        }
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "not increasing");
        let after = ids[10];
        assert!(after > before);
        if step_ns >= 2 * MS {
            assert_eq!(steps.len(), 1, "one step, reported once: {steps:?}");
            assert!(
                steps[0] <= step_ns && steps[0] > step_ns - 2 * MS,
                "{steps:?}"
            );
        }
        let p = c.layout.decode(after).unwrap();
        assert_eq!(p.unix_ms, c.layout.decode(before).unwrap().unix_ms);
    }

    #[test]
    fn clock_step_back_1ms() {
        step_back(MS);
    }
    #[test]
    fn clock_step_back_1s() {
        step_back(1000 * MS);
    }
    #[test]
    fn clock_step_back_1h() {
        step_back(3_600_000 * MS);
    }

    #[test]
    fn step_back_then_clock_catches_up() {
        let st = GeneratorState::new();
        let c = cfg(1000);
        let clock = ManualClock::new(T0, M0);
        let (a, _) = issue(&st, &c, &clock);
        clock.step_wall(-5000 * MS);
        let (b, _) = issue(&st, &c, &clock);
        assert_eq!(b, a + 1);
        clock.advance(5001 * MS);
        let (d, _) = issue(&st, &c, &clock);
        assert_eq!(c.layout.decode(d).unwrap().unix_ms, T0 / MS + 1);
        // Wall-clock time again, with a varying start sequence.
        assert!(d > b);
    }

    #[test]
    fn burst_is_bounded_by_lead() {
        let st = GeneratorState::new();
        let c = cfg(5);
        let clock = ManualClock::new(T0, M0);
        let mut waits = 0;
        let mut issued = 0;
        let mut last = 0;
        // Frozen clock: at most (5 + 1) ms of IDs, then back-pressure.
        loop {
            let mut ev = Events::default();
            match st.try_next(&c, &clock, &mut ev).unwrap() {
                Attempt::Issued(id) => {
                    assert!(id > last);
                    last = id;
                    issued += 1;
                }
                Attempt::Wait(us) => {
                    // The clock is at the start of a millisecond: a whole one.
                    assert_eq!(us, 1000);
                    waits += 1;
                    break;
                }
                Attempt::Reserve(_) => panic!("no reservation in this test"),
            }
            assert!(issued < 100_000, "lead bound never reached");
        }
        assert_eq!(waits, 1);
        let lead = st.lead_ms(&c.layout, T0 / MS).unwrap();
        assert_eq!(lead, 5);
        assert!(issued > 5 * 4096 && issued <= 6 * 4096, "{issued}");
        // Time passes: capacity comes back one millisecond at a time.
        clock.advance(MS);
        for _ in 0..4096 {
            let (id, _) = issue(&st, &c, &clock);
            assert!(id > last);
            last = id;
        }
        assert_eq!(st.lead_ms(&c.layout, T0 / MS + 1).unwrap(), 5);
        let mut ev = Events::default();
        assert_eq!(
            st.try_next(&c, &clock, &mut ev).unwrap(),
            Attempt::Wait(1000)
        );
        // 0.3 ms later only the rest of the millisecond is left to wait.
        clock.advance(300_000);
        assert_eq!(
            st.try_next(&c, &clock, &mut ev).unwrap(),
            Attempt::Wait(700)
        );
        clock.advance(699_999);
        assert_eq!(st.try_next(&c, &clock, &mut ev).unwrap(), Attempt::Wait(1));
        clock.advance(1);
        assert!(matches!(
            st.try_next(&c, &clock, &mut ev).unwrap(),
            Attempt::Issued(_)
        ));
    }

    #[test]
    fn zero_lead_waits_for_next_millisecond() {
        let st = GeneratorState::new();
        let c = cfg(0);
        let clock = ManualClock::new(T0, M0);
        let mut n = 0;
        let mut ev = Events::default();
        while let Attempt::Issued(_) = st.try_next(&c, &clock, &mut ev).unwrap() {
            n += 1;
        }
        // The whole first millisecond from its start sequence, then a wait.
        let start = c
            .layout
            .start_sequence((T0 / MS - c.layout.epoch_ms()) as u64, 42);
        assert_eq!(n, 4096 - start);
    }

    #[test]
    fn lead_is_measured_against_pre_step_timeline() {
        let st = GeneratorState::new();
        let c = cfg(5);
        let clock = ManualClock::new(T0, M0);
        issue(&st, &c, &clock);
        clock.step_wall(-3_600_000 * MS);
        // A full-rate burst right after a one-hour step back: as many IDs as
        // the lead allows on the old timeline, not a one-hour stall.
        let mut issued = 0;
        let mut ev = Events::default();
        while let Attempt::Issued(_) = st.try_next(&c, &clock, &mut ev).unwrap() {
            issued += 1;
            assert!(issued < 100_000);
        }
        assert!(issued > 4 * 4096, "{issued}");
        assert_eq!(ev.waits, 1);
        assert!(ev.step_back_ns.is_some());
        // And the timeline keeps moving with real time.
        clock.advance(10 * MS);
        let (_, ev) = issue(&st, &c, &clock);
        assert_eq!(ev.waits, 0);
    }

    #[test]
    fn lead_bound_returns_to_wall_clock_after_catch_up() {
        let st = GeneratorState::new();
        let c = cfg(5);
        let clock = ManualClock::new(T0, M0);
        let (before, _) = issue(&st, &c, &clock);
        clock.step_wall(-10_000 * MS);
        issue(&st, &c, &clock);
        // Light traffic while the clock catches up with the IDs.
        for _ in 0..11 {
            clock.advance(1000 * MS);
            let (id, _) = issue(&st, &c, &clock);
            assert!(id > before);
        }
        // Back on wall time: a burst may lead the wall clock by max_lead
        // only, not by the size of the old step.
        let mut ev = Events::default();
        while let Attempt::Issued(_) = st.try_next(&c, &clock, &mut ev).unwrap() {}
        let wall_ms = clock.wall_ns() / MS;
        assert_eq!(st.lead_ms(&c.layout, wall_ms).unwrap(), 5);
    }

    #[test]
    fn monotonic_anomaly_does_not_stall() {
        let st = GeneratorState::new();
        let c = cfg(5);
        let clock = ManualClock::new(T0, M0);
        issue(&st, &c, &clock);
        // Both clocks jump back an hour (e.g. a faked time source).
        clock.step_wall(-3_600_000 * MS);
        clock.step_mono(-3_600_000 * MS);
        let mut ev = Events::default();
        let mut slept = 0;
        for _ in 0..20_000 {
            st.next_id(&c, &clock, &mut ev, |us| {
                slept += us;
                clock.advance(us as i64 * 1_000)
            })
            .unwrap();
        }
        assert!(ev.reanchored);
        assert!(slept < 50_000, "slept {slept} µs");
    }

    #[test]
    fn clock_outside_range_is_an_error() {
        let st = GeneratorState::new();
        let c = cfg(1000);
        let before = ManualClock::new((c.layout.epoch_ms() - 1) * MS, M0);
        assert!(matches!(
            st.try_next(&c, &before, &mut Events::default()),
            Err(GenError::BeforeEpoch { .. })
        ));
        let end = ManualClock::new((c.layout.last_unix_ms() + 1) * MS, M0);
        assert!(matches!(
            st.try_next(&c, &end, &mut Events::default()),
            Err(GenError::Exhausted { .. })
        ));
        // The very last millisecond works until its sequence runs out,
        // then it is an error, never a wrapped or negative ID.
        let st = GeneratorState::new();
        let last = ManualClock::new(c.layout.last_unix_ms() * MS, M0);
        let mut ids = 0;
        let err = loop {
            match st.try_next(&c, &last, &mut Events::default()) {
                Ok(Attempt::Issued(id)) => {
                    assert!(id > 0);
                    ids += 1
                }
                Ok(other) => panic!("unexpected {other:?}"),
                Err(e) => break e,
            }
        };
        assert!(matches!(err, GenError::Exhausted { .. }));
        assert!(ids > 0 && ids <= 4096);
        assert_eq!(st.last_issued().unwrap() & 0xFFF, 4095);
    }

    #[test]
    fn worker_change_keeps_ids_increasing() {
        let st = GeneratorState::new();
        let clock = ManualClock::new(T0, M0);
        let mut c = cfg(1000);
        let (a, _) = issue(&st, &c, &clock);
        c.worker = 3;
        let (b, _) = issue(&st, &c, &clock);
        assert!(b > a);
        assert_eq!(c.layout.decode(b).unwrap().worker, 3);
    }

    #[test]
    fn low_traffic_ids_spread_over_residues() {
        let st = GeneratorState::new();
        let c = cfg(1000);
        let clock = ManualClock::new(T0, M0);
        let mut even = 0;
        let mut mod8 = [0; 8];
        for _ in 0..8000 {
            let (id, _) = issue(&st, &c, &clock);
            even += (id % 2 == 0) as i32;
            mod8[(id % 8) as usize] += 1;
            clock.advance(3 * MS);
        }
        assert!((3600..=4400).contains(&even), "{even}");
        for n in mod8 {
            assert!((800..=1200).contains(&n), "{mod8:?}");
        }
    }

    #[test]
    fn warnings_are_rate_limited() {
        let st = GeneratorState::new();
        assert!(st.should_warn(1_000));
        assert!(!st.should_warn(1_001));
        assert!(!st.should_warn(1_000 + WARN_INTERVAL_MS - 1));
        assert!(st.should_warn(1_000 + WARN_INTERVAL_MS));
        // A clock that went back past the last warning may warn again.
        assert!(st.should_warn(0));
    }

    #[test]
    fn reservation_bounds_issuing() {
        let st = GeneratorState::new();
        let c = cfg(1000);
        let clock = ManualClock::new(T0, M0);
        st.publish_reservation(T0 / MS + 2);
        let mut n = 0;
        let req = loop {
            match st.try_next(&c, &clock, &mut Events::default()).unwrap() {
                Attempt::Issued(_) => n += 1,
                Attempt::Reserve(ms) => break ms,
                Attempt::Wait(_) => panic!("no wait expected"),
            }
        };
        // Everything up to the reserved millisecond, then a request for
        // the next one.
        assert_eq!(req, T0 / MS + 3);
        assert!(n > 2 * 4096 && n <= 3 * 4096, "{n}");
        let target = st.renewal_target(&c.layout, clock.wall_ns(), clock.mono_ns(), 2000);
        assert_eq!(target, T0 / MS + 2 + 2000);
        assert!(st.needs_renewal(&c.layout, clock.wall_ns(), clock.mono_ns(), 1000));
        st.publish_reservation(target);
        assert!(!st.needs_renewal(&c.layout, clock.wall_ns(), clock.mono_ns(), 1000));
        issue(&st, &c, &clock);
        // A reservation never moves backwards.
        st.publish_reservation(T0 / MS);
        assert_eq!(st.reserved_until_ms.load(Ordering::Relaxed), target);
    }

    #[test]
    fn raise_above_a_replayed_reservation() {
        let c = cfg(5);
        let clock = ManualClock::new(T0, M0);
        let st = GeneratorState::resume_above(T0 / MS - 5_000, &c.layout, clock.mono_ns());
        st.publish_reservation(i64::MAX - 1);
        // A newer reservation replayed from WAL: IDs continue above it,
        // without waiting although the clock is 3 s behind it.
        st.raise_above(T0 / MS + 3_000, &c.layout, clock.mono_ns());
        // An older one changes nothing.
        st.raise_above(T0 / MS - 1_000, &c.layout, clock.mono_ns());
        let (id, ev) = issue(&st, &c, &clock);
        assert_eq!(c.layout.decode(id).unwrap().unix_ms, T0 / MS + 3_001);
        assert_eq!(ev.waits, 0);
        // Past the end of the layout: used up.
        let st = GeneratorState::new();
        st.raise_above(c.layout.last_unix_ms() + 10, &c.layout, clock.mono_ns());
        assert!(matches!(
            st.try_next(&c, &clock, &mut Events::default()),
            Err(GenError::Exhausted { .. })
        ));
    }

    #[test]
    fn resume_above_reservation_with_clock_a_day_behind() {
        let c = cfg(5);
        let reserved = T0 / MS + 1500;
        let before_restart = c.layout.max_id(reserved).unwrap();
        // Restart: the wall clock is a day behind, the monotonic clock
        // restarted from an unrelated origin.
        let clock = ManualClock::new(T0 - 86_400_000 * MS, 77 * MS);
        let st = GeneratorState::resume_above(reserved, &c.layout, clock.mono_ns());
        st.publish_reservation(st.renewal_target(
            &c.layout,
            clock.wall_ns(),
            clock.mono_ns(),
            2000,
        ));
        let mut prev = before_restart;
        for _ in 0..3 * 4096 {
            // No waits: the restart jump is not a burst.
            let (id, ev) = issue(&st, &c, &clock);
            assert!(id > prev);
            assert_eq!(ev.waits, 0);
            prev = id;
        }
        assert!(c.layout.decode(prev).unwrap().unix_ms > reserved);
    }

    fn block(st: &GeneratorState, c: &Config, clock: &ManualClock, want: u64) -> BlockAttempt {
        st.try_next_block(c, clock, &mut Events::default(), want)
            .unwrap()
    }

    /// A copy of every field of a state (for comparing two runs).
    fn snapshot(st: &GeneratorState) -> [i64; 14] {
        let c = &st.counters;
        [
            st.last_id.load(Ordering::Relaxed) as i64,
            st.behind_seen_ms.load(Ordering::Relaxed),
            st.max_offset.load(Ordering::Relaxed),
            st.ref_offset.load(Ordering::Relaxed),
            st.last_warning_ms.load(Ordering::Relaxed),
            st.reserved_until_ms.load(Ordering::Relaxed),
            st.blocked.load(Ordering::Relaxed) as i64,
            c.sequence_overflows.load(Ordering::Relaxed) as i64,
            c.clock_steps_back.load(Ordering::Relaxed) as i64,
            c.largest_step_back_ns.load(Ordering::Relaxed),
            c.backpressure_waits.load(Ordering::Relaxed) as i64,
            c.reservation_waits.load(Ordering::Relaxed) as i64,
            c.reservations_written.load(Ordering::Relaxed) as i64,
            st.lead_cap_ms.load(Ordering::Relaxed) as i64,
        ]
    }

    fn restore(v: &[i64; 14]) -> GeneratorState {
        let st = GeneratorState::new();
        st.last_id.store(v[0] as u64, Ordering::Relaxed);
        st.behind_seen_ms.store(v[1], Ordering::Relaxed);
        st.max_offset.store(v[2], Ordering::Relaxed);
        st.ref_offset.store(v[3], Ordering::Relaxed);
        st.last_warning_ms.store(v[4], Ordering::Relaxed);
        st.reserved_until_ms.store(v[5], Ordering::Relaxed);
        st.lead_cap_ms.store(v[13] as u64, Ordering::Relaxed);
        st
    }

    /// The short path of `try_next` issues exactly what the general
    /// algorithm (a block of one) would, and changes the state exactly as
    /// it would, from random states of every kind: the last ID in this,
    /// an earlier or a later millisecond, of this or a neighbouring worker,
    /// at any sequence including the last; the clocks measured in this
    /// millisecond or not; reservations and lead bounds that do and do not
    /// cover the next ID; lead caps below and above the lead; clock readings
    /// anywhere within a millisecond.
    #[test]
    fn short_path_agrees_with_the_general_algorithm() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let layout = Layout::default_layout();
        let (mut short, mut general) = (0, 0);
        for _ in 0..200_000 {
            let wall = T0 + rnd(MS as u64) as i64;
            let unix_ms = wall / MS;
            let now = (unix_ms - layout.epoch_ms()) as u64;
            let last_ts = now + rnd(8) - 3; // 3 ms behind to 4 ahead
            let worker = 41 + rnd(3);
            let seq = match rnd(4) {
                0 => layout.max_sequence(),
                1 => layout.max_sequence() - 1,
                _ => rnd(layout.max_sequence() + 1),
            };
            let c = Config {
                layout,
                worker: 42,
                max_lead_ms: [0, 1, 2, 5, 1000][rnd(5) as usize],
            };
            let mut v = snapshot(&GeneratorState::new());
            v[0] = layout.pack(last_ts, worker, seq) as i64;
            v[1] = if rnd(2) == 0 { unix_ms } else { unix_ms - 1 };
            v[2] = if rnd(4) == 0 {
                UNSET
            } else {
                wall - M0 - rnd(2) as i64 * MS
            };
            v[3] = v[2];
            v[5] = match rnd(3) {
                0 => i64::MAX,
                1 => layout.epoch_ms() + last_ts as i64,
                _ => layout.epoch_ms() + last_ts as i64 - 1,
            };
            // No lead cap, or one below, at or above the lead.
            v[13] = match rnd(3) {
                0 => NO_CAP as i64,
                _ => rnd(4) as i64,
            };
            let clock = ManualClock::new(wall, M0);
            let (a, b) = (restore(&v), restore(&v));
            let mut ev = Events::default();
            match a.try_next_same_millisecond(&c, &clock) {
                Some(id) => {
                    short += 1;
                    let want = b.try_next_block(&c, &clock, &mut ev, 1).unwrap();
                    assert_eq!(
                        want,
                        BlockAttempt::Issued(Block {
                            first: id,
                            count: 1
                        }),
                        "state {v:?}, config {c:?}"
                    );
                    assert_eq!(ev, Events::default(), "state {v:?}");
                    assert_eq!(snapshot(&a), snapshot(&b), "state {v:?}");
                }
                None => {
                    general += 1;
                    assert_eq!(
                        snapshot(&a),
                        v,
                        "the short path gave up but changed the state"
                    );
                }
            }
        }
        // Both paths were exercised (the test can not pass vacuously).
        assert!(
            short > 5_000 && general > 5_000,
            "{short} short, {general} general"
        );
    }

    #[test]
    fn block_is_one_cas_of_consecutive_ids() {
        let st = GeneratorState::new();
        let c = cfg(1000);
        let clock = ManualClock::new(T0, M0);
        let (before, _) = issue(&st, &c, &clock);
        let BlockAttempt::Issued(b) = block(&st, &c, &clock, 10_000) else {
            panic!("block not issued")
        };
        assert_eq!(b.count, 10_000);
        let ids: Vec<i64> = b.ids(c.layout).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(ids[0] > before);
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(*ids.last().unwrap(), b.last(&c.layout));
        // The state is the block's last ID: the next single ID follows it.
        assert_eq!(st.last_issued(), Some(b.last(&c.layout)));
        let (after, _) = issue(&st, &c, &clock);
        assert!(after > b.last(&c.layout));
        // Every ID is this worker's, and the block crossed into borrowed
        // milliseconds: 10,000 IDs need 3 of 4096.
        let parts: Vec<_> = ids.iter().map(|id| c.layout.decode(*id).unwrap()).collect();
        assert!(parts.iter().all(|p| p.worker == 42));
        assert_eq!(parts.last().unwrap().unix_ms - parts[0].unix_ms, 2);
        assert_eq!(st.counters.sequence_overflows.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn block_stops_at_the_lead_bound() {
        let st = GeneratorState::new();
        let c = cfg(2);
        let clock = ManualClock::new(T0, M0);
        let BlockAttempt::Issued(b) = block(&st, &c, &clock, 1_000_000) else {
            panic!("block not issued")
        };
        // At most now + 2 ms: the rest of this millisecond and two more.
        let last = c.layout.decode(b.last(&c.layout)).unwrap();
        assert_eq!(last.unix_ms, T0 / MS + 2);
        assert_eq!(last.sequence, 4095);
        assert!(b.count < 3 * 4096 + 4096 && b.count > 2 * 4096);
        // The clock has not moved: the next attempt must wait.
        assert!(matches!(
            block(&st, &c, &clock, 10),
            BlockAttempt::Wait(1000)
        ));
        clock.advance(MS);
        let BlockAttempt::Issued(b2) = block(&st, &c, &clock, 1_000_000) else {
            panic!("block not issued after the clock moved")
        };
        assert_eq!(b2.count, 4096);
        assert!(b2.first > b.last(&c.layout));
    }

    #[test]
    fn block_waits_for_a_reservation_covering_its_end() {
        let st = GeneratorState::new();
        let c = cfg(1000);
        let clock = ManualClock::new(T0, M0);
        st.publish_reservation(T0 / MS + 1);
        // 20,000 IDs reach now + 4 ms: the whole end must be reserved.
        assert_eq!(
            block(&st, &c, &clock, 20_000),
            BlockAttempt::Reserve(T0 / MS + 4)
        );
        assert_eq!(st.last_issued(), None);
        st.publish_reservation(T0 / MS + 4);
        let BlockAttempt::Issued(b) = block(&st, &c, &clock, 20_000) else {
            panic!("block not issued")
        };
        assert_eq!(b.count, 20_000);
    }

    #[test]
    fn block_stops_at_the_end_of_the_layout() {
        let st = GeneratorState::new();
        let l = Layout::new(T0 / MS, 10, 12).unwrap();
        let c = Config {
            layout: l,
            worker: 3,
            max_lead_ms: 1000,
        };
        // The clock in the layout's last millisecond.
        let end_ns = l.last_unix_ms() * MS;
        let clock = ManualClock::new(end_ns, M0);
        let BlockAttempt::Issued(b) = block(&st, &c, &clock, 1_000_000) else {
            panic!("block not issued")
        };
        assert_eq!(
            b.last(&l) as u64,
            l.pack(l.max_timestamp(), 3, l.max_sequence())
        );
        assert!(b.count <= 4096);
        assert!(matches!(
            st.try_next_block(&c, &clock, &mut Events::default(), 5),
            Err(GenError::Exhausted { .. })
        ));
    }

    /// Blocks and single IDs from many threads at once: unique, and
    /// increasing within each thread.
    #[test]
    fn stress_blocks_and_singles() {
        let st = Arc::new(GeneratorState::new());
        let c = cfg(1000);
        let clock: Arc<dyn Clock + Send + Sync> = Arc::new(SystemClock);
        let handles: Vec<_> = (0..8u64)
            .map(|t| {
                let (st, clock) = (st.clone(), clock.clone());
                std::thread::spawn(move || {
                    let mut out = Vec::new();
                    let mut ev = Events::default();
                    let sleep = |us| std::thread::sleep(std::time::Duration::from_micros(us));
                    for i in 0..3_000u64 {
                        if t % 2 == 0 {
                            let want = 1 + (i * 37 + t) % 300;
                            let b = st.next_block(&c, &clock, &mut ev, want, sleep).unwrap();
                            assert!(b.count >= 1 && b.count <= want);
                            out.extend(b.ids(c.layout));
                        } else {
                            out.push(st.next_id(&c, &clock, &mut ev, sleep).unwrap());
                        }
                    }
                    out
                })
            })
            .collect();
        let all = join_unique_ordered(handles);
        let n = all.len();
        assert!(n > 4 * 3_000 * 100, "blocks were too small: {n} IDs");
        assert_eq!(st.last_issued(), all.last().copied());
    }

    /// Threads as backends: each with its own millisecond cache over the
    /// real clocks and the CPU's counter (caching only where the counter is
    /// usable; the IDs must be right either way).
    #[test]
    fn stress_with_per_thread_millisecond_caches() {
        use crate::clock::{CachedClock, MillisCache, Tsc};
        let st = Arc::new(GeneratorState::new());
        let c = cfg(1000);
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let st = st.clone();
                std::thread::spawn(move || {
                    let cache = MillisCache::new(cfg!(target_arch = "x86_64"));
                    let clock = CachedClock {
                        cache: &cache,
                        clock: SystemClock,
                        counter: Tsc,
                    };
                    let mut ev = Events::default();
                    let mut out = Vec::with_capacity(200_000);
                    for _ in 0..200_000 {
                        let id = st
                            .next_id(&c, &clock, &mut ev, |us| {
                                std::thread::sleep(std::time::Duration::from_micros(us))
                            })
                            .unwrap();
                        // The ID is never more than max_lead (+1 ms for the
                        // millisecond in progress) ahead of the real clock.
                        let real_ms = SystemClock.wall_ns().div_euclid(MS);
                        assert!(c.layout.decode(id).unwrap().unix_ms <= real_ms + 1001);
                        out.push(id);
                    }
                    out
                })
            })
            .collect();
        join_unique_ordered(handles);
    }

    /// Join the threads of a stress test: each thread's IDs must strictly
    /// increase, and no ID may repeat across threads. Returns all of them,
    /// sorted.
    fn join_unique_ordered(handles: Vec<std::thread::JoinHandle<Vec<i64>>>) -> Vec<i64> {
        let mut all = Vec::new();
        for h in handles {
            let ids = h.join().unwrap();
            assert!(
                ids.windows(2).all(|w| w[0] < w[1]),
                "per-thread order violated"
            );
            all.extend(ids);
        }
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "duplicate IDs");
        all
    }

    fn stress(clock: Arc<dyn Clock + Send + Sync>, threads: usize, per_thread: usize, lead: u64) {
        let st = Arc::new(GeneratorState::new());
        let c = cfg(lead);
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let st = st.clone();
                let clock = clock.clone();
                std::thread::spawn(move || {
                    let mut out = Vec::with_capacity(per_thread);
                    let mut ev = Events::default();
                    for _ in 0..per_thread {
                        let id = st
                            .next_id(&c, &clock, &mut ev, |us| {
                                std::thread::sleep(std::time::Duration::from_micros(us))
                            })
                            .unwrap();
                        out.push(id);
                    }
                    out
                })
            })
            .collect();
        let all = join_unique_ordered(handles);
        assert_eq!(all.len(), threads * per_thread);
        assert!(all
            .iter()
            .all(|id| c.layout.decode(*id).unwrap().worker == 42));
        assert_eq!(st.last_issued(), all.last().copied());
    }

    impl Clock for Arc<dyn Clock + Send + Sync> {
        fn wall_ns(&self) -> i64 {
            (**self).wall_ns()
        }
        fn mono_ns(&self) -> i64 {
            (**self).mono_ns()
        }
    }

    #[test]
    fn stress_system_clock() {
        stress(Arc::new(SystemClock), 8, 100_000, 1000);
    }

    #[test]
    fn stress_frozen_clock_borrows() {
        // A frozen clock forces every thread through the borrow path.
        stress(Arc::new(ManualClock::new(T0, M0)), 8, 20_000, 1000);
    }

    #[test]
    fn stress_with_clock_steps() {
        let clock = Arc::new(ManualClock::new(T0, M0));
        let stepper = {
            let clock = clock.clone();
            std::thread::spawn(move || {
                for i in 0..200 {
                    clock.advance(MS);
                    if i % 50 == 25 {
                        clock.step_wall(-1000 * MS);
                    }
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
            })
        };
        stress(clock, 6, 30_000, 1000);
        stepper.join().unwrap();
    }
}
