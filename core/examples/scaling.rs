//! Thread scaling of the generator's shared state, without PostgreSQL.
//!
//! T threads share one [`GeneratorState`], as backends share it in shared
//! memory, and each takes `--ids` single IDs (each thread with its own
//! millisecond cache, like a backend). The aggregate rate is all IDs over
//! the wall time of the slowest thread. Beside it, measured in the same
//! run: a plain shared `fetch_add` counter (the cost of one contended
//! atomic, the floor of any shared generator) and the layout's ceiling
//! (2^sequence_bits IDs per ms of clock time, exceeded only by borrowing
//! future milliseconds under `max_lead`).
//!
//! ```text
//! cargo run --release -p snowflake_id_core --example scaling -- [--ids N] [--threads 1,2,4] [--reps R] [--max-lead-ms MS]
//! ```
//!
//! Prints a Markdown table of medians over `--reps` rounds.

use snowflake_id_core::{
    until_issued, CachedClock, Clock, Config, Events, GeneratorState, LastMillisecond, Layout,
    MillisCache, SystemClock, Tsc,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

struct Args {
    ids: u64,
    threads: Vec<usize>,
    reps: usize,
    max_lead_ms: u64,
}

fn args() -> Args {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut a = Args {
        ids: 1_000_000,
        threads: (0..)
            .map(|i| 1usize << i)
            .take_while(|&t| t <= 4 * cores)
            .collect(),
        reps: 5,
        max_lead_ms: 3_600_000,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut it = argv.iter();
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--ids" => a.ids = value.parse().expect("--ids N"),
            "--reps" => a.reps = value.parse().expect("--reps R"),
            "--max-lead-ms" => a.max_lead_ms = value.parse().expect("--max-lead-ms MS"),
            "--threads" => {
                a.threads = value
                    .split(',')
                    .map(|t| t.parse().expect("--threads 1,2,4"))
                    .collect()
            }
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

/// Wall time in ms for `threads` threads to run `work` `ids` times each,
/// all released at once.
fn timed(threads: usize, work: impl Fn() -> Box<dyn FnMut() + Send> + Sync) -> f64 {
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let mut f = work();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                f();
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    start.elapsed().as_secs_f64() * 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let a = args();
    let layout = Layout::default_layout();
    let ceiling = (layout.max_sequence() + 1) as f64;
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "{cores} hardware threads; {} IDs per thread; max_lead {} ms; medians of {} rounds",
        a.ids, a.max_lead_ms, a.reps
    );
    println!();
    println!(
        "| threads | generator IDs/ms | share of ceiling ({ceiling:.0}/ms) | shared fetch_add IDs/ms | generator / fetch_add |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for &t in &a.threads {
        let (mut gen_rates, mut add_rates) = (vec![], vec![]);
        for _ in 0..a.reps {
            let total = (t as u64 * a.ids) as f64;
            let state = Arc::new(GeneratorState::new());
            let cfg = Config {
                layout,
                worker: 42,
                max_lead_ms: a.max_lead_ms,
            };
            let ids = a.ids;
            let ms = timed(t, || {
                let state = state.clone();
                Box::new(move || {
                    let cache = MillisCache::new(cfg!(target_arch = "x86_64"));
                    let clock = CachedClock {
                        cache: &cache,
                        clock: SystemClock,
                        counter: Tsc,
                    };
                    // Like a backend: its own millisecond cache and its
                    // own memory of its last millisecond.
                    let mine = LastMillisecond::new();
                    let mut ev = Events::default();
                    let mut last = 0;
                    for _ in 0..ids {
                        let id = until_issued(
                            || state.try_next_in(&cfg, &clock, &mut ev, &mine),
                            |us| std::thread::sleep(std::time::Duration::from_micros(us)),
                            |ms| unreachable!("no reservation here, asked up to {ms}"),
                        )
                        .unwrap();
                        assert!(id > last, "IDs must increase within a thread");
                        last = id;
                    }
                    let _ = clock.wall_ns();
                })
            });
            gen_rates.push(total / ms);
            let counter = Arc::new(AtomicU64::new(0));
            let ms = timed(t, || {
                let counter = counter.clone();
                Box::new(move || {
                    for _ in 0..ids {
                        std::hint::black_box(counter.fetch_add(1, Ordering::AcqRel));
                    }
                })
            });
            add_rates.push(total / ms);
        }
        let (g, f) = (median(gen_rates), median(add_rates));
        println!(
            "| {t} | {g:.0} | {:.0}% | {f:.0} | {:.2} |",
            100.0 * g / ceiling,
            g / f
        );
    }
}
