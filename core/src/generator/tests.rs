//! Unit tests of the state machine, single-threaded on a manual clock.
//! The multithreaded stress tests are in `core/tests/generator_stress.rs`.

use super::*;
use crate::testing::{ManualClock, Xorshift, M0, MS, T0};

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
    st.publish_reservation(st.renewal_target(&c.layout, clock.wall_ns(), clock.mono_ns(), 2000));
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
    let mut rng = Xorshift::new(0x2545_f491_4f6c_dd1d);
    let mut rnd = move |n: u64| rng.below(n);
    let (mut short, mut general) = (0, 0);
    for _ in 0..200_000 {
        let (v, c, clock) = random_case(&mut rnd);
        let (a, b) = (restore(&v), restore(&v));
        let mut ev = Events::default();
        match a.try_next_same_millisecond(&c, &clock, clock.wall_ms()) {
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

/// A bulk call held to its share of the lead (issue 39, F7): it stops at
/// the share, waits for the clock without counting back-pressure or
/// capping the lead, and the callers of single IDs keep the rest of
/// `max_lead` without waiting. With no share (`try_next_block`), the same
/// bulk call takes the whole lead and the single ID must wait.
#[test]
fn block_within_its_share_leaves_the_rest_of_the_lead() {
    let c = cfg(10);
    // Unshared: the whole lead, and a single ID must wait.
    let st = GeneratorState::new();
    let clock = ManualClock::new(T0, M0);
    let BlockAttempt::Issued(b) = block(&st, &c, &clock, 100_000_000) else {
        panic!("block not issued")
    };
    assert_eq!(
        c.layout.decode(b.last(&c.layout)).unwrap().unix_ms,
        T0 / MS + 10
    );
    assert!(matches!(
        st.try_next(&c, &clock, &mut Events::default()).unwrap(),
        Attempt::Wait(_)
    ));

    // Within a share of 5 ms: it stops at now + 5 ms.
    let st = GeneratorState::new();
    let clock = ManualClock::new(T0, M0);
    let mut ev = Events::default();
    let BlockAttempt::Issued(b) = st
        .try_next_block_within(&c, &clock, &mut ev, 100_000_000, 5)
        .unwrap()
    else {
        panic!("block not issued")
    };
    let last = c.layout.decode(b.last(&c.layout)).unwrap();
    assert_eq!((last.unix_ms, last.sequence), (T0 / MS + 5, 4095));
    // Its next attempt waits for the clock (to the next millisecond), as
    // the call pacing itself: no back-pressure counted, no lead cap.
    let mut ev = Events::default();
    assert!(matches!(
        st.try_next_block_within(&c, &clock, &mut ev, 100_000_000, 5)
            .unwrap(),
        BlockAttempt::Wait(1000)
    ));
    assert_eq!(ev.waits, 0);
    assert_eq!(st.counters.backpressure_waits.load(Ordering::Relaxed), 0);
    assert_eq!(st.lead_cap_ms.load(Ordering::Relaxed), NO_CAP);
    // Single IDs go on without waiting, up to max_lead.
    for _ in 0..4 * 4096 {
        let (_, ev) = issue(&st, &c, &clock);
        assert_eq!(ev.waits, 0);
    }
    assert_eq!(st.counters.backpressure_waits.load(Ordering::Relaxed), 0);
    // The clock moves one millisecond: the bulk call takes one more
    // millisecond's worth only if the single IDs left it room below its
    // share, here none (they ran to now + 9 ms): it waits, and never for
    // more than MAX_WAIT_MS at a time.
    clock.advance(MS);
    let mut ev = Events::default();
    let BlockAttempt::Wait(us) = st
        .try_next_block_within(&c, &clock, &mut ev, 100_000_000, 5)
        .unwrap()
    else {
        panic!("a bulk call took IDs beyond its share")
    };
    assert!(us > 1000 && us <= MAX_WAIT_MS * 1000, "{us}");
    // With a share of the whole lead (or more), it is try_next_block.
    let a = GeneratorState::new();
    let b = GeneratorState::new();
    let clock = ManualClock::new(T0, M0);
    for want in [1, 7, 5000, 100_000, 1_000_000] {
        let x = a.try_next_block(&c, &clock, &mut Events::default(), want);
        let y = b.try_next_block_within(&c, &clock, &mut Events::default(), want, 10);
        assert_eq!(format!("{x:?}"), format!("{y:?}"));
        clock.advance(MS / 2);
    }
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

#[test]
fn worker_reassigned() {
    let st = GeneratorState::new();
    let layout = Layout::default_layout();
    let clock = ManualClock::new(T0, M0);
    let held = cfg(1000); // worker 42
    assert_eq!(st.assigned(), None, "static until a lease is assigned");
    st.assign_worker(42, i64::MIN, &layout, M0);
    assert_eq!(st.assigned(), Some(Some(42)));
    let (a, _) = issue(&st, &held, &clock);
    assert_eq!(layout.decode(a).unwrap().worker, 42);

    // The lease is lost: nobody issues, not even a caller that read 42.
    st.assign_worker(NO_WORKER, i64::MIN, &layout, M0);
    let mut ev = Events::default();
    assert_eq!(
        st.try_next(&held, &clock, &mut ev),
        Err(GenError::WorkerNotHeld { worker: 42 })
    );

    // Worker 5 is claimed; its previous holder may have used up to 10 s
    // ahead of this clock. A caller still holding 42 is refused (also in
    // the millisecond of the last ID, the short path's case); the new
    // holder issues above the floor.
    let floor_ms = T0 / MS + 10_000;
    st.assign_worker(5, floor_ms, &layout, M0);
    assert_eq!(
        st.try_next(&held, &clock, &mut ev),
        Err(GenError::WorkerNotHeld { worker: 42 })
    );
    let mut five = held;
    five.worker = 5;
    let (b, _) = issue(&st, &five, &clock);
    let p = layout.decode(b).unwrap();
    assert_eq!(p.worker, 5);
    assert!(
        p.unix_ms > floor_ms,
        "{} is not above the floor {floor_ms}",
        p.unix_ms
    );
    assert!(b > a);
    // And the next one continues it on the short path.
    let (c, _) = issue(&st, &five, &clock);
    assert_eq!(c, b + 1);
    assert_eq!(
        st.try_next(&held, &clock, &mut ev),
        Err(GenError::WorkerNotHeld { worker: 42 })
    );
}

#[test]
fn reassignment_fails_a_compare_and_swap_prepared_before_it() {
    // A caller read the last ID, then the lease changed hands: the last ID
    // was raised, so its compare-and-swap cannot succeed.
    let st = GeneratorState::new();
    let layout = Layout::default_layout();
    let clock = ManualClock::new(T0, M0);
    st.assign_worker(42, i64::MIN, &layout, M0);
    let (a, _) = issue(&st, &cfg(1000), &clock);
    let before = st.last_id.load(Ordering::Acquire);
    st.assign_worker(5, i64::MIN, &layout, M0);
    let after = st.last_id.load(Ordering::Acquire);
    assert!(
        after > before,
        "the last ID must move ({before} -> {after})"
    );
    assert_eq!(layout.timestamp_of(after), layout.timestamp_of(a as u64));
    assert!(st
        .last_id
        .compare_exchange(before, before + 1, Ordering::AcqRel, Ordering::Acquire)
        .is_err());
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

#[test]
fn nothing_is_issued_at_or_after_the_lease_deadline() {
    // Issue 47: the deadline is the minting path's, not only the lease
    // worker's. The worker is stalled here (nobody unassigns the id).
    let st = GeneratorState::new();
    let layout = Layout::default_layout();
    let clock = ManualClock::new(T0, M0);
    let c = cfg(1000);
    st.assign_worker(42, i64::MIN, &layout, M0);
    st.set_lease_deadline(M0 + 10 * MS);
    let (a, _) = issue(&st, &c, &clock);
    clock.advance(5 * MS);
    let (b, _) = issue(&st, &c, &clock);
    assert!(b > a);
    // At the deadline, in a new millisecond: refused.
    clock.advance(5 * MS);
    let mut ev = Events::default();
    assert_eq!(
        st.try_next(&c, &clock, &mut ev),
        Err(GenError::LeaseExpired { worker: 42 })
    );
    // The refusal fenced the short path: not even the millisecond of the
    // last ID continues, nor does a bulk call.
    assert_eq!(
        st.try_next(&c, &clock, &mut ev),
        Err(GenError::LeaseExpired { worker: 42 })
    );
    assert_eq!(
        st.try_next_block(&c, &clock, &mut ev, 1000).err(),
        Some(GenError::LeaseExpired { worker: 42 })
    );
    // A renewal moves the deadline: issuing resumes, above every ID.
    st.set_lease_deadline(M0 + 60 * MS);
    let (d, _) = issue(&st, &c, &clock);
    assert!(d > b);
    // A static worker id has no deadline, whatever the clock.
    let st2 = GeneratorState::new();
    clock.advance(1_000_000 * MS);
    issue(&st2, &c, &clock);
}

#[test]
fn a_short_path_swap_prepared_before_the_deadline_fails_after_it() {
    let st = GeneratorState::new();
    let layout = Layout::default_layout();
    let clock = ManualClock::new(T0, M0);
    let c = cfg(1000);
    st.assign_worker(42, i64::MIN, &layout, M0);
    st.set_lease_deadline(M0 + MS);
    issue(&st, &c, &clock);
    // A caller read the last ID (its swap would continue it) ...
    let prepared = st.last_id.load(Ordering::Acquire);
    // ... the deadline passes and the next wall-clock millisecond's
    // caller is refused ...
    clock.advance(MS);
    assert!(st.try_next(&c, &clock, &mut Events::default()).is_err());
    // ... and the prepared swap fails.
    assert!(st
        .last_id
        .compare_exchange(prepared, prepared + 1, Ordering::AcqRel, Ordering::Acquire)
        .is_err());
}

#[test]
fn a_caller_held_up_past_the_deadline_before_its_swap_hands_out_nothing() {
    // The deadline check passes, then the caller is held up (every read of
    // the lease clock is 1 ms later than the one before) and reaches its
    // swap after the deadline: the check after the swap refuses it.
    let st = GeneratorState::new();
    let layout = Layout::default_layout();
    let manual = ManualClock::new(T0, M0);
    st.assign_worker(42, i64::MIN, &layout, M0);
    st.set_lease_deadline(M0 + MS);
    let clock = SlowLeaseClock {
        inner: &manual,
        lease: std::cell::Cell::new(M0),
        step: MS,
    };
    let mut ev = Events::default();
    assert_eq!(
        st.try_next(&cfg(1000), &clock, &mut ev),
        Err(GenError::LeaseExpired { worker: 42 })
    );
    assert_eq!(clock.lease.get(), M0 + 2 * MS, "checked before and after");
}

/// Issue 48: the fast path (one `fetch_add`) issues exactly what the
/// general algorithm (a block of one) would, and changes the state
/// exactly as it would, from the same random states as the short path's
/// test above; where it finds no next ID, it takes its addition back
/// and leaves the state as it found it.
#[test]
fn fast_path_agrees_with_the_general_algorithm() {
    let mut rng = Xorshift::new(0x9e37_79b9_7f4a_7c15);
    let mut rnd = move |n: u64| rng.below(n);
    let (mut fast, mut general) = (0, 0);
    for _ in 0..200_000 {
        let (v, c, clock) = random_case(&mut rnd);
        let (a, b) = (restore(&v), restore(&v));
        let mut ev = Events::default();
        match a.try_next_fetch_add(&c, clock.wall_ms(), &mut ev, &mut || {}) {
            Some(id) => {
                fast += 1;
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
                    "the fast path gave up but changed the state"
                );
                assert_eq!(ev, Events::default());
            }
        }
    }
    assert!(
        fast > 5_000 && general > 5_000,
        "{fast} fast, {general} general"
    );
}

/// Issue 48: `try_fast`, which the extension's entry point runs before
/// pgrx's guard, is the fast path of `try_next_in` and nothing else.
/// From the random states above, with the caller's millisecond (`mine`)
/// this one or another and the worker id static or leased: an ID it
/// issues is the one `try_next_in` issues with the same clock reading,
/// leaving the same state, with one read-modify-write; where it issues
/// nothing, it leaves the state as it found it and, after a rejected
/// addition, forgets `mine`, so that the caller's `try_next_in` then
/// goes straight to the general algorithm: the same ID and state as
/// `try_next_in` alone from the untouched state (the code before the
/// entry point), and no second addition.
#[test]
fn try_fast_is_the_fast_path_of_try_next_in_alone() {
    let mut rng = Xorshift::new(0xd1b5_4a32_d192_ed03);
    let mut rnd = move |n: u64| rng.below(n);
    let (mut fast, mut declined, mut rejected) = (0, 0, 0);
    for _ in 0..200_000 {
        let (v, c, clock) = random_case(&mut rnd);
        let unix_ms = clock.wall_ms();
        let mine_ms = if rnd(4) == 0 { unix_ms - 1 } else { unix_ms };
        let leased = rnd(8) == 0;
        let (a, b) = (restore(&v), restore(&v));
        // The caller's last ID, which left the window it may follow: the
        // state's last ID, or one a few sequence numbers or milliseconds
        // before it, or another worker's.
        let last = v[0] as u64;
        let own = match rnd(5) {
            0 => last.saturating_sub(rnd(8)),
            1 => last.saturating_sub(rnd(3) << 22),
            2 => last.saturating_sub(1 << 12),
            _ => last,
        };
        // Now and then the window was opened under another worker id (a
        // reload changed `worker_id` since): it must not count.
        let window = if rnd(8) == 0 {
            let other = Config {
                worker: 41 + 2 * rnd(2),
                ..c
            };
            let (ts, _, seq) = c.layout.split(own);
            a.window_of(&other, c.layout.pack(ts, other.worker, seq), mine_ms)
        } else {
            a.window_of(&c, own, mine_ms)
        };
        // A lease taken since the window was opened (the extension never
        // goes from a static worker id to a leased one, but the window must
        // not count then either).
        if leased {
            a.assigned_worker.store(42, Ordering::Relaxed);
            b.assigned_worker.store(42, Ordering::Relaxed);
        }
        let (mine_a, mine_b) = (LastMillisecond::new(), LastMillisecond::new());
        mine_a.remember(mine_ms, window);
        mine_b.remember(mine_ms, window);
        let (got, n, _) = rmws(|| a.try_fast(&c, unix_ms, &mine_a));
        let mut ev = Events::default();
        match got {
            Some(id) => {
                fast += 1;
                assert!(!leased && mine_ms == unix_ms, "state {v:?}");
                assert_eq!(n, 1, "one read-modify-write");
                let want = b.try_next_in(&c, &clock, &mut ev, &mine_b);
                assert_eq!(want, Ok(Attempt::Issued(id)), "state {v:?}, config {c:?}");
                assert_eq!(ev, Events::default(), "an event of the fast path");
                assert_eq!(snapshot(&a), snapshot(&b), "state {v:?}");
                assert_eq!(mine_a.ms(), unix_ms);
            }
            None => {
                assert_eq!(
                    snapshot(&a),
                    v,
                    "try_fast issued nothing but changed the state"
                );
                if n == 0 {
                    declined += 1;
                    assert_eq!(mine_a.ms(), mine_ms);
                    continue;
                }
                rejected += 1;
                assert_eq!(n, 2, "an addition and its undoing");
                assert_eq!(mine_a.ms(), UNSET, "mine forgotten");
                // The caller's next step, against `try_next_in` alone
                // from the untouched state with the same `mine` (which
                // makes the addition, and takes it back, itself).
                let mut ev_b = Events::default();
                let (got_a, n_a, r_a) = rmws(|| a.try_next_in(&c, &clock, &mut ev, &mine_a));
                let (got_b, _, _) = rmws(|| b.try_next_in(&c, &clock, &mut ev_b, &mine_b));
                assert_eq!(got_a, got_b, "state {v:?}, config {c:?}");
                assert_eq!(snapshot(&a), snapshot(&b), "state {v:?}");
                assert_eq!(r_a, 0, "no second addition: {n_a} read-modify-writes");
            }
        }
    }
    assert!(
        fast > 2_000 && declined > 2_000 && rejected > 2_000,
        "{fast} fast, {declined} declined, {rejected} rejected"
    );
}

/// Issue 48: a static worker id takes the fast path, a leased one the
/// compare-and-swap short path (the lease's fence needs it): with worker
/// id 0 leased, additions past the fence would reach the next
/// millisecond's first IDs, which carry worker 0. Refused at the
/// deadline, the server issues nothing more, in any millisecond.
#[test]
fn a_leased_worker_id_zero_issues_nothing_past_the_fence() {
    let st = GeneratorState::new();
    let layout = Layout::default_layout();
    let clock = ManualClock::new(T0, M0);
    let c = Config {
        worker: 0,
        ..cfg(1000)
    };
    st.assign_worker(0, i64::MIN, &layout, M0);
    st.set_lease_deadline(M0 + MS);
    issue(&st, &c, &clock);
    clock.advance(MS);
    for _ in 0..3 {
        for _ in 0..10 {
            assert_eq!(
                st.try_next(&c, &clock, &mut Events::default()),
                Err(GenError::LeaseExpired { worker: 0 })
            );
        }
        clock.advance(MS);
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

/// Issue 48: under contention, every ID the fast path issues costs one
/// read-modify-write on the shared state, never retried. Four threads
/// (on 2 cores, they contend whenever two run at once) take IDs with the
/// clock frozen and an hour's lead, so every 4096th ID borrows the next
/// millisecond. Each call's read-modify-writes are counted: a call that
/// the fast path answered made exactly one. An addition the fast path
/// cannot use happens at most once per thread per millisecond opened
/// (its caller goes on with the general algorithm, and comes back only
/// to a state it can continue); those millisecond openings are the only
/// calls that cost more. None of this depends on timing: a compare-and-
/// swap loop fails the first check whenever two threads overlap (issue
/// 17's short path made up to 8 attempts).
#[test]
fn fast_path_is_one_read_modify_write_that_never_retries() {
    const THREADS: usize = 4;
    const CALLS: usize = 200_000;
    /// The clock frozen, read without a lock (a `ManualClock`'s mutex
    /// would take turns for the threads).
    struct Frozen;
    impl Clock for Frozen {
        fn wall_ns(&self) -> i64 {
            T0
        }
        fn mono_ns(&self) -> i64 {
            M0
        }
    }
    let st = std::sync::Arc::new(GeneratorState::new());
    let start = std::sync::Arc::new(std::sync::Barrier::new(THREADS));
    let c = cfg(3_600_000);
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (st, start) = (st.clone(), start.clone());
            std::thread::spawn(move || {
                let clock = Frozen;
                let issue = |st: &GeneratorState, c: &Config, clock: &Frozen| {
                    let mut ev = Events::default();
                    match st.try_next(c, clock, &mut ev).unwrap() {
                        Attempt::Issued(id) => (id, ev),
                        other => panic!("unexpected {other:?}"),
                    }
                };
                let mut ids = Vec::with_capacity(CALLS);
                start.wait();
                let (mut fast_calls, mut rejected, mut most) = (0u64, 0u64, 0u64);
                for _ in 0..CALLS {
                    let (id, n, r) = rmws(|| issue(&st, &c, &clock).0);
                    ids.push(id);
                    rejected += r;
                    most = most.max(n);
                    if r == 0 {
                        assert_eq!(
                            n, 1,
                            "a call the fast path answered made {n} read-modify-writes"
                        );
                        fast_calls += 1;
                    }
                }
                (ids, fast_calls, rejected, most)
            })
        })
        .collect();
    let mut all = vec![];
    let (mut fast_calls, mut rejected) = (0, 0);
    for h in handles {
        let (ids, f, r, _most) = h.join().unwrap();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "not increasing per thread"
        );
        all.extend(ids);
        fast_calls += f;
        rejected += r;
    }
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "an ID was issued twice");
    let layout = Layout::default_layout();
    let mut ms: Vec<u64> = all
        .iter()
        .map(|&id| layout.timestamp_of(id as u64))
        .collect();
    ms.dedup();
    assert!(
        rejected <= (THREADS * ms.len()) as u64,
        "{rejected} additions found no next ID over {} milliseconds opened by {THREADS} threads",
        ms.len()
    );
    assert!(
        fast_calls as usize >= n - THREADS * ms.len(),
        "{fast_calls} of {n} calls took the fast path"
    );
}

/// Issue 48: every ID unique and increasing, in issue order, with the
/// caller preempted at each step of the fast path (after its clock read,
/// after its addition, before taking it back), both as `try_next_in`
/// runs it and as the extension's entry point does (`try_fast`, against
/// the window of the caller's last ID, then the whole call). At each pause, anything
/// may happen: other callers (single IDs and blocks, some with another
/// worker id, as after a reload), the clock moving on or stepping back,
/// the reservation running out. Checked: no ID twice; every ID above
/// every ID of a call that had returned before its call began; the state
/// never below an ID issued; every ID within the reservation.
#[test]
fn fast_path_under_preemption_at_each_step() {
    use std::cell::{Cell, RefCell};
    let layout = Layout::default_layout();
    let rng = RefCell::new(Xorshift::new(0x0123_4567_89ab_cdef));
    let rnd = |n: u64| rng.borrow_mut().below(n);
    let mut outer_calls = 0u64;
    let pauses = Cell::new(0u64);
    let fast_issued = Cell::new(0u64);
    for _scenario in 0..300 {
        let st = GeneratorState::new();
        let clock = ManualClock::new(T0, M0);
        let max_lead = [1u64, 3, 1000][rnd(3) as usize];
        // A reservation that keeps running out (or none).
        let window = [0i64, 2, 50][rnd(3) as usize];
        if window != 0 {
            st.reserved_until_ms
                .store(T0 / MS + window, Ordering::Relaxed);
        }
        let seen = RefCell::new(std::collections::HashSet::new());
        let done_max = Cell::new(0i64);
        // One complete call: retries through waits and reservations.
        // Each backend's memory of its last millisecond (the extension's
        // callers), or none (tools, tests).
        let (outer_ms, inner_ms) = (LastMillisecond::new(), LastMillisecond::new());
        let hinted = rnd(3);
        let call = |worker: u64, block: u64, outer: bool, pause: &mut dyn FnMut()| -> Vec<i64> {
            let c = Config {
                layout,
                worker,
                max_lead_ms: max_lead,
            };
            let floor = done_max.get();
            let mut ev = Events::default();
            let ids = loop {
                let a = if block == 0 {
                    let mine = match (hinted, outer) {
                        (0, _) => None,
                        (_, true) => Some(&outer_ms),
                        _ => Some(&inner_ms),
                    };
                    // The extension's entry point first: the window of
                    // the caller's last ID, then the whole call.
                    let fast = mine.and_then(|m| {
                        st.try_fast_pausing(
                            c.worker,
                            c.max_lead_ms,
                            clock.wall_ms(),
                            m,
                            || Some(c),
                            &mut || pause(),
                        )
                    });
                    if let Some(id) = fast {
                        fast_issued.set(fast_issued.get() + 1);
                        Attempt::Issued(Block {
                            first: id,
                            count: 1,
                        })
                    } else {
                        st.try_next_pausing(&c, &clock, &mut ev, mine, &mut || pause())
                            .unwrap()
                            .map(|id| Block {
                                first: id,
                                count: 1,
                            })
                    }
                } else {
                    st.try_next_block(&c, &clock, &mut ev, block).unwrap()
                };
                match a {
                    Attempt::Issued(b) => break b.ids(layout).collect::<Vec<i64>>(),
                    Attempt::Wait(us) => clock.advance(us as i64 * 1_000),
                    Attempt::Reserve(ms) => {
                        st.reserved_until_ms
                            .fetch_max(ms + window, Ordering::AcqRel);
                    }
                }
            };
            let reserved = st.reserved_until_ms.load(Ordering::Acquire);
            for &id in &ids {
                assert!(seen.borrow_mut().insert(id), "ID {id} issued twice");
                assert!(
                    id > floor,
                    "ID {id} not above {floor}, issued before its call began"
                );
                assert!(
                    st.last_id.load(Ordering::Acquire) >= id as u64,
                    "state below an issued ID"
                );
                assert!(layout.epoch_ms() + layout.timestamp_of(id as u64) as i64 <= reserved);
                assert_eq!(layout.split(id as u64).1, worker);
            }
            ids
        };
        let finish = |ids: &[i64]| done_max.set(done_max.get().max(*ids.last().unwrap()));
        // What may happen while the caller is preempted.
        let preempt = || {
            pauses.set(pauses.get() + 1);
            for _ in 0..rnd(4) {
                match rnd(10) {
                    0..=3 => {
                        let ids = call(42, 0, false, &mut || {});
                        finish(&ids);
                    }
                    4 => {
                        let ids = call(42, 1 + rnd(6000), false, &mut || {});
                        finish(&ids);
                    }
                    5 => {
                        let ids = call(41 + 2 * rnd(2), 0, false, &mut || {});
                        finish(&ids);
                    }
                    6 | 7 => clock.advance(rnd(2 * MS as u64) as i64),
                    8 => clock.advance(rnd(3_000) as i64),
                    _ => clock.step_wall(-(rnd(5) as i64) * MS),
                }
            }
        };
        for _ in 0..200 {
            outer_calls += 1;
            let ids = call(42, 0, true, &mut || preempt());
            finish(&ids);
            if rnd(3) == 0 {
                clock.advance(rnd(MS as u64) as i64);
            }
        }
    }
    assert!(
        outer_calls >= 60_000 && pauses.get() > 100_000 && fast_issued.get() > 10_000,
        "{outer_calls} calls, {} pauses, {} IDs through the window",
        pauses.get(),
        fast_issued.get()
    );
}

/// Issue 48: `try_fast` against `try_next_in` for random layouts (1 to
/// 14 worker and sequence bits, epochs near the clock, the clock before
/// the epoch), with windows of the state's last ID and of earlier ones:
/// an ID it issues is the one `try_next_in` issues, with the same state;
/// a rejected addition is one `try_next_in`'s own addition would have
/// rejected too.
#[test]
fn try_fast_agrees_with_try_next_in_for_other_layouts() {
    let mut rng = Xorshift::new(0x5555_0123_4567_89ab);
    let mut rnd = move |n: u64| rng.below(n);
    let (mut fast, mut other) = (0, 0);
    for _ in 0..400_000 {
        let wb = 1 + rnd(14) as u32;
        let sb = 1 + rnd(14) as u32;
        let wall = T0 + rnd(MS as u64) as i64;
        let unix_ms = wall / MS;
        let epoch = match rnd(4) {
            0 => unix_ms - rnd(3) as i64 + 1,
            1 => unix_ms,
            _ => Layout::DEFAULT_EPOCH_MS,
        };
        let Ok(layout) = Layout::new(epoch, wb, sb) else {
            continue;
        };
        let now = unix_ms - epoch;
        let base = now.max(0) as u64;
        let last_ts = (base + rnd(6))
            .saturating_sub(2)
            .min(layout.max_timestamp());
        let worker = (rnd(3) + layout.max_worker().saturating_sub(2)).min(layout.max_worker());
        let cw = layout
            .max_worker()
            .saturating_sub(1)
            .max(if rnd(2) == 0 { 0 } else { worker });
        let seq = match rnd(3) {
            0 => layout.max_sequence(),
            1 => layout.max_sequence().saturating_sub(1),
            _ => rnd(layout.max_sequence() + 1),
        };
        let c = Config {
            layout,
            worker: cw,
            max_lead_ms: [0, 1, 2, 5, 1000][rnd(5) as usize],
        };
        let v = random_state(&mut rnd, &layout, wall, layout.pack(last_ts, worker, seq));
        let clock = ManualClock::new(wall, M0);
        let last = v[0] as u64;
        let own = match rnd(4) {
            0 => last.saturating_sub(rnd(8)),
            1 => last.saturating_sub(rnd(3) << (wb + sb)),
            _ => last,
        };
        let (a, b) = (restore(&v), restore(&v));
        let window = a.window_of(&c, own, unix_ms);
        let (mine_a, mine_b) = (LastMillisecond::new(), LastMillisecond::new());
        mine_a.remember(unix_ms, window);
        mine_b.remember(unix_ms, window);
        let (got, n, _) = rmws(|| a.try_fast(&c, unix_ms, &mine_a));
        let mut ev = Events::default();
        match got {
            Some(id) => {
                fast += 1;
                assert_eq!(n, 1);
                let want = b.try_next_in(&c, &clock, &mut ev, &mine_b);
                assert_eq!(want, Ok(Attempt::Issued(id)), "state {v:?}, config {c:?}");
                assert_eq!(snapshot(&a), snapshot(&b));
            }
            None => {
                other += 1;
                assert_eq!(snapshot(&a), v);
                // try_next_in's own fetch_add would not have issued either.
                let c2 = restore(&v);
                if n != 0 {
                    assert_eq!(n, 2);
                    assert_eq!(mine_a.ms(), UNSET);
                } else {
                    continue;
                }
                assert!(
                    c2.try_next_fetch_add(&c, unix_ms, &mut ev, &mut || {})
                        .is_none(),
                    "state {v:?}, config {c:?} window {window:?}"
                );
            }
        }
    }
    assert!(
        fast > 10_000 && other > 10_000,
        "{fast} fast, {other} other"
    );
}

/// `try_fast_with` for a caller that cannot assemble its configuration
/// where a value outside the window needs the whole test: the addition is
/// taken back, nothing is issued, and the caller's memory is forgotten,
/// so that its next call goes to the general algorithm.
#[test]
fn try_fast_with_no_configuration_takes_the_addition_back() {
    let layout = Layout::default_layout();
    let c = Config {
        layout,
        worker: 42,
        max_lead_ms: 1000,
    };
    let clock = ManualClock::new(T0, M0);
    let unix_ms = clock.wall_ms();
    let now = (unix_ms - layout.epoch_ms()) as u64;
    let st = GeneratorState::new();
    // The state moved on to the next millisecond since the caller's ID.
    st.last_id
        .store(layout.pack(now + 1, 42, 5), Ordering::Relaxed);
    let mine = LastMillisecond::new();
    mine.remember(unix_ms, st.window_of(&c, layout.pack(now, 42, 7), unix_ms));
    let before = snapshot(&st);
    let (got, n, _) = rmws(|| st.try_fast_with(42, 1000, unix_ms, &mine, || None));
    assert_eq!(got, None);
    assert_eq!(n, 2, "an addition and its undoing");
    assert_eq!(snapshot(&st), before, "the addition stayed");
    assert_eq!(mine.ms(), UNSET, "mine not forgotten");
    // With its configuration, the same call takes the value after the
    // whole test (the next millisecond is within the lead).
    st.behind_seen_ms.store(unix_ms, Ordering::Relaxed);
    mine.remember(unix_ms, st.window_of(&c, layout.pack(now, 42, 7), unix_ms));
    let got = st.try_fast_with(42, 1000, unix_ms, &mine, || Some(c));
    assert_eq!(got, Some(layout.pack(now + 1, 42, 6) as i64));
}

/// Issue 55, item 3: crash restarts in a row, each after a second of
/// light traffic and the renewals it makes, add no lead: the reservation
/// the last crash leaves behind is within a window of the clock. Before,
/// every renewal went a window beyond the reference clock, which each
/// start had put above the last reservation, so each crash added about a
/// window less the time between crashes (nine restarts a second apart
/// left IDs 22 s ahead, with the high-water marks' 5 s).
#[test]
fn crash_restarts_in_a_row_add_no_lead() {
    let c = cfg(1000);
    let clock = ManualClock::new(T0, M0);
    let window = 2000;
    let renew = |st: &GeneratorState| {
        st.renewal_target(&c.layout, clock.wall_ns(), clock.mono_ns(), window)
    };
    let mut reserved = T0 / MS;
    let mut prev = 0;
    for _ in 0..10 {
        let st = GeneratorState::resume_above(reserved, &c.layout, clock.mono_ns());
        for _ in 0..20 {
            loop {
                match st.try_next(&c, &clock, &mut Events::default()).unwrap() {
                    Attempt::Issued(id) => {
                        assert!(id > prev, "{id} after {prev}");
                        prev = id;
                        break;
                    }
                    Attempt::Reserve(ms) => st.publish_reservation(renew(&st).max(ms)),
                    Attempt::Wait(us) => clock.advance(us as i64 * 1_000),
                }
            }
            // The reservation worker, when less than a second is left.
            if st.needs_renewal(&c.layout, clock.wall_ns(), clock.mono_ns(), 1000) {
                st.publish_reservation(renew(&st));
            }
            clock.advance(50 * MS);
        }
        // A crash: what survives is the reservation.
        reserved = st.reserved_until_ms.load(Ordering::Acquire);
    }
    let lead = reserved - clock.wall_ms();
    assert!(
        lead <= window,
        "ten crash restarts a second apart left a reservation {lead} ms ahead of the clock"
    );
}
