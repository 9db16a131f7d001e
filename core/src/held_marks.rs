//! The high-water marks held back, per database (issue 55): a mark far
//! ahead of the clock stops minting in the database that holds it
//! alone, so the extension's `high_water` module keeps which databases
//! hold one, and the largest mark each holds, in shared memory.
//!
//! `N` slots of a database OID (0: free) and a mark. Any number of
//! writers (the launcher, a restore's trigger in any backend, a
//! superuser's decision) and readers; every operation is lock-free. A
//! slot is claimed by a compare-and-swap of its OID, so two writers never
//! share one; two writers holding the same database at once may take a
//! slot each, which every reader and [`HeldMarks::release`] treat as one.
//! A reader that meets a slot between its claim and its mark sees the
//! database held with no mark yet ([`NO_MARK`]): held all the same.

use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};

/// The mark of a slot claimed a moment ago, before its mark is written.
pub const NO_MARK: i64 = i64::MIN;

pub struct HeldMarks<const N: usize> {
    oids: [AtomicU32; N],
    marks: [AtomicI64; N],
}

impl<const N: usize> Default for HeldMarks<N> {
    fn default() -> Self {
        HeldMarks {
            oids: std::array::from_fn(|_| AtomicU32::new(0)),
            marks: std::array::from_fn(|_| AtomicI64::new(NO_MARK)),
        }
    }
}

impl<const N: usize> HeldMarks<N> {
    /// Hold `mark` for database `oid` (raising its mark if it holds one
    /// already). False when every slot is taken.
    pub fn hold(&self, oid: u32, mark: i64) -> bool {
        assert_ne!(oid, 0, "no database has OID 0");
        if let Some(i) = (0..N).find(|&i| self.oids[i].load(Ordering::Acquire) == oid) {
            self.marks[i].fetch_max(mark, Ordering::AcqRel);
            return true;
        }
        for i in 0..N {
            if self.oids[i]
                .compare_exchange(0, oid, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                self.marks[i].fetch_max(mark, Ordering::AcqRel);
                return true;
            }
        }
        false
    }

    /// Whether database `oid` holds a mark.
    pub fn contains(&self, oid: u32) -> bool {
        oid != 0 && self.oids.iter().any(|o| o.load(Ordering::Acquire) == oid)
    }

    /// The largest mark database `oid` holds ([`NO_MARK`] while its slot
    /// is being written), `None` when it holds none.
    pub fn mark_of(&self, oid: u32) -> Option<i64> {
        (0..N)
            .filter(|&i| oid != 0 && self.oids[i].load(Ordering::Acquire) == oid)
            .map(|i| self.marks[i].load(Ordering::Acquire))
            .max()
    }

    /// Database `oid` holds no mark any more.
    pub fn release(&self, oid: u32) {
        for i in 0..N {
            if oid != 0 && self.oids[i].load(Ordering::Acquire) == oid {
                self.marks[i].store(NO_MARK, Ordering::Release);
                // Only the slot still holding `oid` is freed.
                let _ = self.oids[i].compare_exchange(oid, 0, Ordering::AcqRel, Ordering::Acquire);
            }
        }
    }

    /// The largest mark held, and a database that holds it.
    pub fn largest(&self) -> Option<(u32, i64)> {
        (0..N)
            .filter_map(|i| match self.oids[i].load(Ordering::Acquire) {
                0 => None,
                oid => Some((oid, self.marks[i].load(Ordering::Acquire))),
            })
            .max_by_key(|&(_, m)| m)
    }

    /// The databases that hold a mark (each once).
    pub fn oids(&self) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .oids
            .iter()
            .map(|o| o.load(Ordering::Acquire))
            .filter(|&o| o != 0)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Whether no database holds a mark.
    pub fn is_empty(&self) -> bool {
        self.oids.iter().all(|o| o.load(Ordering::Acquire) == 0)
    }

    /// Every database holds none (the held marks were applied).
    pub fn clear(&self) {
        for i in 0..N {
            let oid = self.oids[i].load(Ordering::Acquire);
            if oid != 0 {
                self.release(oid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn holds_raises_and_releases_per_database() {
        let h = HeldMarks::<4>::default();
        assert!(h.is_empty() && h.largest().is_none());
        assert!(h.hold(10, 500));
        assert!(h.hold(11, 700));
        assert!(h.hold(10, 400), "a lower mark keeps the higher one");
        assert_eq!(h.mark_of(10), Some(500));
        assert!(h.hold(10, 900));
        assert_eq!(h.mark_of(10), Some(900));
        assert_eq!(h.largest(), Some((10, 900)));
        assert!(h.contains(11) && !h.contains(12) && !h.contains(0));
        assert_eq!(h.oids(), vec![10, 11]);
        h.release(10);
        assert!(!h.contains(10) && h.mark_of(10).is_none());
        assert_eq!(h.largest(), Some((11, 700)));
        h.clear();
        assert!(h.is_empty());
    }

    #[test]
    fn full_says_so_and_a_held_database_still_raises() {
        let h = HeldMarks::<2>::default();
        assert!(h.hold(1, 1) && h.hold(2, 2));
        assert!(!h.hold(3, 3), "no free slot");
        assert!(h.hold(2, 5), "a database already held needs no new slot");
        assert_eq!(h.largest(), Some((2, 5)));
    }

    /// Writers on many threads hold and release against a model: each
    /// thread owns its databases, so the final state is known exactly.
    #[test]
    fn concurrent_writers_agree_with_a_model() {
        let h = HeldMarks::<64>::default();
        let finals: Vec<HashMap<u32, i64>> = std::thread::scope(|s| {
            let hs = &h;
            (0..8u32)
                .map(|t| {
                    s.spawn(move || {
                        let mut model = HashMap::new();
                        let mut x = 0x2545_F491_4F6C_DD1Du64 ^ t as u64;
                        for _ in 0..20_000 {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            let oid = 1 + t * 8 + (x % 8) as u32;
                            let mark = (x >> 20) as i64 % 1_000_000;
                            if x.is_multiple_of(5) {
                                hs.release(oid);
                                model.remove(&oid);
                            } else {
                                assert!(hs.hold(oid, mark));
                                let m = model.entry(oid).or_insert(mark);
                                *m = (*m).max(mark);
                            }
                            assert_eq!(hs.mark_of(oid), model.get(&oid).copied());
                        }
                        model
                    })
                })
                .collect::<Vec<_>>()
                .into_iter()
                .map(|j| j.join().unwrap())
                .collect()
        });
        let all: HashMap<u32, i64> = finals.into_iter().flatten().collect();
        for oid in 1..=64 {
            assert_eq!(h.mark_of(oid), all.get(&oid).copied(), "database {oid}");
        }
        assert_eq!(h.largest().map(|(_, m)| m), all.values().copied().max());
    }
}
