//! Model and stress tests of the generator across restarts and clock
//! steps, through the public API only, with a simulated host: a durable
//! reservation file (renewed the way the extension renews it) and crash
//! restarts that rebuild the shared state from that file alone.
//!
//! Each test names the defect of issue 14 it was written against; all of
//! them failed on the 0.3.0 core.

use parking_lot::Mutex;
use snowflake_id_core::testing::{ManualClock, Xorshift, M0, MS, T0};
use snowflake_id_core::{
    Attempt, BlockAttempt, Clock, Config, Events, GenError, GeneratorState, Layout, SystemClock,
};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
/// The extension's reservation window (`src/mint/reservation.rs`).
const WINDOW_MS: i64 = 2_000;
const WORKER: u64 = 42;

/// The narrowest legal layout (35 timestamp bits, about 1.1 years), with
/// its epoch placed so that its last millisecond is `end_unix_ms`.
fn layout_ending_at(end_unix_ms: i64) -> Layout {
    let probe = Layout::new(0, 16, 12).unwrap();
    let l = Layout::new(end_unix_ms - probe.max_timestamp() as i64, 16, 12).unwrap();
    assert_eq!(l.last_unix_ms(), end_unix_ms);
    assert_eq!(l.timestamp_bits(), 35);
    l
}

/// The durable reservation file of a simulated server.
struct Host {
    file: Mutex<Option<i64>>,
    /// What the file holds, readable without its lock (`i64::MIN`: none).
    durable: AtomicI64,
    /// The reservation window beyond the frontier, in ms.
    window_ms: i64,
    /// How many times the file was written.
    renewals: AtomicU64,
}

impl Host {
    fn new() -> Self {
        Self::with_window(WINDOW_MS)
    }

    fn with_window(window_ms: i64) -> Self {
        Host {
            file: Mutex::new(None),
            durable: AtomicI64::new(i64::MIN),
            window_ms,
            renewals: AtomicU64::new(0),
        }
    }

    /// The extension's `reserve`: persist at least `upto_ms` (and the
    /// window beyond the frontier), then publish it.
    fn reserve(&self, st: &GeneratorState, layout: &Layout, clock: &impl Clock, upto_ms: i64) {
        let mut file = self.file.lock();
        if st.reserved_until_ms.load(Ordering::Acquire) >= upto_ms {
            return;
        }
        let target = st
            .renewal_target(layout, clock.wall_ns(), clock.mono_ns(), self.window_ms)
            .max(upto_ms);
        *file = Some(target);
        self.durable.store(target, Ordering::Release);
        self.renewals.fetch_add(1, Ordering::Relaxed);
        st.publish_reservation(target);
    }

    /// Shared memory as the postmaster builds it at start-up or after a
    /// crash: from the file alone.
    fn start(&self, layout: &Layout, clock: &impl Clock) -> GeneratorState {
        match *self.file.lock() {
            Some(r) => GeneratorState::resume_above(r, layout, clock.mono_ns()),
            None => {
                let st = GeneratorState::new();
                st.reserved_until_ms.store(i64::MIN, Ordering::Relaxed);
                st
            }
        }
    }
}

/// What one call of the extension does: attempts until issued, with every
/// back-pressure wait recorded (and slept on the manual clock).
fn call(
    st: &GeneratorState,
    host: &Host,
    cfg: &Config,
    clock: &ManualClock,
    want: u64,
    waits: &mut Vec<u64>,
    ev: &mut Events,
) -> Result<(i64, i64), GenError> {
    loop {
        match st.try_next_block(cfg, clock, ev, want)? {
            BlockAttempt::Issued(b) => return Ok((b.first, b.last(&cfg.layout))),
            BlockAttempt::Wait(us) => {
                waits.push(us);
                clock.advance(us as i64 * 1_000);
            }
            BlockAttempt::Reserve(ms) => host.reserve(st, &cfg.layout, clock, ms),
        }
    }
}

/// Issue 14.1: a restart within the reservation window of the layout's end
/// must not re-issue IDs: the first call after it finds the ID space used
/// up. On 0.3.0 the reservation ran past the end, `resume_above` could not
/// place it and generation restarted from the wall clock, below IDs
/// already handed out.
#[test]
fn restart_near_the_end_of_the_layout_never_reissues() {
    for (run_until_ms, step_back_ms) in [
        (-2_500, 0),
        (-1_500, 0),
        (-1_000, 0),
        (-200, 0),
        (-1, 0),
        (-1_200, 3_000),
        (-100, 60_000),
    ] {
        let end = T0 / MS + 10_000;
        let layout = layout_ending_at(end);
        let cfg = Config {
            layout,
            worker: WORKER,
            max_lead_ms: 1_000,
        };
        let clock = ManualClock::new(T0, M0);
        let host = Host::new();
        let st = host.start(&layout, &clock);
        let (mut waits, mut ev) = (vec![], Events::default());
        let mut max_before = 0;
        // Light traffic up to shortly before the end.
        while clock.wall_ms() < end + run_until_ms {
            let (_, last) = call(&st, &host, &cfg, &clock, 3, &mut waits, &mut ev).unwrap();
            assert!(last > max_before);
            max_before = last;
            clock.advance(7 * MS);
        }
        // A burst that runs ahead of the clock, then a crash.
        match call(&st, &host, &cfg, &clock, 200_000, &mut waits, &mut ev) {
            Ok((first, last)) => {
                assert!(first > max_before);
                max_before = last;
            }
            Err(e) => assert!(matches!(e, GenError::Exhausted { .. }), "{e:?}"),
        }
        let file = host.file.lock().unwrap();
        // Restart (optionally with the clock stepped back).
        clock.step_wall(-step_back_ms * MS);
        let st = host.start(&layout, &clock);
        let mut after = vec![];
        let err = loop {
            match call(&st, &host, &cfg, &clock, 1, &mut waits, &mut ev) {
                Ok((id, _)) => after.push(id),
                Err(e) => break e,
            }
            clock.advance(3 * MS);
            assert!(after.len() < 100_000, "never exhausted");
        };
        assert!(matches!(err, GenError::Exhausted { .. }), "{err:?}");
        assert!(
            after.iter().all(|id| *id > max_before),
            "restart at end{run_until_ms:+} ms (step back {step_back_ms} ms) re-issued: \
             max before {max_before}, after {:?}",
            &after[..after.len().min(3)]
        );
        assert!(
            file <= end,
            "reservation {file} past the layout's end {end}"
        );
    }
}

/// The reservation and its renewal stay within the layout; at the end
/// there is nothing left to renew (no fsync every tick).
#[test]
fn reservations_never_pass_the_end_of_the_layout() {
    let end = T0 / MS + 1_000;
    let layout = layout_ending_at(end);
    let clock = ManualClock::new(T0, M0);
    let st = GeneratorState::new();
    st.publish_reservation(end - 500);
    let target = st.renewal_target(&layout, clock.wall_ns(), clock.mono_ns(), WINDOW_MS);
    assert_eq!(target, end);
    st.publish_reservation(target);
    assert!(!st.needs_renewal(&layout, clock.wall_ns(), clock.mono_ns(), 1_000));
    // A reservation written past the end by an older version means the
    // ID space is used up: the first call fails, no ID is issued.
    let st = GeneratorState::resume_above(end + 1_500, &layout, clock.mono_ns());
    let cfg = Config {
        layout,
        worker: WORKER,
        max_lead_ms: 1_000,
    };
    assert!(matches!(
        st.try_next(&cfg, &clock, &mut Events::default()),
        Err(GenError::Exhausted { .. })
    ));
}

/// Issue 14.2: a block that opens the first fresh millisecond after the
/// clock caught up with a step back (or with the jump after a restart)
/// is bounded by `max_lead` over the wall clock, so nobody has to wait for
/// the size of the step, or re-anchor. On 0.3.0 the block was sized
/// against the pre-step reference clock, which the same CAS then lowered.
#[test]
fn block_after_catching_up_with_a_step_stays_within_the_lead() {
    for (step_ms, restart) in [(600, false), (3_000, false), (0, true)] {
        let layout = Layout::default_layout();
        let cfg = Config {
            layout,
            worker: WORKER,
            max_lead_ms: 5,
        };
        let clock = ManualClock::new(T0, M0);
        let host = Host::new();
        let mut st = host.start(&layout, &clock);
        let (mut waits, mut ev) = (vec![], Events::default());
        call(&st, &host, &cfg, &clock, 1, &mut waits, &mut ev).unwrap();
        if restart {
            // A fast restart: the jump above the reservation (~2 s).
            st = host.start(&layout, &clock);
        }
        clock.step_wall(-step_ms * MS);
        // Light traffic: IDs continue from the last timestamp (HLC) while
        // the wall clock catches up.
        let (_, mut last) = call(&st, &host, &cfg, &clock, 1, &mut waits, &mut ev).unwrap();
        let last_ms = |id: i64| layout.decode(id).unwrap().unix_ms;
        loop {
            clock.advance(MS / 2);
            if clock.wall_ms() > last_ms(last) {
                break;
            }
            last = call(&st, &host, &cfg, &clock, 1, &mut waits, &mut ev)
                .unwrap()
                .1;
        }
        // The first fresh millisecond: a big block, then a single call.
        let (_, end) = call(&st, &host, &cfg, &clock, 10_000_000, &mut waits, &mut ev).unwrap();
        let lead = last_ms(end) - clock.wall_ms();
        assert!(
            lead <= 5,
            "step {step_ms} ms / restart {restart}: block ends {lead} ms ahead"
        );
        waits.clear();
        call(&st, &host, &cfg, &clock, 1, &mut waits, &mut ev).unwrap();
        assert!(
            waits.iter().sum::<u64>() <= 1_000,
            "step {step_ms} ms / restart {restart}: waited {waits:?} µs"
        );
        assert!(!ev.reanchored, "step {step_ms} ms / restart {restart}");
    }
}

/// Issue 14.4: while backends disagree on `max_lead` (a reload that a long
/// statement has not seen yet), the lead must not ratchet: each re-anchor
/// of the low-lead backend let the high-lead one borrow a full lead again
/// on 0.3.0 (1 h to 5 h ahead over five rounds).
#[test]
fn lead_does_not_ratchet_when_backends_disagree_on_max_lead() {
    let layout = Layout::default_layout();
    let hour = 3_600_000;
    let old = Config {
        layout,
        worker: WORKER,
        max_lead_ms: hour,
    };
    let new = Config {
        max_lead_ms: 5,
        ..old
    };
    let clock = ManualClock::new(T0, M0);
    let st = GeneratorState::new();
    let mut prev = 0;
    let mut worst = 0;
    for _ in 0..5 {
        // The old session borrows as far as its lead allows...
        loop {
            match st
                .try_next_block(&old, &clock, &mut Events::default(), 1 << 50)
                .unwrap()
            {
                Attempt::Issued(b) => {
                    assert!(b.first > prev);
                    prev = b.last(&layout);
                }
                Attempt::Wait(_) => break,
                Attempt::Reserve(_) => unreachable!(),
            }
        }
        // ...and a session with the new value issues one ID.
        let mut ev = Events::default();
        let id = st
            .next_id(&new, &clock, &mut ev, |us| clock.advance(us as i64 * 1_000))
            .unwrap();
        assert!(id > prev);
        prev = id;
        worst = worst.max(st.lead_ms(&layout, clock.wall_ms()).unwrap());
        clock.advance(10 * MS);
    }
    assert!(
        worst <= hour as i64 + 1,
        "IDs ran {worst} ms ahead with max_lead of at most {hour} ms"
    );
}

/// A random walk over everything a single server lives through: traffic
/// of single IDs and blocks, light and heavy, clock steps back and
/// forward, crash restarts, and the end of a narrow layout. Invariants:
/// - IDs strictly increase, across restarts too;
/// - every ID is covered by the durable reservation when it is issued;
/// - no back-pressure wait exceeds a millisecond (steps, restarts and
///   blocks never make anyone wait for more than the millisecond in
///   progress) and nothing re-anchors (the monotonic clock never steps);
/// - once the ID space is used up (an ID at the layout's last
///   millisecond), no ID is issued again.
#[test]
fn model_random_walk_with_steps_blocks_and_restarts() {
    let mut rng = Xorshift::new(0x9e37_79b9_7f4a_7c15);
    let mut rnd = move |n: u64| rng.below(n);
    let (mut calls, mut exhausted_rounds, mut restarts_after_step) = (0, 0, 0);
    for round in 0..60 {
        let end = T0 / MS + 4_000 + rnd(8_000) as i64;
        let layout = layout_ending_at(end);
        let cfg = Config {
            layout,
            worker: WORKER,
            max_lead_ms: [1, 5, 100, 1_000][rnd(4) as usize],
        };
        let clock = ManualClock::new(T0, M0);
        let host = Host::new();
        let mut st = host.start(&layout, &clock);
        let mut prev = 0i64;
        let mut exhausted = false;
        let mut spent = false;
        for op in 0..400 {
            let ctx = format!("round {round} op {op} lead {}", cfg.max_lead_ms);
            match rnd(100) {
                0..=29 => clock.advance(rnd(20 * MS as u64) as i64),
                30..=31 => clock.advance(rnd(3_000) as i64 * MS),
                32..=35 => clock.step_wall(-(rnd(5_000) as i64) * MS),
                36 => clock.step_wall(rnd(2_000) as i64 * MS),
                37..=40 => {
                    restarts_after_step += (clock.wall_ms() < T0 / MS) as u32;
                    st = host.start(&layout, &clock)
                }
                r => {
                    let want = match r {
                        41..=80 => 1,
                        81..=95 => 1 + rnd(10_000),
                        _ => 1 + rnd(3_000_000),
                    };
                    let mut waits = vec![];
                    let mut ev = Events::default();
                    calls += 1;
                    match call(&st, &host, &cfg, &clock, want, &mut waits, &mut ev) {
                        Ok((first, last)) => {
                            assert!(!spent, "{ctx}: an ID after the ID space was used up");
                            assert!(first > prev, "{ctx}: {first} after {prev}");
                            assert!(last >= first);
                            let ms = layout.decode(last).unwrap().unix_ms;
                            let file = host.file.lock().unwrap();
                            assert!(ms <= file, "{ctx}: ID at {ms} beyond reservation {file}");
                            assert!(file <= end, "{ctx}: reservation past the end");
                            prev = last;
                        }
                        Err(GenError::Exhausted { .. }) => {
                            exhausted = true;
                            // Used up for good once an ID (or the floor
                            // of a restart) holds the layout's last
                            // millisecond; a wall clock past the end
                            // that then steps back is not (IDs go on
                            // above the last one).
                            spent = st.last_issued().is_some_and(|id| {
                                layout.decode(id).unwrap().unix_ms >= layout.last_unix_ms()
                            });
                        }
                        Err(e) => panic!("{ctx}: {e:?}"),
                    }
                    assert!(
                        waits.iter().all(|us| *us <= 1_000),
                        "{ctx}: waited {waits:?} µs"
                    );
                    assert!(!ev.reanchored, "{ctx}: re-anchored");
                }
            }
        }
        exhausted_rounds += exhausted as u32;
    }
    // The walk reached what it is meant to test.
    assert!(calls > 10_000, "{calls} calls");
    assert!(
        exhausted_rounds >= 10,
        "only {exhausted_rounds} rounds reached the end"
    );
    assert!(restarts_after_step >= 10, "{restarts_after_step} restarts");
}

/// Threads as backends of one server whose layout ends a few seconds from
/// now, crashed and restarted from the reservation file several times:
/// every incarnation's IDs are above all earlier ones, with no duplicate,
/// until the ID space is used up.
#[test]
fn stress_across_restarts_near_the_end_of_the_layout() {
    let now_ms = SystemClock.wall_ms();
    let end = now_ms + 2_500;
    let layout = layout_ending_at(end);
    let cfg = Config {
        layout,
        worker: WORKER,
        max_lead_ms: 50,
    };
    let host = Arc::new(Host::new());
    let mut all: Vec<i64> = vec![];
    let mut exhausted = false;
    for incarnation in 0..8 {
        let st = Arc::new(host.start(&layout, &SystemClock));
        let floor = all.last().copied().unwrap_or(0);
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let (st, host) = (st.clone(), host.clone());
                std::thread::spawn(move || {
                    let mut out = vec![];
                    let mut ev = Events::default();
                    let started = std::time::Instant::now();
                    while started.elapsed() < std::time::Duration::from_millis(400) {
                        let want = if t % 2 == 0 {
                            1
                        } else {
                            1 + (out.len() as u64 % 500)
                        };
                        let r = snowflake_id_core::until_issued(
                            || st.try_next_block(&cfg, &SystemClock, &mut ev, want),
                            |us| std::thread::sleep(std::time::Duration::from_micros(us)),
                            |ms| host.reserve(&st, &layout, &SystemClock, ms),
                        );
                        match r {
                            Ok(b) => out.extend(b.ids(layout)),
                            Err(GenError::Exhausted { .. }) => return (out, true),
                            Err(e) => panic!("{e:?}"),
                        }
                    }
                    (out, false)
                })
            })
            .collect();
        let mut batch = vec![];
        for h in handles {
            let (ids, ex) = h.join().unwrap();
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "per-thread order");
            exhausted |= ex;
            batch.extend(ids);
        }
        batch.sort_unstable();
        let n = batch.len();
        batch.dedup();
        assert_eq!(batch.len(), n, "incarnation {incarnation}: duplicate IDs");
        if let Some(first) = batch.first() {
            assert!(
                *first > floor,
                "incarnation {incarnation} re-issued IDs: {first} <= {floor}"
            );
        }
        all.extend(batch);
        if exhausted && n == 0 {
            break;
        }
    }
    assert!(exhausted, "the test never reached the end of the layout");
    assert!(all.len() > 1_000, "too few IDs: {}", all.len());
}

/// Threads issuing blocks and single IDs while the wall clock is stepped
/// back and forward under them: unique, increasing per thread, and nobody
/// re-anchors (the monotonic clock never steps).
#[test]
fn stress_blocks_across_clock_steps() {
    let clock = Arc::new(ManualClock::new(T0, M0));
    let st = Arc::new(GeneratorState::new());
    let cfg = Config {
        layout: Layout::default_layout(),
        worker: WORKER,
        max_lead_ms: 20,
    };
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stepper = {
        let (clock, stop) = (clock.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                clock.advance(MS / 4);
                match i % 400 {
                    100 => clock.step_wall(-700 * MS),
                    300 => clock.step_wall(-2_500 * MS),
                    399 => clock.step_wall(40 * MS),
                    _ => {}
                }
                i += 1;
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        })
    };
    let handles: Vec<_> = (0..6u64)
        .map(|t| {
            let (st, clock) = (st.clone(), clock.clone());
            std::thread::spawn(move || {
                let mut out = vec![];
                let mut ev = Events::default();
                for i in 0..4_000u64 {
                    let want = if t % 2 == 0 {
                        1
                    } else {
                        1 + (i * 131) % 20_000
                    };
                    let b = st
                        .next_block(&cfg, &*clock, &mut ev, want, |us| {
                            std::thread::sleep(std::time::Duration::from_micros(us))
                        })
                        .unwrap();
                    out.extend(b.ids(cfg.layout));
                }
                assert!(!ev.reanchored, "thread {t} re-anchored");
                out
            })
        })
        .collect();
    let mut all = vec![];
    for h in handles {
        let ids = h.join().unwrap();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "per-thread order");
        all.extend(ids);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    stepper.join().unwrap();
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "duplicate IDs");
}

/// The system's clocks, with the wall clock stepped back by hand (as NTP
/// or an operator would) and nothing else: lock-free, so that threads
/// reading it race each other as backends do.
///
/// With `ticket` set, every fourth reading of the wall clock by a thread
/// also *injects* a preemption: the reading thread yields until another
/// call has been stamped on the shared ticket counter (or 200 yields
/// have passed, or 200 us, so that nothing can deadlock), and only while
/// another thread of the round is still issuing: a thread left alone has
/// no one to wait for, and on a machine whose CPUs are busy each yield
/// can cost a whole time slice (under `stress-ng --cpu 4` on two CPUs,
/// with other builds beside it, 200 yields at every fourth reading made
/// one run take over 20 minutes instead of 70 s). The reading happens inside
/// the generator, between its load of the shared state and its
/// compare-and-swap, so the calls overlap there whatever the number of
/// CPUs or the machine's load: on one CPU as on many.
struct SteppedSystemClock {
    step_ns: AtomicI64,
    ticket: Option<Arc<AtomicU64>>,
}

thread_local! {
    static READINGS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Threads of the current stress round still issuing IDs.
static ISSUING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Clock for SteppedSystemClock {
    fn wall_ns(&self) -> i64 {
        if let Some(ticket) = &self.ticket {
            let n = READINGS.with(|r| {
                r.set(r.get() + 1);
                r.get()
            });
            if n.is_multiple_of(4) && ISSUING.load(Ordering::SeqCst) > 1 {
                let seen = ticket.load(Ordering::SeqCst);
                let until = std::time::Instant::now() + std::time::Duration::from_micros(200);
                for _ in 0..200 {
                    std::thread::yield_now();
                    if ticket.load(Ordering::SeqCst) != seen || std::time::Instant::now() >= until {
                        break;
                    }
                }
            }
        }
        SystemClock.wall_ns() + self.step_ns.load(Ordering::Relaxed)
    }
    fn mono_ns(&self) -> i64 {
        SystemClock.mono_ns()
    }
}

/// What one round of [`stress_issue_order_with_every_rare_path_under_contention`]
/// saw.
#[derive(Default)]
struct StressCounts {
    calls: usize,
    overlapped: usize,
    waits: u64,
    renewals: u64,
    steps: u32,
}

/// Issue 17: the short path's CAS retry and every rare path at once, under
/// real contention. Eight threads (single IDs through the short path,
/// blocks through the general one) on the system's clocks, with the wall
/// clock stepped back 300 ms every 100 ms, a 20 ms lead bound that the
/// threads keep reaching (they borrow far faster than the clock admits),
/// and a 5 ms reservation window, narrower than the lead, so that bursts
/// ahead of the clock keep renewing it. Every call is
/// stamped from one shared counter before it starts and after it returns,
/// and:
/// - a call that returned before another started issued lower IDs (the
///   IDs increase in issue order across threads, not only per thread);
/// - no ID is past the durable reservation, nor more than `max_lead` (+1
///   for the millisecond in progress) ahead of the real clock;
/// - no thread re-anchors, and no ID is issued twice.
///
/// The rare paths must be taken for the test to mean anything, and none of
/// them may depend on the machine's speed or load (issue 40): contention
/// is injected (see [`SteppedSystemClock`]); in each round one thread
/// asks 120 times for 200,000 IDs at once, 49 ms of them, more than the
/// 20 ms lead bound admits, so it must wait at the bound and renew the
/// reservation; the wall clock steps back at least twice per round; and
/// rounds repeat, each checked in full, until every precondition holds
/// (for at most 10 minutes, a bound only a hung machine reaches, never a
/// count of rounds: on a machine loaded to 8× its cores a round can meet
/// fewer of them; issue 45; the rounds taken are reported).
#[test]
fn stress_issue_order_with_every_rare_path_under_contention() {
    const MAX_LEAD_MS: u64 = 20;
    let ticket = Arc::new(AtomicU64::new(0));
    let clock = Arc::new(SteppedSystemClock {
        step_ns: AtomicI64::new(0),
        ticket: Some(ticket.clone()),
    });
    let host = Arc::new(Host::with_window(5));
    let st = Arc::new(host.start(&Layout::default_layout(), &*clock));
    let cfg = Config {
        layout: Layout::default_layout(),
        worker: WORKER,
        max_lead_ms: MAX_LEAD_MS,
    };
    let started_at = std::time::Instant::now();
    let mut total = StressCounts::default();
    let mut rounds = 0;
    let enough = |c: &StressCounts| {
        c.overlapped > c.calls / 10 && c.waits > 100 && c.renewals > 10 && c.steps >= 2
    };
    while !enough(&total) {
        assert!(
            started_at.elapsed() < std::time::Duration::from_secs(600),
            "preconditions not met after {rounds} rounds in 10 minutes: {} of {} calls overlapped, {} waits, {} renewals, {} steps back",
            total.overlapped,
            total.calls,
            total.waits,
            total.renewals,
            total.steps
        );
        let renewals_before = host.renewals.load(Ordering::Relaxed);
        let c = stress_round(&st, &host, &clock, &ticket, &cfg, MAX_LEAD_MS);
        total.calls += c.calls;
        total.overlapped += c.overlapped;
        total.waits += c.waits;
        total.renewals += host.renewals.load(Ordering::Relaxed) - renewals_before;
        total.steps += c.steps;
        rounds += 1;
    }
    eprintln!(
        "{rounds} round(s) in {:?}: {} of {} calls overlapped; {} waits, {} renewals, {} steps back",
        started_at.elapsed(),
        total.overlapped,
        total.calls,
        total.waits,
        total.renewals,
        total.steps
    );
}

/// One round of the stress test: every call checked as the test's
/// documentation says; returns what it saw.
fn stress_round(
    st: &Arc<GeneratorState>,
    host: &Arc<Host>,
    clock: &Arc<SteppedSystemClock>,
    ticket: &Arc<AtomicU64>,
    cfg: &Config,
    max_lead_ms: u64,
) -> StressCounts {
    let cfg = *cfg;
    let stop = Arc::new(AtomicBool::new(false));
    let stepper = {
        let (clock, stop) = (clock.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut steps = 0u32;
            // At least two steps per round, however fast the round is.
            while steps < 2 || !stop.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(100));
                clock.step_ns.fetch_sub(300 * MS, Ordering::Relaxed);
                steps += 1;
            }
            steps
        })
    };
    let waits = Arc::new(AtomicU64::new(0));
    ISSUING.store(8, Ordering::SeqCst);
    // (started, returned, first ID, last ID) of every call.
    let handles: Vec<_> = (0..8u64)
        .map(|t| {
            let (st, host, clock) = (st.clone(), host.clone(), clock.clone());
            let (ticket, waits) = (ticket.clone(), waits.clone());
            std::thread::spawn(move || {
                let mut calls = Vec::with_capacity(20_000);
                let mut ev = Events::default();
                let sleep = |us: u64| {
                    waits.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(std::time::Duration::from_micros(us))
                };
                let reserve = |ms| host.reserve(&st, &cfg.layout, &*clock, ms);
                for i in 0..20_000u64 {
                    let started = ticket.fetch_add(1, Ordering::SeqCst);
                    let (first, last) = if t % 2 == 0 {
                        let id = snowflake_id_core::until_issued(
                            || st.try_next(&cfg, &*clock, &mut ev),
                            sleep,
                            reserve,
                        )
                        .unwrap();
                        (id, id)
                    } else {
                        // Mostly small blocks; every 128th spans about
                        // two milliseconds, past the lead bound and the
                        // reservation when they are near. Thread 1's
                        // first 120 calls each ask for 49 ms of IDs: the
                        // first takes the lead to its bound, and every
                        // later one must wait there, however fast or slow
                        // the machine.
                        let want = if t == 1 && i < 120 {
                            200_000
                        } else if i % 128 == 0 {
                            8_000
                        } else {
                            1 + (i * 97 + t) % 50
                        };
                        let b = snowflake_id_core::until_issued(
                            || st.try_next_block(&cfg, &*clock, &mut ev, want),
                            sleep,
                            reserve,
                        )
                        .unwrap();
                        (b.first, b.last(&cfg.layout))
                    };
                    let returned = ticket.fetch_add(1, Ordering::SeqCst);
                    let id_ms = cfg.layout.decode(last).unwrap().unix_ms;
                    let durable = host.durable.load(Ordering::Acquire);
                    assert!(
                        id_ms <= durable,
                        "ID at {id_ms} past the reservation {durable}"
                    );
                    let real_ms = SystemClock.wall_ms();
                    assert!(
                        id_ms <= real_ms + max_lead_ms as i64 + 1,
                        "ID at {id_ms} leads the real clock {real_ms} by more than {max_lead_ms} ms"
                    );
                    calls.push((started, returned, first, last));
                }
                ISSUING.fetch_sub(1, Ordering::SeqCst);
                assert!(!ev.reanchored, "thread {t} re-anchored");
                calls
            })
        })
        .collect();
    let mut calls: Vec<(u64, u64, i64, i64)> = vec![];
    for h in handles {
        calls.extend(h.join().unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    let steps = stepper.join().unwrap();

    // Issue order: the highest ID of the calls that returned before each
    // call started is below that call's first ID.
    let mut by_return: Vec<(u64, i64)> = calls.iter().map(|c| (c.1, c.3)).collect();
    by_return.sort_unstable();
    let mut highest_returned = Vec::with_capacity(by_return.len());
    let mut high = i64::MIN;
    for &(_, last) in &by_return {
        high = high.max(last);
        highest_returned.push(high);
    }
    for &(started, _, first, _) in &calls {
        let done_before = by_return.partition_point(|&(returned, _)| returned < started);
        if done_before > 0 {
            assert!(
                highest_returned[done_before - 1] < first,
                "a call that started after another returned issued a lower ID: {first}"
            );
        }
    }
    let mut ids: Vec<(i64, i64)> = calls.iter().map(|c| (c.2, c.3)).collect();
    ids.sort_unstable();
    assert!(ids.windows(2).all(|w| w[0].1 < w[1].0), "duplicate IDs");
    // The rare paths: calls overlapped other threads' calls (another call
    // was stamped in between), threads slept at the lead bound, renewed
    // the reservation, and saw the wall clock step back.
    StressCounts {
        calls: calls.len(),
        overlapped: calls.iter().filter(|c| c.1 - c.0 > 1).count(),
        waits: waits.load(Ordering::Relaxed),
        renewals: 0,
        steps,
    }
}
