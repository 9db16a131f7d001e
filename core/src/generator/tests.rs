//! Unit tests of the state machine, single-threaded on a manual clock,
//! one file per subject in `tests/`; this file holds what they share
//! (configurations, fake clocks, random states, counters).
//! The multithreaded stress tests are in `core/tests/generator_stress.rs`.

use super::*;
use crate::testing::{ManualClock, Xorshift, M0, MS, T0};

mod blocks;
mod contention;
mod fast_path;
mod lead_and_steps;
mod leases;
mod minting;
mod reservation;

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

/// A random state and configuration of every kind the short and fast
/// paths must judge, with a clock reading anywhere in a millisecond: the
/// last ID in this, an earlier or a later millisecond (3 ms behind to 4
/// ahead), of this or a neighbouring worker, at any sequence including
/// the last; the clocks measured in this millisecond or not;
/// reservations and lead bounds that do and do not cover the next ID;
/// no lead cap, or one below, at or above the lead.
fn random_case(rnd: &mut impl FnMut(u64) -> u64) -> ([i64; 14], Config, ManualClock) {
    let layout = Layout::default_layout();
    let wall = T0 + rnd(MS as u64) as i64;
    let unix_ms = wall / MS;
    let now = (unix_ms - layout.epoch_ms()) as u64;
    let last_ts = now + rnd(8) - 3;
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
    let v = random_state(rnd, &layout, wall, layout.pack(last_ts, worker, seq));
    (v, c, ManualClock::new(wall, M0))
}

/// The shared state of a random case with `last_id` as the last ID, at
/// wall-clock ns `wall`: the clocks measured behind it in this
/// millisecond or the one before; no reference offset, or one of this
/// millisecond or the one before; a reservation that does or does not
/// cover the next ID of `last_id`'s millisecond (or none); no lead cap,
/// or one below, at or above the lead.
fn random_state(
    rnd: &mut impl FnMut(u64) -> u64,
    layout: &Layout,
    wall: i64,
    last_id: u64,
) -> [i64; 14] {
    let unix_ms = wall / MS;
    let id_ms = layout.epoch_ms() + layout.timestamp_of(last_id) as i64;
    let mut v = snapshot(&GeneratorState::new());
    v[0] = last_id as i64;
    v[1] = if rnd(2) == 0 { unix_ms } else { unix_ms - 1 };
    v[2] = if rnd(4) == 0 {
        UNSET
    } else {
        wall - M0 - rnd(2) as i64 * MS
    };
    v[3] = v[2];
    v[5] = match rnd(3) {
        0 => i64::MAX,
        1 => id_ms,
        _ => id_ms - 1,
    };
    v[13] = match rnd(3) {
        0 => NO_CAP as i64,
        _ => rnd(4) as i64,
    };
    v
}

/// A clock whose lease clock (`lease_ns`) advances by `step` at every
/// read: a caller held up between the deadline check and its swap.
struct SlowLeaseClock<'a> {
    inner: &'a ManualClock,
    lease: std::cell::Cell<i64>,
    step: i64,
}

impl Clock for SlowLeaseClock<'_> {
    fn wall_ns(&self) -> i64 {
        self.inner.wall_ns()
    }
    fn mono_ns(&self) -> i64 {
        self.inner.mono_ns()
    }
    fn lease_ns(&self) -> i64 {
        let v = self.lease.get();
        self.lease.set(v + self.step);
        v
    }
}

/// The read-modify-writes on `last_id` this thread made while `f` ran,
/// and how many of them were fast-path additions that found no next ID.
fn rmws<R>(f: impl FnOnce() -> R) -> (R, u64, u64) {
    let (r0, f0) = (
        LAST_ID_RMWS.with(|c| c.get()),
        FAST_REJECTED.with(|c| c.get()),
    );
    let r = f();
    (
        r,
        LAST_ID_RMWS.with(|c| c.get()) - r0,
        FAST_REJECTED.with(|c| c.get()) - f0,
    )
}
