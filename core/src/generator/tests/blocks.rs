//! Blocks of IDs (`try_next_block`, `try_next_block_within`): one
//! compare-and-swap of consecutive IDs, stopping at the lead bound, at a
//! bulk call's share of the lead and at the end of the layout, and
//! waiting for a reservation that covers the block's end.

use super::*;

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

/// `Block::is_run`: a block within one millisecond is consecutive
/// integers; one that crosses into the next millisecond is not (the IDs
/// between belong to other worker ids). Adopted sequences with
/// `INCREMENT BY n` rely on it (issue 57).
#[test]
fn a_block_is_a_run_of_integers_only_within_one_millisecond() {
    let st = GeneratorState::new();
    let c = cfg(1000);
    let clock = ManualClock::new(T0, M0);
    let BlockAttempt::Issued(a) = block(&st, &c, &clock, 99) else {
        panic!("block not issued")
    };
    assert!(a.is_run(&c.layout));
    let ids: Vec<i64> = a.ids(c.layout).collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1));
    // Fill the millisecond up to 10 short of its end, then ask for 20.
    let per_ms = 1u64 << c.layout.sequence_bits();
    let used = c.layout.split(a.last(&c.layout) as u64).2 + 1;
    let BlockAttempt::Issued(_) = block(&st, &c, &clock, per_ms - used - 10) else {
        panic!("block not issued")
    };
    let BlockAttempt::Issued(x) = block(&st, &c, &clock, 20) else {
        panic!("block not issued")
    };
    assert_eq!(x.count, 20);
    assert!(
        !x.is_run(&c.layout),
        "a block across a millisecond is not a run"
    );
    let ids: Vec<i64> = x.ids(c.layout).collect();
    assert!(ids.windows(2).any(|w| w[1] != w[0] + 1));
    // The next block starts in the new millisecond, with room: a run.
    let BlockAttempt::Issued(y) = block(&st, &c, &clock, 20) else {
        panic!("block not issued")
    };
    assert!(y.is_run(&c.layout));
    assert!(!Block {
        first: y.first,
        count: 0
    }
    .is_run(&c.layout));
}
