//! The paths of a single ID that avoid the general algorithm: the fast
//! path ([`GeneratorState::try_next`], [`GeneratorState::try_next_in`]
//! and the extension entry point's [`GeneratorState::try_fast`]: one
//! `fetch_add` on the last ID, checked afterwards and taken back where
//! it found no next ID), the compare-and-swap short path of a leased
//! worker id, and the hand-over to the general algorithm (`general.rs`)
//! where the next ID is not the last ID + 1.

#[cfg(test)]
use super::FAST_REJECTED;
use super::{
    count_rmw, Attempt, Config, Events, GenError, GeneratorState, LastMillisecond, Window,
    STATIC_WORKER,
};
use crate::clock::Clock;
use std::sync::atomic::Ordering;

/// The longest pause, in spin-loop hints, between two compare-and-swap
/// attempts of the short path (1, 2, 4, ... up to this, then the general
/// path takes over).
const MAX_CAS_PAUSE: u32 = 64;

impl GeneratorState {
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
    pub(super) fn try_fast_pausing(
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
    pub(super) fn window_of(&self, cfg: &Config, id: u64, unix_ms: i64) -> Option<Window> {
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
    pub(super) fn try_next_pausing(
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
    pub(super) fn try_next_fetch_add(
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
    pub(super) fn try_next_same_millisecond(
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
    pub(super) fn is_next_in_same_millisecond(
        &self,
        cfg: &Config,
        last: u64,
        unix_ms: i64,
    ) -> bool {
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
}
