//! The durable-reservation arithmetic of the generator: starting above a
//! persisted reservation (after a restart, or replayed on a standby),
//! choosing the next reservation to persist, and publishing it.
//!
//! The host (the extension's `reservation` module) persists; this module
//! only decides what to persist and how the shared state follows.

#[cfg(doc)]
use super::GenError;
use super::{GeneratorState, NO_WORKER, STATIC_WORKER, STEP_TOLERANCE_NS, UNSET};

/// How far beyond the last ID a reservation made in debt reaches (see
/// [`GeneratorState::renewal_target`]): IDs ahead of the wall clock stay
/// in few milliseconds unless a burst drives them, and a burst renews
/// again on its own.
pub const DEBT_STEP_MS: i64 = 100;
use crate::layout::Layout;
use std::sync::atomic::Ordering;

impl GeneratorState {
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
    ///
    /// While the reference clock runs ahead of the wall clock (after a
    /// start above a reservation, or a backward step: until IDs are back
    /// on the wall clock), the IDs' lead is debt, not a burst, and the
    /// reservation goes `window_ms` beyond the wall clock and at most
    /// [`DEBT_STEP_MS`] beyond the last ID, not `window_ms` beyond the
    /// reference: after a crash the generator resumes above the whole
    /// reservation, so a reservation a window beyond the debt would add a
    /// window of lead at every crash (issue 55: nine crash restarts about
    /// a second apart left IDs 22 s ahead).
    pub fn renewal_target(
        &self,
        layout: &Layout,
        wall_ns: i64,
        mono_ns: i64,
        window_ms: i64,
    ) -> i64 {
        let cur = self.reserved_until_ms.load(Ordering::Acquire);
        let base = match self.in_debt(layout, wall_ns, mono_ns) {
            Some((wall_ms, last_ms)) => wall_ms
                .saturating_add(window_ms)
                .max(last_ms.saturating_add(DEBT_STEP_MS.min(window_ms))),
            None => self
                .frontier_ms(layout, wall_ns, mono_ns)
                .saturating_add(window_ms),
        };
        base.min(layout.last_unix_ms())
            .max(if cur == i64::MAX { i64::MIN } else { cur })
    }

    /// `Some((wall_ms, last_ms))` while the reference clock is ahead of
    /// the wall clock by more than the step tolerance: the lead of the
    /// IDs is debt (see [`Self::renewal_target`]), and whatever is placed
    /// beyond the IDs to bound them (the reservation, the extension's
    /// high-water marks) goes beyond the wall clock and little beyond the
    /// last ID.
    pub fn in_debt(&self, layout: &Layout, wall_ns: i64, mono_ns: i64) -> Option<(i64, i64)> {
        let off = self.max_offset.load(Ordering::Acquire);
        if off == UNSET || mono_ns.saturating_add(off) <= wall_ns.saturating_add(STEP_TOLERANCE_NS)
        {
            return None;
        }
        let last =
            layout.epoch_ms() + layout.timestamp_of(self.last_id.load(Ordering::Acquire)) as i64;
        Some((wall_ns.div_euclid(1_000_000), last))
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
        // In debt, what IDs have reached, not the reference clock, is
        // what the reservation must stay ahead of (see
        // [`Self::renewal_target`]).
        let reached = match self.in_debt(layout, wall_ns, mono_ns) {
            Some((wall_ms, last_ms)) => wall_ms.max(last_ms),
            None => self.frontier_ms(layout, wall_ns, mono_ns),
        };
        cur != i64::MAX && cur < layout.last_unix_ms() && cur.saturating_sub(reached) < threshold_ms
    }

    /// Hand the generator to `worker` (a leased id; [`NO_WORKER`]: none),
    /// with every later ID above `floor_ms`, the last millisecond an
    /// earlier holder of that id may have used. Callers that read another
    /// worker id before the change get [`GenError::WorkerNotHeld`]:
    /// - a caller's ID in the same millisecond as the last ID (the short
    ///   path) needs the last ID's worker, and the last ID is raised here
    ///   to a value whose sequence is full, so none continues it;
    /// - any other ID passes the check of `assigned_worker` after reading
    ///   the reservation; the assignment is stored before the last ID is
    ///   raised and before the reservation can grow for the new holder,
    ///   so a caller whose compare-and-swap could still succeed either
    ///   read the old reservation (its ID is below it, inside the old
    ///   lease) or sees the new assignment and stops. A compare-and-swap
    ///   prepared before the last ID was raised fails, since the last ID
    ///   only grows.
    ///
    /// The caller keeps the durable reservation at or below the new
    /// holder's `reserved_until` from here on.
    pub fn assign_worker(&self, worker: u64, floor_ms: i64, layout: &Layout, mono_ns: i64) {
        self.assigned_worker.store(worker, Ordering::SeqCst);
        let last = self.last_id.load(Ordering::Acquire);
        let last_ms = layout.epoch_ms() + layout.timestamp_of(last) as i64;
        // At least the last ID's millisecond, with a full sequence: every
        // later ID opens a new millisecond, for whichever worker.
        self.raise_above(floor_ms.max(last_ms), layout, mono_ns);
    }

    /// The worker id held now: `None` for a static configuration.
    pub fn assigned(&self) -> Option<Option<u64>> {
        match self.assigned_worker.load(Ordering::Acquire) {
            STATIC_WORKER => None,
            NO_WORKER => Some(None),
            w => Some(Some(w)),
        }
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
}
