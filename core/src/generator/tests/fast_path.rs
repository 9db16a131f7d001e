//! The fast and short paths against the general algorithm (issue 48):
//! from random states of every kind, `try_next`'s short and fast paths,
//! and the entry point's `try_fast` (for other layouts too), issue what
//! the general algorithm or `try_next_in` would, and leave the same
//! state.

use super::*;

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
