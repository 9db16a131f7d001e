//! Backward clock steps and the lead bound: steps of any size, catching
//! up with a step, the lead measured against the pre-step timeline,
//! back-pressure, a monotonic clock that jumps, and the rate limit on
//! step warnings.

use super::*;

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
fn warnings_are_rate_limited() {
    let st = GeneratorState::new();
    assert!(st.should_warn(1_000));
    assert!(!st.should_warn(1_001));
    assert!(!st.should_warn(1_000 + WARN_INTERVAL_MS - 1));
    assert!(st.should_warn(1_000 + WARN_INTERVAL_MS));
    // A clock that went back past the last warning may warn again.
    assert!(st.should_warn(0));
}
