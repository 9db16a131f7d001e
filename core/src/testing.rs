//! Test support, compiled only for tests or with the `testing` feature
//! (the integration tests in `core/tests/` enable it through a
//! dev-dependency of the crate on itself): the fake clock and helpers that
//! the unit, model and stress tests share.

use crate::clock::Clock;
use parking_lot::Mutex;

/// One millisecond in nanoseconds.
pub const MS: i64 = 1_000_000;
/// 2025-06-01 00:00:00 UTC in ns: where the manual clocks of tests start.
pub const T0: i64 = 1_748_736_000_000 * MS;
/// An arbitrary monotonic origin for manual clocks.
pub const M0: i64 = 12_345 * MS;

/// A clock for tests: both readings are set by hand and can be shared by
/// many threads. Process-local by nature, hence a `parking_lot` mutex.
#[derive(Debug)]
pub struct ManualClock {
    inner: Mutex<(i64, i64)>,
}

impl ManualClock {
    pub fn new(wall_ns: i64, mono_ns: i64) -> Self {
        ManualClock {
            inner: Mutex::new((wall_ns, mono_ns)),
        }
    }
    /// Let `ns` of real time pass: both clocks advance.
    pub fn advance(&self, ns: i64) {
        let mut g = self.inner.lock();
        g.0 += ns;
        g.1 += ns;
    }
    /// Step the wall clock alone (negative = backwards), as NTP or an
    /// operator would.
    pub fn step_wall(&self, ns: i64) {
        self.inner.lock().0 += ns;
    }
    /// Step the monotonic clock alone. Real systems never do this; it
    /// models a broken time source.
    pub fn step_mono(&self, ns: i64) {
        self.inner.lock().1 += ns;
    }
}

impl Clock for ManualClock {
    fn wall_ns(&self) -> i64 {
        self.inner.lock().0
    }
    fn mono_ns(&self) -> i64 {
        self.inner.lock().1
    }
}

/// A small deterministic pseudo-random generator (xorshift64) for
/// randomised tests: the same seed gives the same sequence on every run.
#[derive(Clone, Debug)]
pub struct Xorshift(u64);

impl Xorshift {
    /// A generator seeded with `seed` (must not be 0).
    pub fn new(seed: u64) -> Self {
        assert_ne!(seed, 0, "xorshift needs a non-zero seed");
        Xorshift(seed)
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Join the threads of a stress test: each thread's IDs must strictly
/// increase, and no ID may repeat across threads. Returns all of them,
/// sorted.
pub fn join_unique_ordered(handles: Vec<std::thread::JoinHandle<Vec<i64>>>) -> Vec<i64> {
    let mut all = Vec::new();
    for h in handles {
        let ids = h.join().unwrap();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "per-thread order violated"
        );
        all.extend(ids);
    }
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "duplicate IDs");
    all
}
