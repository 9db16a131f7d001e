//! The reference clock and the lead bound: measuring `wall - mono` to
//! tell a step of the wall clock from a burst, reporting backward steps
//! (and rate-limiting their warnings), and the lead cap that holds every
//! caller to the lowest `max_lead` until IDs are back on the wall clock.
//! The module docs of `generator` explain the reference clock ("The
//! reference clock: telling a step from a burst").

#[cfg(doc)]
use super::MAX_WAIT_MS;
use super::{Config, Events, GeneratorState, STEP_TOLERANCE_NS, UNSET, WARN_INTERVAL_MS};
use crate::clock::Clock;
use std::sync::atomic::Ordering;

impl GeneratorState {
    /// True for the first caller that finds the wall clock behind the last
    /// ID in wall-clock millisecond `unix_ms` (see `try_next_block`).
    #[inline]
    pub(super) fn first_behind_read(&self, unix_ms: i64) -> bool {
        let seen = self.behind_seen_ms.load(Ordering::Relaxed);
        seen != unix_ms
            && self
                .behind_seen_ms
                .compare_exchange(seen, unix_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Record a `wall - mono` measurement; detect backward steps.
    #[inline]
    pub(super) fn observe(&self, wall: i64, mono_after: i64, clock: &impl Clock, ev: &mut Events) {
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
    pub(super) fn resync_reference(&self, lo: i64) {
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
    pub(super) fn max_lead_ms(&self, cfg: &Config) -> u64 {
        cfg.max_lead_ms
            .min(self.lead_cap_ms.load(Ordering::Relaxed))
    }

    /// Hold every caller to at most `max_lead_ms` until IDs are back on
    /// the wall clock.
    #[inline]
    pub(super) fn cap_lead(&self, max_lead_ms: u64) {
        if self.lead_cap_ms.load(Ordering::Relaxed) > max_lead_ms {
            self.lead_cap_ms.fetch_min(max_lead_ms, Ordering::Relaxed);
        }
    }

    /// The reference clock in Unix ns (see the module docs): never behind
    /// the wall clock.
    #[inline]
    pub(super) fn reference_ns(&self, mono: i64, wall: i64) -> i64 {
        match self.max_offset.load(Ordering::Acquire) {
            UNSET => wall,
            off => mono.saturating_add(off).max(wall),
        }
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
}
