//! Issuing single IDs: what an ID carries, the sequence and its
//! overflow into the next millisecond, the clock outside the layout's
//! range, a change of worker id, and how IDs spread at low traffic.

use super::*;

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
