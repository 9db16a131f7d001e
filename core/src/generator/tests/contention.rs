//! The fast path with other callers in between (issue 48): one
//! read-modify-write per ID under contention, never retried, and unique,
//! increasing IDs with the caller preempted at each step.

use super::*;

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
