//! The worker id a call mints with, and the lease that bounds it: the
//! one interface between minting and the lease room (`crate::lease`).
//!
//! Where the worker id is leased (`snowflake_id.worker_id_source =
//! registry`), the lease worker hands the generator a worker id, its
//! reservation and its deadline with [`grant`], [`extend`] and
//! [`revoke`]; minting reads them back with [`worker_id`], [`cap_ms`] and
//! [`wait_for_cover`], and refuses with [`refuse_without_worker`] and
//! [`refuse_expired`]. Both sides meet in shared memory
//! ([`shmem::LeaseShared`] and the generator's own `assigned_worker` and
//! `lease_deadline_ns`), never in a call from minting into the lease
//! room: `scripts/module_graph.py` keeps the arrows one way.

use crate::mint::shmem::{self, LeaseShared};
use crate::{errors, gucs};
use pgrx::pg_sys;
use snowflake_id_core::{
    format_epoch, Clock, GeneratorState, Lease, SystemClock, NO_WORKER, STATIC_WORKER,
};
use std::sync::atomic::Ordering;

/// The worker id a caller mints with: the held lease's where the id is
/// leased (`None` while none is held), else `snowflake_id.worker_id`.
#[inline(always)]
pub fn worker_id(state: &GeneratorState) -> Option<u64> {
    match state.assigned_worker.load(Ordering::Acquire) {
        STATIC_WORKER => gucs::worker_id(),
        NO_WORKER => None,
        w => Some(w),
    }
}

/// [`worker_id`] of this server, for callers off the hot path; the
/// configured id where the library is not preloaded.
pub fn current_worker_id() -> Option<u64> {
    match shmem::state() {
        Some(state) => worker_id(state),
        None if gucs::leased() => None,
        None => gucs::worker_id(),
    }
}

/// ERROR for a caller that found no worker id: 55000 saying why.
#[cold]
pub fn refuse_without_worker() -> ! {
    if !gucs::leased() {
        errors::worker_id_unset();
    }
    let l = shared();
    let why = l.and_then(|l| l.last_error.get());
    let detail = match why {
        Some(e) => format!("Last registry error: {e}"),
        None if l.is_some_and(|l| l.latch.load(Ordering::Acquire) == 0) => {
            "The snowflake_id lease worker is not running (it starts after recovery).".into()
        }
        None => "The lease worker has not claimed a worker id yet.".into(),
    };
    errors::no_lease(
        detail,
        l.is_some_and(|l| l.exhausted.load(Ordering::Acquire)),
    )
}

/// ERROR for a caller that found its lease past its deadline
/// (`GenError::LeaseExpired`): 55000 with the registry's last error.
#[cold]
pub fn refuse_expired(worker: u64) -> ! {
    let l = shared();
    if let Some(l) = l {
        wake_worker(l);
    }
    let detail = match l.and_then(|l| l.last_error.get()) {
        Some(e) => format!("Last registry error: {e}"),
        None => "The lease worker has not renewed the lease in time (it may be stalled, or waiting for the registry).".into(),
    };
    errors::lease_expired(worker, detail)
}

pub fn shared() -> Option<&'static LeaseShared> {
    shmem::tracking().map(|t| &t.lease)
}

/// The highest Unix ms a durable reservation may reach: the lease's
/// `reserved_until` while it is live, `i64::MIN` without a live lease,
/// `i64::MAX` where the worker id is not leased.
pub fn cap_ms() -> i64 {
    if !gucs::leased() {
        return i64::MAX;
    }
    let (Some(l), Some(state)) = (shared(), shmem::state()) else {
        return i64::MAX;
    };
    // The worker is set after the deadline is published (`publish`).
    if l.worker.load(Ordering::Acquire) < 0
        || SystemClock.lease_ns() >= state.lease_deadline_ns.load(Ordering::Acquire)
    {
        return i64::MIN;
    }
    l.reserved_until_ms.load(Ordering::Acquire)
}

/// How long one call waits, in all, for the lease worker to raise the
/// reservation in the registry: a call that cannot mint fails within it.
const COVER_WAIT_MS: i64 = 2_000;

/// Before a durable reservation up to `ms`: make sure the lease covers
/// it, asking the lease worker to raise it and waiting, else 55000.
/// `since` is the call's own record of when it started waiting
/// (`SystemClock::lease_ns`): however many reservations one call needs,
/// it waits at most [`COVER_WAIT_MS`] in all (issue 47: a server whose
/// clock ran ahead of what the registry grants had single calls wait a
/// minute, one bounded wait after another).
pub fn wait_for_cover(ms: i64, since: &mut Option<i64>) {
    if !gucs::leased() {
        return;
    }
    let Some(l) = shared() else { return };
    let started = *since.get_or_insert_with(|| SystemClock.lease_ns());
    let left_ms = COVER_WAIT_MS - (SystemClock.lease_ns() - started) / 1_000_000;
    let covered = left_ms > 0
        && shmem::wait_until(left_ms, || {
            let cap = cap_ms();
            if cap >= ms {
                return true;
            }
            if cap == i64::MIN {
                return true; // no lease: refused below, without waiting
            }
            wake_worker(l);
            false
        });
    let cap = cap_ms();
    if cap == i64::MIN {
        refuse_without_worker();
    }
    if !covered || cap < ms {
        let why = match l.last_error.get() {
            Some(e) => format!(" Last registry error: {e}"),
            None => " The registry answered every renewal but raised the reservation no further: this server's clock or IDs are ahead of the registry's clock by more than the registry's max_ahead.".into(),
        };
        errors::lease_does_not_cover(format!(
            "The next ID needs {}; the lease of worker id {} reaches {}.{why}",
            format_epoch(ms),
            l.worker.load(Ordering::Acquire),
            format_epoch(cap),
        ));
    }
}

fn wake_worker(l: &LeaseShared) {
    if !l.wanted.swap(true, Ordering::AcqRel) {
        let latch = l.latch.load(Ordering::Acquire);
        if latch != 0 {
            // SAFETY: the worker's latch is in its PGPROC (shared memory);
            // SetLatch on a latch whose owner exited is harmless.
            unsafe { pg_sys::SetLatch(latch as *mut pg_sys::Latch) };
        }
    }
}

/// What `snowflake_stats()` shows of the lease: the worker id held, the
/// deadline and `reserved_until` (Unix ms), the registry's errors and the
/// last one.
pub struct LeaseStats {
    pub worker: Option<i32>,
    pub expires_ms: Option<i64>,
    pub reserved_until_ms: Option<i64>,
    pub errors: i64,
    pub last_error: Option<String>,
}

pub fn stats() -> Option<LeaseStats> {
    if !gucs::leased() {
        return None;
    }
    let l = shared()?;
    let worker = l.worker.load(Ordering::Acquire);
    let held = worker >= 0;
    let known = |v: i64| (held && v != i64::MIN).then_some(v);
    Some(LeaseStats {
        worker: held.then_some(worker as i32),
        expires_ms: known(l.deadline_wall_ms.load(Ordering::Acquire)),
        reserved_until_ms: known(l.reserved_until_ms.load(Ordering::Acquire)),
        errors: l.errors.load(Ordering::Relaxed) as i64,
        last_error: l.last_error.get(),
    })
}

/// The lease's clock ([`Clock::lease_ns`]): monotonic, and counting a
/// suspend.
fn mono_ns() -> i64 {
    SystemClock.lease_ns()
}

/// Hand minting a live lease's renewal: its reservation, epoch and
/// deadline (on [`Clock::lease_ns`]). Every minting call checks the
/// deadline itself (issue 47).
pub fn extend(l: &Lease) {
    let (Some(s), Some(state)) = (shared(), shmem::state()) else {
        return;
    };
    s.reserved_until_ms
        .fetch_max(l.reserved_until_ms, Ordering::AcqRel);
    s.epoch.store(l.epoch, Ordering::Release);
    let wall_ms = SystemClock.wall_ns().div_euclid(1_000_000);
    let left_ms = (l.deadline_ns() - mono_ns()).div_euclid(1_000_000);
    s.deadline_wall_ms
        .store(wall_ms + left_ms, Ordering::Release);
    state.set_lease_deadline(l.deadline_ns());
    s.worker.store(l.worker as i64, Ordering::Release);
    shmem::wake_waiters();
}

/// Hand minting a newly granted (or revived) lease: its worker id, and
/// every later ID above `floor_ms` (the registry row's reservation).
pub fn grant(l: &Lease, floor_ms: i64) {
    let (Some(s), Some(state), Ok(layout)) = (shared(), shmem::state(), gucs::layout()) else {
        return;
    };
    s.reserved_until_ms.store(i64::MIN, Ordering::Release);
    extend(l);
    state.assign_worker(l.worker, floor_ms, &layout, mono_ns());
    s.exhausted.store(false, Ordering::Release);
    shmem::wake_waiters();
}

/// Take the worker id back: no worker id is held from here on, the
/// generator refuses every caller and no reservation is made under the
/// lease. Returns whether one was held.
pub fn revoke() -> bool {
    let (Some(s), Some(state), Ok(layout)) = (shared(), shmem::state(), gucs::layout()) else {
        return false;
    };
    if s.worker.swap(-1, Ordering::AcqRel) < 0 {
        return false;
    }
    s.reserved_until_ms.store(i64::MIN, Ordering::Release);
    state.assign_worker(NO_WORKER, i64::MIN, &layout, mono_ns());
    shmem::wake_waiters();
    true
}
