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
/// usable; the IDs must be right either way).
#[test]
fn stress_with_per_thread_millisecond_caches() {
    let st = Arc::new(GeneratorState::new());
    let c = cfg(1000);
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let st = st.clone();
            std::thread::spawn(move || {
                let cache = MillisCache::new(cfg!(target_arch = "x86_64"));
                let clock = CachedClock {
                    cache: &cache,
                    clock: SystemClock,
                    counter: Tsc,
                };
                let mut ev = Events::default();
                let mut out = Vec::with_capacity(200_000);
                for _ in 0..200_000 {
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

#[test]
fn stress_with_clock_steps() {
    let clock = Arc::new(ManualClock::new(T0, M0));
    let stepper = {
        let clock = clock.clone();
        std::thread::spawn(move || {
            for i in 0..200 {
                clock.advance(MS);
                if i % 50 == 25 {
                    clock.step_wall(-1000 * MS);
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        })
    };
    stress(clock, 6, 30_000, 1000);
    stepper.join().unwrap();
}
