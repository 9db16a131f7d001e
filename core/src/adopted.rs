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
/// A database slot whose database was dropped (never a database's key:
/// a key is its OID, at most `u32::MAX`, and 0 is no database).
const DB_GONE: u64 = u64::MAX;

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

const LOADED: u64 = 1;
const UNFIT: u64 = 2;

impl Word {
    /// A database the table has no slot for: nothing loaded, generation 0.
    pub const NONE: Word = Word(0);

    /// Whether the table holds the database's whole set.
    pub fn loaded(self) -> bool {
        self.0 & LOADED != 0
    }

    /// Whether the database's set was found not to fit (over its share of
    /// the table, or the table full): its backends read the list each on
    /// their own, once per change, until a change makes the table try
    /// again.
    pub fn unfit(self) -> bool {
        self.0 & UNFIT != 0
    }

    fn generation(self) -> u64 {
        self.0 >> 2
    }

    fn next(self, flags: u64) -> Word {
        Word(((self.generation() + 1) << 2) | flags)
    }
}

/// What [`AdoptedTable::publish`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Published {
    /// The set is the database's loaded set now.
    Yes,
    /// A change came in since the loader saw its word: read again later.
    Changed,
    /// The set does not fit: the loader keeps what it read, until the
    /// word moves.
    Unfit,
}

/// The adopted sequences of up to `D` databases, `S` in all, at most a
/// quarter of them of one database (so that one database, which any
/// role with CREATE can fill through the switch, cannot take the table
/// from the others: the red-team review of issue 63, F3).
///
/// Each database's entries are also chained (`db_heads`, `next`, `prev`:
/// a slot's index plus one, 0 for none), so that a copy or a clear of one
/// database walks its own entries, not the whole table.
pub struct AdoptedTable<const D: usize, const S: usize> {
    db_keys: [AtomicU64; D],
    db_words: [AtomicU64; D],
    db_counts: [AtomicU32; D],
    db_heads: [AtomicU32; D],
    seqs: [AtomicU64; S],
    next: [AtomicU32; S],
    prev: [AtomicU32; S],
}

impl<const D: usize, const S: usize> Default for AdoptedTable<D, S> {
    fn default() -> Self {
        AdoptedTable {
            db_keys: std::array::from_fn(|_| AtomicU64::new(FREE)),
            db_words: std::array::from_fn(|_| AtomicU64::new(0)),
            db_counts: std::array::from_fn(|_| AtomicU32::new(0)),
            db_heads: std::array::from_fn(|_| AtomicU32::new(0)),
            seqs: std::array::from_fn(|_| AtomicU64::new(FREE)),
            next: std::array::from_fn(|_| AtomicU32::new(0)),
            prev: std::array::from_fn(|_| AtomicU32::new(0)),
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

/// The slot of `slots` holding `k`, by linear probing from `k`'s home;
/// `None` once a free slot (or the end of the search) says it is not
/// there. Removed entries are walked past. Lock-free.
fn probe(slots: &[AtomicU64], k: u64) -> Option<usize> {
    let h = spread(k);
    for i in 0..slots.len() {
        let at = (h + i) % slots.len();
        match slots[at].load(Ordering::Acquire) {
            FREE => return None,
            v if v == k => return Some(at),
            _ => {}
        }
    }
    None
}

impl<const D: usize, const S: usize> AdoptedTable<D, S> {
    /// The most entries one database may hold.
    pub const PER_DATABASE: usize = S / 4;

    /// The slot of database `db`, if it has one. Lock-free.
    fn db_slot(&self, db: u32) -> Option<usize> {
        if db == 0 {
            return None;
        }
        probe(&self.db_keys, db as u64)
    }

    /// The slot of `db`, made if it has none (writers only), and whether
    /// it was made now. `None` when every slot is taken.
    fn db_slot_or_new(&self, db: u32) -> Option<(usize, bool)> {
        if db == 0 {
            return None;
        }
        if let Some(at) = self.db_slot(db) {
            return Some((at, false));
        }
        let h = spread(db as u64);
        for i in 0..D {
            let at = (h + i) % D;
            let v = self.db_keys[at].load(Ordering::Acquire);
            if v == FREE || v == DB_GONE {
                // A reused slot keeps the word its last database left
                // (unloaded, moved by its drop): a loader that saw no slot
                // reads again.
                self.db_keys[at].store(db as u64, Ordering::Release);
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
        // The database's own chain, not the whole table (a scan of it was
        // 3M instructions, about 1 ms, in each new backend's first
        // statement in a database with the extension).
        let Some(at) = self.db_slot(db) else {
            return (w, Some(Vec::new()));
        };
        let mut list = Vec::with_capacity(self.db_counts[at].load(Ordering::Acquire) as usize);
        let mut e = self.db_heads[at].load(Ordering::Acquire);
        while e != 0 {
            let slot = e as usize - 1;
            list.push(self.seqs[slot].load(Ordering::Acquire) as u32);
            e = self.next[slot].load(Ordering::Acquire);
        }
        (w, Some(list))
    }

    fn find(&self, k: u64) -> Option<usize> {
        probe(&self.seqs, k)
    }

    /// Insert `k` of the database in slot `at` (writers only); false when
    /// the table is full or the database holds its share.
    fn insert(&self, at: usize, k: u64) -> bool {
        if self.find(k).is_some() {
            return true;
        }
        if self.db_counts[at].load(Ordering::Acquire) as usize >= Self::PER_DATABASE {
            return false;
        }
        let h = spread(k);
        for i in 0..S {
            let slot = (h + i) % S;
            let v = self.seqs[slot].load(Ordering::Acquire);
            if v == FREE || v == GONE {
                self.seqs[slot].store(k, Ordering::Release);
                let head = self.db_heads[at].load(Ordering::Acquire);
                self.next[slot].store(head, Ordering::Release);
                self.prev[slot].store(0, Ordering::Release);
                if head != 0 {
                    self.prev[head as usize - 1].store(slot as u32 + 1, Ordering::Release);
                }
                self.db_heads[at].store(slot as u32 + 1, Ordering::Release);
                self.db_counts[at].fetch_add(1, Ordering::AcqRel);
                return true;
            }
        }
        false
    }

    fn remove(&self, at: usize, k: u64) {
        if let Some(e) = self.find(k) {
            let (n, p) = (
                self.next[e].load(Ordering::Acquire),
                self.prev[e].load(Ordering::Acquire),
            );
            if p != 0 {
                self.next[p as usize - 1].store(n, Ordering::Release);
            } else {
                self.db_heads[at].store(n, Ordering::Release);
            }
            if n != 0 {
                self.prev[n as usize - 1].store(p, Ordering::Release);
            }
            self.next[e].store(0, Ordering::Release);
            self.prev[e].store(0, Ordering::Release);
            self.seqs[e].store(GONE, Ordering::Release);
            self.db_counts[at].fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn clear(&self, at: usize) {
        let mut e = self.db_heads[at].load(Ordering::Acquire);
        while e != 0 {
            let slot = e as usize - 1;
            e = self.next[slot].load(Ordering::Acquire);
            self.next[slot].store(0, Ordering::Release);
            self.prev[slot].store(0, Ordering::Release);
            self.seqs[slot].store(GONE, Ordering::Release);
        }
        self.db_heads[at].store(0, Ordering::Release);
        self.db_counts[at].store(0, Ordering::Release);
    }

    /// A loader read `seqs` from the list after it saw word `seen`: make
    /// them the database's set, unless a change came in since
    /// ([`Published::Changed`]: the loader reads again later). A set over
    /// the database's share, or one the table has no room for, is
    /// [`Published::Unfit`]: marked so once, the word otherwise left
    /// alone, so that the database's backends read the list each on
    /// their own once per change rather than once per statement (F3).
    /// Writers only.
    pub fn publish(&self, db: u32, seen: Word, seqs: &[u32]) -> Published {
        let Some((at, made)) = self.db_slot_or_new(db) else {
            return Published::Unfit;
        };
        let now = Word(self.db_words[at].load(Ordering::Acquire));
        // A slot made now is no change to this database since `seen`
        // (which was then `Word::NONE`), whatever its last database left.
        if now != seen && !(made && seen == Word::NONE) {
            return Published::Changed;
        }
        if !made && now.unfit() {
            return Published::Unfit;
        }
        if !made && now.loaded() {
            return Published::Yes;
        }
        self.clear(at);
        if seqs.len() > Self::PER_DATABASE || !seqs.iter().all(|&s| self.insert(at, key(db, s))) {
            self.clear(at);
            self.db_words[at].store(now.next(UNFIT).0, Ordering::Release);
            return Published::Unfit;
        }
        self.db_words[at].store(now.next(LOADED).0, Ordering::Release);
        Published::Yes
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
    /// Either way the word moves (and an unfit database is tried again), so
    /// a loader that read before the commit cannot publish what it read.
    /// An adoption the table has no room for unloads the database too.
    /// Writers only.
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
        let Some((at, made)) = self.db_slot_or_new(db) else {
            return;
        };
        let now = Word(self.db_words[at].load(Ordering::Acquire));
        let mut loaded = !made && now.loaded() && seen.is_none_or(|w| w == now);
        for c in changes {
            if !loaded {
                break;
            }
            match *c {
                Change::Add(s) => loaded = self.insert(at, key(db, s)),
                Change::Remove(s) => self.remove(at, key(db, s)),
                Change::Forget => loaded = false,
            }
        }
        if !loaded {
            self.clear(at);
        }
        let flags = if loaded { LOADED } else { 0 };
        self.db_words[at].store(now.next(flags).0, Ordering::Release);
    }

    /// Database `db` is gone, or has just been made (its OID may be an
    /// earlier database's, `CREATE DATABASE … OID`): its slot and entries
    /// go. Writers only.
    pub fn drop_database(&self, db: u32) {
        if let Some(at) = self.db_slot(db) {
            self.clear(at);
            let w = Word(self.db_words[at].load(Ordering::Acquire)).next(0);
            self.db_words[at].store(w.0, Ordering::Release);
            self.db_keys[at].store(DB_GONE, Ordering::Release);
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

    /// The extension makes the table in shared memory zero-filled, not
    /// from `Default` (4 MB on a stack): all zeros must be an empty table.
    #[test]
    fn an_all_zero_table_is_an_empty_one() {
        // SAFETY: atomics of zero are valid values; the table is nothing
        // but atomics.
        let t: Box<T> = unsafe { Box::new(std::mem::zeroed()) };
        assert_eq!(t.word(5), Word::NONE);
        assert_eq!(t.publish(5, Word::NONE, &[10]), Published::Yes);
        assert!(t.contains(5, 10) && !t.contains(6, 10));
    }

    /// The copy's scan stops at the database's count: it still finds every
    /// sequence of the database, beside other databases' and removed ones.
    #[test]
    fn a_copy_finds_all_of_its_database_and_no_more() {
        let t = T::default();
        assert_eq!(t.publish(5, Word::NONE, &[]), Published::Yes);
        assert_eq!(t.seqs_of(5).1, Some(vec![]));
        assert_eq!(t.publish(6, Word::NONE, &[1, 2, 3]), Published::Yes);
        t.apply_ignoring_seen(
            5,
            &[
                Change::Add(7),
                Change::Add(8),
                Change::Add(9),
                Change::Remove(8),
            ],
        );
        let mut s = t.seqs_of(5).1.unwrap();
        s.sort();
        assert_eq!(s, vec![7, 9]);
        let mut s = t.seqs_of(6).1.unwrap();
        s.sort();
        assert_eq!(s, vec![1, 2, 3]);
    }

    /// The chains agree with the table, whatever the order of publishes,
    /// applies and drops: each database's copy is exactly its entries.
    #[test]
    fn each_database_chain_is_exactly_its_entries() {
        type Big = AdoptedTable<8, 64>;
        let t = Big::default();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for _ in 0..20_000 {
            let db = 1 + rnd(5) as u32;
            match rnd(10) {
                0 => t.drop_database(db),
                1..=2 => {
                    let seqs: Vec<u32> = (0..rnd(6)).map(|_| 100 + rnd(30) as u32).collect();
                    let mut seqs = seqs;
                    seqs.sort();
                    seqs.dedup();
                    let _ = t.publish(db, t.word(db), &seqs);
                }
                _ => {
                    let s = 100 + rnd(30) as u32;
                    let c = if rnd(2) == 0 {
                        Change::Add(s)
                    } else {
                        Change::Remove(s)
                    };
                    t.apply(db, t.word(db), &[c]);
                }
            }
            for d in 1..=5u32 {
                let mut scan: Vec<u32> = t
                    .seqs
                    .iter()
                    .map(|s| s.load(Ordering::Acquire))
                    .filter(|&k| k != FREE && k != GONE && (k >> 32) as u32 == d)
                    .map(|k| k as u32)
                    .collect();
                scan.sort();
                match t.seqs_of(d).1 {
                    Some(mut got) => {
                        got.sort();
                        assert_eq!(got, scan, "database {d}");
                    }
                    None => assert!(scan.is_empty(), "database {d}: unloaded, with entries"),
                }
            }
        }
    }

    #[test]
    fn a_database_is_unloaded_until_published() {
        let t = T::default();
        assert_eq!(t.word(5), Word::NONE);
        assert_eq!(t.seqs_of(5).1, None);
        assert_eq!(t.publish(5, Word::NONE, &[10, 11]), Published::Yes);
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
        assert_eq!(t.publish(5, seen, &[10]), Published::Changed);
        assert!(!t.word(5).loaded());
        let seen = t.word(5);
        assert_eq!(t.publish(5, seen, &[10, 12]), Published::Yes);
        assert!(t.contains(5, 12));
    }

    #[test]
    fn changes_apply_to_a_loaded_set() {
        let t = T::default();
        assert_eq!(t.publish(5, Word::NONE, &[10]), Published::Yes);
        t.apply(5, t.word(5), &[Change::Add(11)]);
        assert!(t.contains(5, 11) && t.contains(5, 10));
        t.apply(5, t.word(5), &[Change::Remove(10)]);
        assert!(t.word(5).loaded() && t.contains(5, 11) && !t.contains(5, 10));
        let before = t.word(5);
        t.apply(5, t.word(5), &[Change::Add(12)]);
        t.apply(5, before, &[Change::Add(13)]);
        assert!(!t.word(5).loaded() && !t.contains(5, 11));
        assert_eq!(t.publish(5, t.word(5), &[11]), Published::Yes);
        t.apply(5, t.word(5), &[Change::Forget]);
        assert!(!t.word(5).loaded() && !t.contains(5, 11));
    }

    #[test]
    fn removed_entries_leave_room_and_lookups_walk_past_them() {
        let t = T::default();
        assert_eq!(t.publish(5, Word::NONE, &[]), Published::Yes);
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

    /// F3 of the red-team review: one database may take a quarter of the
    /// table; past it, or with the table full, it is marked unfit once,
    /// and loaders are told so without the word moving again (each
    /// backend reads the list once per change, not once per statement).
    #[test]
    fn a_database_over_its_share_is_unfit_once_and_leaves_the_rest() {
        let t = T::default(); // 16 entries, 4 per database
        assert_eq!(T::PER_DATABASE, 4);
        let big: Vec<u32> = (100..105).collect();
        assert_eq!(t.publish(5, Word::NONE, &big), Published::Unfit);
        let w = t.word(5);
        assert!(w.unfit() && !w.loaded());
        for _ in 0..3 {
            assert_eq!(t.publish(5, w, &big), Published::Unfit);
            assert_eq!(t.word(5), w, "an unfit database's word moved");
        }
        // The others still fit.
        assert_eq!(t.publish(6, Word::NONE, &[1, 2, 3, 4]), Published::Yes);
        // An adoption past the share unloads; a change lets it try again.
        t.apply(6, t.word(6), &[Change::Add(9)]);
        assert!(!t.word(6).loaded() && !t.word(6).unfit());
        t.apply(5, w, &[Change::Remove(104)]);
        assert!(!t.word(5).unfit());
        assert_eq!(t.publish(5, t.word(5), &big[..4]), Published::Yes);
    }

    #[test]
    fn a_full_table_makes_a_database_unfit() {
        let t = T::default();
        for (i, db) in [5u32, 6, 7, 8].iter().enumerate() {
            let seqs: Vec<u32> = (0..4).map(|j| 100 + 4 * i as u32 + j).collect();
            assert_eq!(t.publish(*db, Word::NONE, &seqs), Published::Yes);
        }
        assert_eq!(t.publish(9, Word::NONE, &[1]), Published::Unfit);
        assert!(t.word(9).unfit());
        t.apply(5, t.word(5), &[Change::Add(999)]);
        assert!(!t.word(5).loaded());
    }

    /// F2 of the red-team review: OID 4294967295 is a database like any
    /// other (it was the dropped-slot marker: its slot then looked free,
    /// and the next database there found a loaded word and no entries).
    #[test]
    fn the_largest_oid_is_a_database_like_any_other() {
        let t = T::default();
        assert_eq!(t.publish(u32::MAX, Word::NONE, &[7]), Published::Yes);
        assert!(t.contains(u32::MAX, 7));
        // Every other database, whatever its home slot, starts unloaded
        // and gets exactly its own set.
        for db in 1..=6u32 {
            assert!(!t.word(db).loaded(), "database {db} found a loaded word");
            assert_eq!(t.publish(db, t.word(db), &[db]), Published::Yes);
            assert_eq!(t.seqs_of(db).1, Some(vec![db]));
        }
        assert!(t.contains(u32::MAX, 7));
    }

    /// F1 of the red-team review: a database made with the OID of a
    /// dropped one (CREATE DATABASE … OID) must not inherit its set, even
    /// when a backend of the old one published after the drop began: the
    /// creation forgets the OID too.
    #[test]
    fn a_new_database_with_an_old_oid_starts_unloaded() {
        let t = T::default();
        assert_eq!(t.publish(5, Word::NONE, &[10]), Published::Yes);
        t.drop_database(5);
        // A late backend of the dropped database publishes again.
        assert_eq!(t.publish(5, t.word(5), &[10]), Published::Yes);
        // CREATE DATABASE … OID = 5: the creation forgets it.
        t.drop_database(5);
        assert!(!t.word(5).loaded() && !t.contains(5, 10));
        assert_eq!(t.publish(5, t.word(5), &[]), Published::Yes);
        assert_eq!(t.seqs_of(5).1, Some(vec![]));
    }

    #[test]
    fn a_dropped_database_frees_its_slot_and_a_new_one_starts_unloaded() {
        let t = T::default();
        assert_eq!(t.publish(5, Word::NONE, &[10]), Published::Yes);
        t.drop_database(5);
        assert_eq!(t.word(5), Word::NONE);
        for db in 20..28 {
            assert_eq!(t.publish(db, t.word(db), &[db]), Published::Yes);
        }
        assert!(t.contains(27, 27));
    }
}
