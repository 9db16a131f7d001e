//! The general algorithm: one compare-and-swap that issues a block of
//! consecutive IDs from any state (a single ID off the fast path is a
//! block of one). It opens fresh milliseconds, borrows future ones,
//! keeps the lead bound (back-pressure, re-anchoring) and a bulk call's
//! share of it, waits for the reservation, checks the worker id and the
//! lease's deadline, and fences the short path when the lease ran out.

#[cfg(doc)]
use super::Counters;
use super::{
    count_rmw, Block, BlockAttempt, Config, Events, GenError, GeneratorState, MAX_WAIT_MS, NO_CAP,
    NO_DEADLINE, STATIC_WORKER,
};
use crate::clock::Clock;
use std::sync::atomic::Ordering;

impl GeneratorState {
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
    pub(super) fn block_once(
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
            // A leased worker id: every call off the short path checks the
            // lease's deadline itself (the short path continues a
            // millisecond that such a call opened, at most a wall-clock
            // millisecond earlier), and before it marks the millisecond
            // as measured for the short path (`first_behind_read`): a
            // refusal opens nothing to it.
            let deadline = self.lease_deadline_ns.load(Ordering::Acquire);
            if deadline != NO_DEADLINE && clock.lease_ns() >= deadline {
                return Err(self.lease_ran_out(cfg, last));
            }
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
}
