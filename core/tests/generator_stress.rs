//! Multithreaded stress tests of the generator: many threads share one
//! [`GeneratorState`], as backends share it in shared memory, and every
//! ID must be unique and increasing within each thread, through borrowed
//! milliseconds, blocks, per-thread millisecond caches and clock steps.
//! The stress tests across restarts are in `generator_model.rs`.

use snowflake_id_core::testing::{join_unique_ordered, ManualClock, M0, MS, T0};
use snowflake_id_core::{
    CachedClock, Clock, Config, Events, GeneratorState, Layout, MillisCache, SystemClock, Tsc,
};
use std::sync::Arc;

fn cfg(max_lead_ms: u64) -> Config {
    Config {
        layout: Layout::default_layout(),
        worker: 42,
        max_lead_ms,
    }
}

/// Blocks and single IDs from many threads at once: unique, and
/// increasing within each thread.
#[test]
fn stress_blocks_and_singles() {
    let st = Arc::new(GeneratorState::new());
    let c = cfg(1000);
    let clock: Arc<dyn Clock + Send + Sync> = Arc::new(SystemClock);
    let handles: Vec<_> = (0..8u64)
        .map(|t| {
            let (st, clock) = (st.clone(), clock.clone());
            std::thread::spawn(move || {
                let mut out = Vec::new();
                let mut ev = Events::default();
                let sleep = |us| std::thread::sleep(std::time::Duration::from_micros(us));
                for i in 0..3_000u64 {
                    if t % 2 == 0 {
                        let want = 1 + (i * 37 + t) % 300;
                        let b = st.next_block(&c, &clock, &mut ev, want, sleep).unwrap();
                        assert!(b.count >= 1 && b.count <= want);
                        out.extend(b.ids(c.layout));
                    } else {
                        out.push(st.next_id(&c, &clock, &mut ev, sleep).unwrap());
                    }
                }
                out
            })
        })
        .collect();
    let all = join_unique_ordered(handles);
    let n = all.len();
    assert!(n > 4 * 3_000 * 100, "blocks were too small: {n} IDs");
    assert_eq!(st.last_issued(), all.last().copied());
}

/// Threads as backends: each with its own millisecond cache over the
/// real clocks and the CPU's counter (caching only where the counter is
/// usable; the IDs must be right either way). The threads start 5 ms
/// apart, so that some calibrate while others mint. Every millisecond a
/// cache returns lies between two real readings taken around it, also
/// while the cache is calibrating.
#[test]
fn stress_with_per_thread_millisecond_caches() {
    let st = Arc::new(GeneratorState::new());
    let c = cfg(1000);
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let st = st.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(5 * i));
                let cache = MillisCache::new(cfg!(target_arch = "x86_64"));
                let clock = CachedClock {
                    cache: &cache,
                    clock: SystemClock,
                    counter: Tsc,
                };
                let mut ev = Events::default();
                let mut out = Vec::with_capacity(200_000);
                for _ in 0..200_000 {
                    let before = SystemClock.wall_ns().div_euclid(MS);
                    let ms = clock.wall_ms();
                    assert!(before <= ms && ms <= SystemClock.wall_ns().div_euclid(MS));
                    let id = st
                        .next_id(&c, &clock, &mut ev, |us| {
                            std::thread::sleep(std::time::Duration::from_micros(us))
                        })
                        .unwrap();
                    // The ID is never more than max_lead (+1 ms for the
                    // millisecond in progress) ahead of the real clock.
                    let real_ms = SystemClock.wall_ns().div_euclid(MS);
                    assert!(c.layout.decode(id).unwrap().unix_ms <= real_ms + 1001);
                    out.push(id);
                }
                out
            })
        })
        .collect();
    join_unique_ordered(handles);
}

fn stress(clock: Arc<dyn Clock + Send + Sync>, threads: usize, per_thread: usize, lead: u64) {
    let st = Arc::new(GeneratorState::new());
    let c = cfg(lead);
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let st = st.clone();
            let clock = clock.clone();
            std::thread::spawn(move || {
                let mut out = Vec::with_capacity(per_thread);
                let mut ev = Events::default();
                for _ in 0..per_thread {
                    let id = st
                        .next_id(&c, &clock, &mut ev, |us| {
                            std::thread::sleep(std::time::Duration::from_micros(us))
                        })
                        .unwrap();
                    out.push(id);
                }
                out
            })
        })
        .collect();
    let all = join_unique_ordered(handles);
    assert_eq!(all.len(), threads * per_thread);
    assert!(all
        .iter()
        .all(|id| c.layout.decode(*id).unwrap().worker == 42));
    assert_eq!(st.last_issued(), all.last().copied());
}

#[test]
fn stress_system_clock() {
    stress(Arc::new(SystemClock), 8, 100_000, 1000);
}

#[test]
fn stress_frozen_clock_borrows() {
    // A frozen clock forces every thread through the borrow path.
    stress(Arc::new(ManualClock::new(T0, M0)), 8, 20_000, 1000);
}

/// Six threads on a manual clock that another thread advances 200 times,
/// stepping the wall clock back by a second at four of them. The stepper
/// moves on the threads' progress, not on a timer, and a thread more than
/// one move ahead of it yields until the stepper catches up: however the
/// machine schedules them (one busy CPU included), the steps fall in the
/// middle of the run and the threads see them, which the test asserts.
#[test]
fn stress_with_clock_steps() {
    use std::sync::atomic::{AtomicU64, Ordering};
    const THREADS: u64 = 6;
    const PER_THREAD: u64 = 30_000;
    const MOVES: u64 = 200;
    const PER_MOVE: u64 = THREADS * PER_THREAD / MOVES;
    let clock = Arc::new(ManualClock::new(T0, M0));
    let issued = Arc::new(AtomicU64::new(0));
    let moves = Arc::new(AtomicU64::new(0));
    // Waits until `ready` holds; only a hung machine reaches the bound.
    fn wait_for(ready: impl Fn() -> bool, what: &str) {
        let started = std::time::Instant::now();
        while !ready() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "{what} for 60 s"
            );
            std::thread::yield_now();
        }
    }
    let stepper = {
        let (clock, issued, moves) = (clock.clone(), issued.clone(), moves.clone());
        std::thread::spawn(move || {
            for i in 0..MOVES {
                wait_for(
                    || issued.load(Ordering::Acquire) >= i * PER_MOVE,
                    "the threads issued nothing",
                );
                clock.advance(MS);
                if i % 50 == 25 {
                    clock.step_wall(-1000 * MS);
                }
                moves.store(i + 1, Ordering::Release);
            }
        })
    };
    let st = Arc::new(GeneratorState::new());
    let c = cfg(1000);
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (st, clock, issued, moves) =
                (st.clone(), clock.clone(), issued.clone(), moves.clone());
            std::thread::spawn(move || {
                let mut out = Vec::with_capacity(PER_THREAD as usize);
                let mut ev = Events::default();
                let mut saw_step = false;
                for _ in 0..PER_THREAD {
                    let id = st
                        .next_id(&c, &*clock, &mut ev, |us| {
                            std::thread::sleep(std::time::Duration::from_micros(us))
                        })
                        .unwrap();
                    out.push(id);
                    saw_step |= ev.step_back_ns.is_some();
                    let n = issued.fetch_add(1, Ordering::AcqRel) + 1;
                    wait_for(
                        || (n / PER_MOVE).min(MOVES) <= moves.load(Ordering::Acquire) + 1,
                        "the stepper did not move",
                    );
                }
                (out, saw_step)
            })
        })
        .collect();
    let mut saw = 0;
    let ids: Vec<_> = handles
        .into_iter()
        .map(|h| {
            let (out, s) = h.join().unwrap();
            saw += usize::from(s);
            out
        })
        .collect();
    stepper.join().unwrap();
    // The same checks as `stress`: unique, increasing per thread, worker 42.
    let mut all = vec![];
    for out in ids {
        assert!(out.windows(2).all(|w| w[0] < w[1]), "per-thread order");
        all.extend(out);
    }
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "duplicate IDs");
    assert_eq!(n as u64, THREADS * PER_THREAD);
    assert!(all
        .iter()
        .all(|id| c.layout.decode(*id).unwrap().worker == 42));
    assert_eq!(st.last_issued(), all.last().copied());
    assert!(
        saw > 0,
        "no thread saw a clock step: the test proves nothing"
    );
    eprintln!("stress_with_clock_steps: {saw} of {THREADS} threads saw a step back");
}

/// Issue 47: the lease's deadline under contention. Six threads mint for
/// worker 42 while another thread advances a manual clock a millisecond
/// at a time, past the deadline (on a millisecond boundary), and only
/// then raises a flag. A call that starts after the flag is refused,
/// whichever path it takes and however the threads interleave (the first
/// refusal fences the short path); every ID is unique and increasing per
/// thread; and nothing is issued from then on.
#[test]
fn stress_lease_deadline() {
    use snowflake_id_core::GenError;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    const THREADS: u64 = 6;
    const MOVES: i64 = 50;
    let layout = Layout::default_layout();
    let clock = Arc::new(ManualClock::new(T0, M0));
    let st = Arc::new(GeneratorState::new());
    st.assign_worker(42, i64::MIN, &layout, M0);
    st.set_lease_deadline(M0 + MOVES * MS);
    let passed = Arc::new(AtomicBool::new(false));
    let issued = Arc::new(AtomicU64::new(0));
    let c = cfg(1000);
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (st, clock, passed, issued) =
                (st.clone(), clock.clone(), passed.clone(), issued.clone());
            std::thread::spawn(move || {
                let mut out = Vec::new();
                let mut ev = Events::default();
                loop {
                    let after = passed.load(Ordering::Acquire);
                    match st.next_id(&c, &clock, &mut ev, |_| std::thread::yield_now()) {
                        Ok(id) => {
                            assert!(
                                !after,
                                "{id} issued by a call that began after the deadline"
                            );
                            out.push(id);
                            issued.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(GenError::LeaseExpired { worker: 42 }) => break,
                        Err(e) => panic!("unexpected {e:?}"),
                    }
                }
                out
            })
        })
        .collect();
    for m in 1..=MOVES + 2 {
        // Move on the threads' progress: some IDs in every millisecond.
        let want = issued.load(Ordering::Relaxed) + 50;
        let started = std::time::Instant::now();
        while issued.load(Ordering::Relaxed) < want && m <= MOVES {
            assert!(started.elapsed() < std::time::Duration::from_secs(60));
            std::thread::yield_now();
        }
        clock.advance(MS);
        if clock.lease_ns() >= M0 + MOVES * MS {
            passed.store(true, Ordering::Release);
        }
    }
    let all = join_unique_ordered(handles);
    assert!(all.len() as i64 >= 50 * MOVES, "only {} IDs", all.len());
    assert!(passed.load(Ordering::Acquire));
    let mut ev = Events::default();
    assert_eq!(
        st.try_next(&c, &*clock, &mut ev),
        Err(GenError::LeaseExpired { worker: 42 })
    );
}
