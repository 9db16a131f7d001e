//! A set of database OIDs in shared memory, with one writer and any
//! number of readers: the databases that lag behind the high-water mark
//! (the extension's `high_water` module; no ID is handed out in them).
//!
//! Open addressing with linear probing over `N` atomic slots: `0` is a
//! free slot (no database has OID 0) and [`TOMBSTONE`] a removed one, so
//! that a lookup walks past it to an OID that collided with the removed
//! one. A lookup costs one probe in the common case, however many OIDs
//! the set holds; the writer clears every tombstone whenever the set
//! becomes empty. Readers never block and never see a torn OID (each slot
//! is one atomic word). A reader racing the writer sees the set before or
//! after each single insert or removal.
//!
//! Up to `N` OIDs fit (0.8.0 had 64 slots, and 65 lagging databases made
//! every round of the mark fail: issue 46). [`OidSet::insert`] says when
//! the set is full.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// A slot whose OID was removed.
pub const TOMBSTONE: u32 = u32::MAX;

pub struct OidSet<const N: usize> {
    slots: [AtomicU32; N],
    /// OIDs in the set (tombstones not counted).
    len: AtomicUsize,
}

impl<const N: usize> Default for OidSet<N> {
    fn default() -> Self {
        OidSet {
            slots: std::array::from_fn(|_| AtomicU32::new(0)),
            len: AtomicUsize::new(0),
        }
    }
}

impl<const N: usize> OidSet<N> {
    fn home(oid: u32) -> usize {
        // Fibonacci hashing spreads consecutive OIDs (databases created
        // one after another) over the table.
        (oid.wrapping_mul(0x9E37_79B9) as usize) % N
    }

    /// The slot holding `oid`, if any.
    fn find(&self, oid: u32) -> Option<usize> {
        let h = Self::home(oid);
        for i in 0..N {
            let at = (h + i) % N;
            match self.slots[at].load(Ordering::Acquire) {
                0 => return None,
                v if v == oid => return Some(at),
                _ => {}
            }
        }
        None
    }

    /// Whether `oid` is in the set. Any process.
    pub fn contains(&self, oid: u32) -> bool {
        oid != 0 && oid != TOMBSTONE && self.find(oid).is_some()
    }

    /// Whether the set is empty. Any process.
    pub fn is_empty(&self) -> bool {
        self.len.load(Ordering::Acquire) == 0
    }

    /// How many OIDs the set holds.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Add `oid` (the writer only). Returns false when it is not a
    /// database's OID or the set is full.
    pub fn insert(&self, oid: u32) -> bool {
        if oid == 0 || oid == TOMBSTONE {
            return false;
        }
        if self.find(oid).is_some() {
            return true;
        }
        let h = Self::home(oid);
        for i in 0..N {
            let at = (h + i) % N;
            let v = self.slots[at].load(Ordering::Acquire);
            if v == 0 || v == TOMBSTONE {
                self.slots[at].store(oid, Ordering::Release);
                self.len.fetch_add(1, Ordering::AcqRel);
                return true;
            }
        }
        false
    }

    /// Remove `oid` (the writer only); when the set becomes empty, every
    /// tombstone goes too.
    pub fn remove(&self, oid: u32) {
        if oid == 0 || oid == TOMBSTONE {
            return;
        }
        if let Some(at) = self.find(oid) {
            self.slots[at].store(TOMBSTONE, Ordering::Release);
            if self.len.fetch_sub(1, Ordering::AcqRel) == 1 {
                for s in &self.slots {
                    if s.load(Ordering::Acquire) == TOMBSTONE {
                        s.store(0, Ordering::Release);
                    }
                }
            }
        }
    }

    /// The OIDs in the set, in slot order.
    pub fn oids(&self) -> Vec<u32> {
        self.slots
            .iter()
            .map(|s| s.load(Ordering::Acquire))
            .filter(|&v| v != 0 && v != TOMBSTONE)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// A random walk of inserts and removals agrees with a `HashSet` at
    /// every step, with a table small enough that OIDs collide, probe
    /// chains cross removed slots, and the table fills.
    #[test]
    fn agrees_with_a_hash_set() {
        let set = OidSet::<16>::default();
        let mut model = HashSet::new();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let oid = 1 + (x % 40) as u32;
            if x.is_multiple_of(3) {
                set.remove(oid);
                model.remove(&oid);
            } else {
                let fits = model.len() < 16 || model.contains(&oid);
                assert_eq!(
                    set.insert(oid),
                    fits,
                    "insert {oid} with {} in",
                    model.len()
                );
                if fits {
                    model.insert(oid);
                }
            }
            assert_eq!(set.len(), model.len());
            assert_eq!(set.is_empty(), model.is_empty());
            for probe in 1..=40 {
                assert_eq!(set.contains(probe), model.contains(&probe), "oid {probe}");
            }
            let mut oids = set.oids();
            oids.sort_unstable();
            let mut want: Vec<u32> = model.iter().copied().collect();
            want.sort_unstable();
            assert_eq!(oids, want);
        }
    }

    /// More than 64 databases (0.8.0's limit) fit, and each is found.
    #[test]
    fn holds_thousands_of_consecutive_oids() {
        let set = OidSet::<4096>::default();
        for oid in 16_384..16_384 + 4096 {
            assert!(set.insert(oid));
        }
        assert!(!set.insert(99), "a full set says so");
        assert!((16_384..16_384 + 4096).all(|oid| set.contains(oid)));
        for oid in 16_384..16_384 + 4096 {
            set.remove(oid);
        }
        assert!(set.is_empty() && set.oids().is_empty());
        assert!(set.insert(99) && set.contains(99));
    }

    /// OID 0 and the tombstone are never members.
    #[test]
    fn refuses_invalid_oids() {
        let set = OidSet::<8>::default();
        assert!(!set.insert(0) && !set.insert(TOMBSTONE));
        assert!(!set.contains(0) && !set.contains(TOMBSTONE));
        set.remove(0);
        assert!(set.is_empty());
    }

    /// Readers on other threads never miss an OID that stays in the set
    /// while the writer inserts and removes others that collide with it.
    /// The writer goes on until the readers have looked 100,000 times (a
    /// bound of 60 s only a hung machine reaches).
    #[test]
    fn a_reader_never_misses_a_member_while_others_come_and_go() {
        use std::sync::atomic::AtomicU64;
        use std::sync::Arc;
        let set = Arc::new(OidSet::<8>::default());
        assert!(set.insert(1_000));
        let reads = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (set, stop, reads) = (set.clone(), stop.clone(), reads.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        assert!(set.contains(1_000), "a member was missed");
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        let started = std::time::Instant::now();
        let mut round = 0u32;
        while reads.load(Ordering::Relaxed) < 100_000 {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "the readers did not run"
            );
            // Seven OIDs over eight slots: their chains cross the
            // member's slot, and removals leave tombstones around it.
            let oid = 2_000 + round % 7;
            set.insert(oid);
            set.remove(oid);
            round = round.wrapping_add(1);
        }
        stop.store(true, Ordering::Relaxed);
        for r in readers {
            r.join().unwrap();
        }
    }
}

/// A set of OIDs that only grows, with any number of writers and
/// readers: each insert claims a free slot with one compare-and-swap, so
/// two processes inserting at once never lose an OID or store one twice.
/// For what is recorded once and never forgotten (the databases named in
/// the log).
pub struct GrowingOidSet<const N: usize> {
    slots: [AtomicU32; N],
    len: AtomicUsize,
}

impl<const N: usize> Default for GrowingOidSet<N> {
    fn default() -> Self {
        GrowingOidSet {
            slots: std::array::from_fn(|_| AtomicU32::new(0)),
            len: AtomicUsize::new(0),
        }
    }
}

impl<const N: usize> GrowingOidSet<N> {
    /// Add `oid`. Returns true only for the one call that added it (false
    /// when it was there already, is 0, or the set is full).
    pub fn insert(&self, oid: u32) -> bool {
        if oid == 0 {
            return false;
        }
        let h = OidSet::<N>::home(oid);
        for i in 0..N {
            let slot = &self.slots[(h + i) % N];
            match slot.compare_exchange(0, oid, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    self.len.fetch_add(1, Ordering::AcqRel);
                    return true;
                }
                Err(v) if v == oid => return false,
                Err(_) => {}
            }
        }
        false
    }

    /// How many OIDs the set holds.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod growing_tests {
    use super::GrowingOidSet;
    use std::sync::Arc;

    #[test]
    fn concurrent_writers_add_each_oid_once() {
        let set: Arc<GrowingOidSet<1024>> = Arc::new(GrowingOidSet::default());
        let added: Vec<usize> = (0..4)
            .map(|_| {
                let set = Arc::clone(&set);
                std::thread::spawn(move || (1..=600u32).filter(|&o| set.insert(o)).count())
            })
            .map(|h| h.join().unwrap())
            .collect();
        assert_eq!(added.iter().sum::<usize>(), 600);
        assert_eq!(set.len(), 600);
        assert!(!set.insert(17));
        assert!(!set.insert(0));
    }

    #[test]
    fn a_full_set_says_so() {
        let set: GrowingOidSet<4> = GrowingOidSet::default();
        assert!((1..=4).all(|o| set.insert(o)));
        assert!(!set.insert(5));
    }
}
