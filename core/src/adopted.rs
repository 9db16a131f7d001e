//! Which sequences of each database are adopted, as the whole server
//! knows them (issue 63): one table in shared memory, so that a statement
//! learns whether a sequence is adopted without reading a catalog or a
//! table that another role can queue a lock on.
//!
//! Each database has a *word*: a generation (bumped by every change) and
//! whether its set is *loaded* (the table holds every adopted sequence of
//! it). A database's set is loaded once after a start, by the first
//! backend that needs it ([`AdoptedTable::publish`], which gives up if a
//! change came in meanwhile), and kept current after that by the
//! transactions that change the list: each applies its own changes at
//! commit ([`AdoptedTable::apply`]), so nobody reads the list again.
//!
//! The writer methods must be serialised by the caller (an LWLock in the
//! extension, held for microseconds), and so must [`AdoptedTable::seqs_of`]
//! (shared). [`AdoptedTable::word`] is lock-free: a backend compares it
//! with the word of the copy it holds before each statement.
//!
//! The protocol (a loader's read against a committer's change, in every
//! order) has a model: `tests/adopted_model.rs`.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A free slot.
const FREE: u64 = 0;
/// A removed entry: lookups walk past it; inserts reuse it.
const GONE: u64 = u64::MAX;
/// A database slot whose database was dropped.
const DB_GONE: u32 = u32::MAX;

/// One change to a database's list, applied at the commit of the
/// transaction that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// A sequence was adopted.
    Add(u32),
    /// A sequence left the list.
    Remove(u32),
    /// The list changed in a way nobody tracked (a TRUNCATE, a dropped
    /// extension): it must be loaded again.
    Forget,
}

/// What a database's word says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Word(u64);

impl Word {
    /// A database the table has no slot for: nothing loaded, generation 0.
    pub const NONE: Word = Word(0);

    /// Whether the table holds the database's whole set.
    pub fn loaded(self) -> bool {
        self.0 & 1 == 1
    }

    fn generation(self) -> u64 {
        self.0 >> 1
    }

    fn next(self, loaded: bool) -> Word {
        Word(((self.generation() + 1) << 1) | loaded as u64)
    }
}

/// The adopted sequences of up to `D` databases, `S` in all.
pub struct AdoptedTable<const D: usize, const S: usize> {
    db_oids: [AtomicU32; D],
    db_words: [AtomicU64; D],
    seqs: [AtomicU64; S],
}

impl<const D: usize, const S: usize> Default for AdoptedTable<D, S> {
    fn default() -> Self {
        AdoptedTable {
            db_oids: std::array::from_fn(|_| AtomicU32::new(0)),
            db_words: std::array::from_fn(|_| AtomicU64::new(0)),
            seqs: std::array::from_fn(|_| AtomicU64::new(FREE)),
        }
    }
}

fn spread(x: u64) -> usize {
    // Fibonacci hashing: consecutive OIDs land far apart.
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20) as usize
}

fn key(db: u32, seq: u32) -> u64 {
    ((db as u64) << 32) | seq as u64
}

impl<const D: usize, const S: usize> AdoptedTable<D, S> {
    /// The slot of database `db`, if it has one. Lock-free.
    fn db_slot(&self, db: u32) -> Option<usize> {
        let h = spread(db as u64);
        for i in 0..D {
            let at = (h + i) % D;
            match self.db_oids[at].load(Ordering::Acquire) {
                0 => return None,
                v if v == db => return Some(at),
                _ => {}
            }
        }
        None
    }

    /// The slot of `db`, made if it has none (writers only), and whether
    /// it was made now. `None` when every slot is taken.
    fn db_slot_or_new(&self, db: u32) -> Option<(usize, bool)> {
        if let Some(at) = self.db_slot(db) {
            return Some((at, false));
        }
        let h = spread(db as u64);
        for i in 0..D {
            let at = (h + i) % D;
            let v = self.db_oids[at].load(Ordering::Acquire);
            if v == 0 || v == DB_GONE {
                // A reused slot keeps the word its last database left
                // (unloaded): a loader that saw no slot reads again.
                self.db_oids[at].store(db, Ordering::Release);
                return Some((at, true));
            }
        }
        None
    }

    /// The word of database `db` (lock-free): compare it with the word of
    /// a copy taken with [`Self::seqs_of`] to know whether the copy is
    /// still current.
    pub fn word(&self, db: u32) -> Word {
        match self.db_slot(db) {
            Some(at) => Word(self.db_words[at].load(Ordering::Acquire)),
            None => Word::NONE,
        }
    }

    /// The word of `db` and, where it is loaded, its adopted sequences.
    /// Under the writers' lock, shared.
    pub fn seqs_of(&self, db: u32) -> (Word, Option<Vec<u32>>) {
        let w = self.word(db);
        if !w.loaded() {
            return (w, None);
        }
        let list = self
            .seqs
            .iter()
            .map(|s| s.load(Ordering::Acquire))
            .filter(|&k| k != FREE && k != GONE && (k >> 32) as u32 == db)
            .map(|k| k as u32)
            .collect();
        (w, Some(list))
    }

    fn find(&self, k: u64) -> Option<usize> {
        let h = spread(k);
        for i in 0..S {
            let at = (h + i) % S;
            match self.seqs[at].load(Ordering::Acquire) {
                FREE => return None,
                v if v == k => return Some(at),
                _ => {}
            }
        }
        None
    }

    /// Insert `k` (writers only); false when the table is full.
    fn insert(&self, k: u64) -> bool {
        if self.find(k).is_some() {
            return true;
        }
        let h = spread(k);
        for i in 0..S {
            let at = (h + i) % S;
            let v = self.seqs[at].load(Ordering::Acquire);
            if v == FREE || v == GONE {
                self.seqs[at].store(k, Ordering::Release);
                return true;
            }
        }
        false
    }

    fn clear(&self, db: u32) {
        for s in &self.seqs {
            let k = s.load(Ordering::Acquire);
            if k != FREE && k != GONE && (k >> 32) as u32 == db {
                s.store(GONE, Ordering::Release);
            }
        }
    }

    /// A loader read `seqs` from the list after it saw word `seen`: make
    /// them the database's set, unless a change came in since (then false:
    /// the loader reads again later). Also false where the table is full
    /// (the database stays unloaded; its backends read the list each on
    /// their own). Writers only.
    pub fn publish(&self, db: u32, seen: Word, seqs: &[u32]) -> bool {
        let Some((at, made)) = self.db_slot_or_new(db) else {
            return false;
        };
        let now = Word(self.db_words[at].load(Ordering::Acquire));
        // A slot made now is no change to this database since `seen`
        // (which was then `Word::NONE`).
        if now != seen && !(made && seen == Word::NONE) {
            return false;
        }
        if now.loaded() {
            return true;
        }
        self.clear(db);
        if !seqs.iter().all(|&s| self.insert(key(db, s))) {
            self.clear(db);
            self.db_words[at].store(now.next(false).0, Ordering::Release);
            return false;
        }
        self.db_words[at].store(now.next(true).0, Ordering::Release);
        true
    }

    /// A transaction that changed `db`'s list committed `changes` (in the
    /// order it made them), having read the database's word as `seen`
    /// just before its commit became visible. Where the set is loaded and
    /// nothing moved the word since `seen`, they are applied to it; where
    /// something did (another commit's apply, a loader's publish), the set
    /// is unloaded, to be read again: applies come after their commits, in
    /// any order, so a change applied late could undo a later one (a
    /// removal after a re-adoption of the same sequence), or re-do one a
    /// loader has read already (an adoption after a loader saw it removed).
    /// Either way the word moves, so a loader that read before the commit
    /// cannot publish what it read. An adoption the table has no room for
    /// unloads the database too. Writers only.
    pub fn apply(&self, db: u32, seen: Word, changes: &[Change]) {
        self.apply_with(db, Some(seen), changes)
    }

    /// [`Self::apply`] without its check of `seen`: the rule the model
    /// shows is needed.
    #[cfg(any(test, feature = "testing"))]
    pub fn apply_ignoring_seen(&self, db: u32, changes: &[Change]) {
        self.apply_with(db, None, changes)
    }

    fn apply_with(&self, db: u32, seen: Option<Word>, changes: &[Change]) {
        let Some((at, _)) = self.db_slot_or_new(db) else {
            return;
        };
        let now = Word(self.db_words[at].load(Ordering::Acquire));
        let mut loaded = now.loaded() && seen.is_none_or(|w| w == now);
        for c in changes {
            if !loaded {
                break;
            }
            match *c {
                Change::Add(s) => loaded = self.insert(key(db, s)),
                Change::Remove(s) => {
                    if let Some(e) = self.find(key(db, s)) {
                        self.seqs[e].store(GONE, Ordering::Release);
                    }
                }
                Change::Forget => loaded = false,
            }
        }
        if !loaded {
            self.clear(db);
        }
        self.db_words[at].store(now.next(loaded).0, Ordering::Release);
    }

    /// Database `db` was dropped: its slot and entries go. Writers only.
    pub fn drop_database(&self, db: u32) {
        if let Some(at) = self.db_slot(db) {
            self.clear(db);
            let w = Word(self.db_words[at].load(Ordering::Acquire)).next(false);
            self.db_words[at].store(w.0, Ordering::Release);
            self.db_oids[at].store(DB_GONE, Ordering::Release);
        }
    }

    /// Whether `seq` is in `db`'s loaded set (a test helper; backends use
    /// their copy).
    pub fn contains(&self, db: u32, seq: u32) -> bool {
        self.word(db).loaded() && self.find(key(db, seq)).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type T = AdoptedTable<8, 16>;

    #[test]
    fn a_database_is_unloaded_until_published() {
        let t = T::default();
        assert_eq!(t.word(5), Word::NONE);
        assert_eq!(t.seqs_of(5).1, None);
        assert!(t.publish(5, Word::NONE, &[10, 11]));
        let (w, s) = t.seqs_of(5);
        assert!(w.loaded());
        let mut s = s.unwrap();
        s.sort();
        assert_eq!(s, vec![10, 11]);
        assert!(!t.contains(6, 10));
    }

    #[test]
    fn a_change_after_the_read_stops_the_publish() {
        let t = T::default();
        let seen = t.word(5);
        t.apply(5, t.word(5), &[Change::Add(12)]);
        assert!(!t.publish(5, seen, &[10]));
        assert!(!t.word(5).loaded());
        let seen = t.word(5);
        assert!(t.publish(5, seen, &[10, 12]));
        assert!(t.contains(5, 12));
    }

    #[test]
    fn changes_apply_to_a_loaded_set() {
        let t = T::default();
        assert!(t.publish(5, Word::NONE, &[10]));
        t.apply(5, t.word(5), &[Change::Add(11)]);
        assert!(t.contains(5, 11) && t.contains(5, 10));
        t.apply(5, t.word(5), &[Change::Remove(10)]);
        assert!(t.word(5).loaded() && t.contains(5, 11) && !t.contains(5, 10));
        let before = t.word(5);
        t.apply(5, t.word(5), &[Change::Add(12)]);
        t.apply(5, before, &[Change::Add(13)]);
        assert!(!t.word(5).loaded() && !t.contains(5, 11));
        assert!(t.publish(5, t.word(5), &[11]));
        t.apply(5, t.word(5), &[Change::Forget]);
        assert!(!t.word(5).loaded() && !t.contains(5, 11));
    }

    #[test]
    fn a_full_table_unloads_rather_than_loses_an_entry() {
        let t = T::default();
        let all: Vec<u32> = (100..116).collect();
        assert!(t.publish(5, Word::NONE, &all));
        t.apply(5, t.word(5), &[Change::Add(200)]);
        assert!(!t.word(5).loaded());
        assert!(!t.publish(6, Word::NONE, &(0..17).collect::<Vec<_>>()));
        assert!(!t.word(6).loaded());
    }

    #[test]
    fn removed_entries_leave_room_and_lookups_walk_past_them() {
        let t = T::default();
        assert!(t.publish(5, Word::NONE, &[]));
        for round in 0..100u32 {
            t.apply(
                5,
                t.word(5),
                &[Change::Add(1000 + round), Change::Add(2000 + round)],
            );
            t.apply(5, t.word(5), &[Change::Remove(1000 + round)]);
            assert!(t.contains(5, 2000 + round), "round {round}");
            t.apply(5, t.word(5), &[Change::Remove(2000 + round)]);
        }
        assert!(t.word(5).loaded());
        assert_eq!(t.seqs_of(5).1, Some(vec![]));
    }

    #[test]
    fn a_dropped_database_frees_its_slot_and_a_new_one_starts_unloaded() {
        let t = T::default();
        assert!(t.publish(5, Word::NONE, &[10]));
        t.drop_database(5);
        assert_eq!(t.word(5), Word::NONE);
        for db in 20..28 {
            assert!(t.publish(db, t.word(db), &[db]));
        }
        assert!(t.contains(27, 27));
    }
}
