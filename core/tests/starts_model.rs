//! The model of starts (issue 62): a breadth-first search over every
//! sequence of events a server and its operator can make, to a depth,
//! calling the start decisions of `snowflake_id_core::starts` that the
//! extension calls. Each state is one server: its databases (a mark, the
//! start that stamped it, the IDs stored there), its state file, the last
//! reservation record of its WAL, and, while it runs, its shared memory
//! (lagging and held databases, a carry due).
//!
//! Properties, checked at every ID minted:
//! - **P1** every ID is above every ID the server handed out before,
//!   except an ID that only the mark of a database lagging or holding a
//!   mark right now covers (the documented exceptions of
//!   docs/high-water.md: the others mint on while a database's mark is
//!   unread, or held back until a superuser decides);
//! - **P2** every ID minted in a database is above every ID stored in it
//!   (its own, and those a restore or a template brought);
//! - **P3** the server mints whenever no rule forbids it: from every
//!   state, a start (if stopped) and an acceptance (if a mark is held)
//!   let every database with the extension mint; and a clean restart
//!   with nothing pending reads no mark.
//!
//! [`Rules`] switches each fix of issue 62 off on its own: with all of
//! them off the model is 97fb84c's decision logic, and the search finds
//! each of the five defects the issue names, printing the events in
//! order (`cargo test -p snowflake_id_core --release --test starts_model
//! -- --nocapture`). The names are those `tests/integration/model_replay.sh`
//! replays on a real cluster.
//!
//! Units are abstract milliseconds: the reservation window is 1, a mark
//! goes 1 beyond the generator, a mark more than 4 ahead of the clock is
//! far; "small" clock steps are 3, "far" ones 6. Only the order of these
//! matters, and it is the extension's (window 2 s < mark lead 5 s < far
//! limit 10 min).

use snowflake_id_core::starts::{
    clean_stop_current, earlier_mark, judge_mark, must_log, pending, read_after_replay,
    read_at_start, refuse_binary_upgrade, refuse_drop, FileFacts, FileFound, Pending, Progress,
    Read, Shutdown, StartFacts, Verdict,
};
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// A fast hasher for the visited set (FxHash's mixing).
#[derive(Default)]
struct Fx(u64);

impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type Visited = HashMap<State, Option<(State, Event)>, BuildHasherDefault<Fx>>;

const WINDOW: i8 = 1;
const AHEAD: i8 = 1;
const FAR: i8 = 4;
const SMALL: i8 = 3;
const BIG: i8 = 6;
const MAX_T: i8 = 24;
const NONE: i8 = i8::MIN;
/// Databases: a, b, and c (made by a template or a restore).
const DBS: usize = 3;
const NAMES: [&str; DBS] = ["a", "b", "c"];

/// Which fixes of issue 62 are on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rules {
    /// 1: a dropped database's IDs are carried into another's mark; a
    /// lagging database cannot be dropped; `pg_upgrade` refuses while a
    /// carry is pending.
    carry: bool,
    /// 2: a lagging database is pending in every file and record.
    persist_lagging: bool,
    /// 3: a held mark is pending in every file and record, a clean
    /// stop is not current while one is, and a database copied from
    /// another lags until read.
    persist_held: bool,
    /// 4: a start's stamp is random, not the clock.
    unique_stamp: bool,
    /// 5: a mark's page is written out with each raise.
    flush_marks: bool,
}

const FIXED: Rules = Rules {
    carry: true,
    persist_lagging: true,
    persist_held: true,
    unique_stamp: true,
    flush_marks: true,
};
const OLD: Rules = Rules {
    carry: false,
    persist_lagging: false,
    persist_held: false,
    unique_stamp: false,
    flush_marks: false,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Db {
    exists: bool,
    ext: bool,
    /// The mark (`NONE`: no row) and the stamp of the start that wrote it.
    mark: i8,
    stamp: i8,
    /// The mark as the page on disk has it (what `pg_resetwal` leaves).
    disk: i8,
    /// The largest ID stored here.
    max_id: i8,
    /// IDs a restore of a held mark brought (an old server's), and the
    /// mark and stamp of the rows that were there before it (a restore
    /// adds a row: a discard lowers only the rows far ahead).
    restored: i8,
    kept: (i8, i8),
}

const NO_DB: Db = Db {
    exists: false,
    ext: false,
    mark: NONE,
    stamp: 0,
    disk: NONE,
    max_id: NONE,
    restored: NONE,
    kept: (NONE, 0),
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct File {
    res: i8,
    current: bool,
    pending: Pending,
}

/// Shared memory of a running server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Run {
    stamp: i8,
    /// The generator's last ID (`NONE`: none yet, it starts from the
    /// clock) and its published reservation.
    last: i8,
    res: i8,
    far_base: i8,
    lagging: u8,
    held: u8,
    /// Databases whose backends read their marks already (the gate).
    gated: u8,
    carry_wanted: i8,
    carried: i8,
    /// What the last file and record written said was pending.
    logged: Pending,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct State {
    clock: i8,
    dbs: [Db; DBS],
    file: Option<File>,
    /// The last reservation record since the last checkpoint, and the
    /// last one ever (what a synchronous standby has replayed).
    wal: Option<(i8, Pending)>,
    wal_ever: Option<(i8, Pending)>,
    clean: bool,
    run: Option<Run>,
    /// The largest ID handed out, per database where it was minted
    /// (dropped databases keep theirs here).
    issued: [i8; DBS],
    dropped: i8,
    /// The next stamp of a unique-stamp start (kept small: stamps are
    /// renumbered at every start, see `start`).
    starts: i8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Event {
    Mint(usize),
    Stop,
    Crash,
    Start,
    StartLagging(usize),
    LoseStateFile,
    Upgrade,
    Resetwal,
    DropDatabase(usize),
    DropExtension(usize),
    Carry,
    ReadLagging,
    Hold(usize),
    Accept,
    Discard(usize),
    Template(usize, usize),
    DumpRestore(usize, usize),
    Failover,
    ClockBack(bool),
    ClockForward(bool),
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let size = |big: bool| if big { "far" } else { "small" };
        match *self {
            Event::Mint(d) => write!(f, "mint {}", NAMES[d]),
            Event::Stop => write!(f, "stop"),
            Event::Crash => write!(f, "crash"),
            Event::Start => write!(f, "start"),
            Event::StartLagging(d) => write!(f, "start_lagging {}", NAMES[d]),
            Event::LoseStateFile => write!(f, "lose_state_file"),
            Event::Upgrade => write!(f, "upgrade"),
            Event::Resetwal => write!(f, "resetwal"),
            Event::DropDatabase(d) => write!(f, "drop_database {}", NAMES[d]),
            Event::DropExtension(d) => write!(f, "drop_extension {}", NAMES[d]),
            Event::Carry => write!(f, "carry"),
            Event::ReadLagging => write!(f, "read_lagging"),
            Event::Hold(d) => write!(f, "hold {}", NAMES[d]),
            Event::Accept => write!(f, "accept"),
            Event::Discard(d) => write!(f, "discard {}", NAMES[d]),
            Event::Template(s, d) => write!(f, "template {} {}", NAMES[s], NAMES[d]),
            Event::DumpRestore(s, d) => write!(f, "dump_restore {} {}", NAMES[s], NAMES[d]),
            Event::Failover => write!(f, "failover"),
            Event::ClockBack(b) => write!(f, "clock_back {}", size(b)),
            Event::ClockForward(b) => write!(f, "clock_forward {}", size(b)),
        }
    }
}

/// What an event did.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Next(State),
    /// Refused by a rule (55000 and the like): nothing changed.
    Refused,
    /// Not possible here (the server is not running, and so on).
    Impossible,
    Violation(String),
}

fn bit(d: usize) -> u8 {
    1 << d
}

impl State {
    /// A server that minted: a's IDs went furthest (`a_ahead`) or b's
    /// did; stopped cleanly or running.
    fn warm(a_ahead: bool, running: bool) -> State {
        let (ia, ib) = if a_ahead { (8, 3) } else { (3, 8) };
        let db = |id: i8| Db {
            exists: true,
            ext: true,
            mark: id + AHEAD,
            stamp: 0,
            disk: id + AHEAD,
            max_id: id,
            restored: NONE,
            kept: (NONE, 0),
        };
        let mut s = State {
            clock: 8,
            dbs: [db(ia), db(ib), NO_DB],
            file: Some(File {
                res: 8,
                current: true,
                pending: Pending::NONE,
            }),
            wal: None,
            wal_ever: Some((8 + WINDOW, Pending::NONE)),
            clean: true,
            run: None,
            issued: [ia, ib, NONE],
            dropped: NONE,
            starts: 1,
        };
        if running {
            s.run = Some(Run {
                stamp: 8,
                last: 8,
                res: 8,
                far_base: 8,
                lagging: 0,
                held: 0,
                gated: 0b11,
                carry_wanted: NONE,
                carried: NONE,
                logged: Pending::NONE,
            });
        }
        s
    }

    fn cold() -> State {
        let db = Db {
            exists: true,
            ext: true,
            ..NO_DB
        };
        State {
            clock: 4,
            dbs: [db, db, NO_DB],
            file: None,
            wal: None,
            wal_ever: None,
            clean: true,
            run: None,
            issued: [NONE; DBS],
            dropped: NONE,
            starts: 1,
        }
    }
}

fn progress(run: &Run, r: Rules) -> Progress {
    Progress {
        read_done: true,
        lagging: r.persist_lagging && run.lagging != 0,
        held: r.persist_held && run.held != 0,
        carry_wanted: if r.carry { run.carry_wanted } else { NONE } as i64,
        carried: run.carried as i64,
    }
}

/// The generator's frontier: its last ID or the clock.
fn frontier(s: &State, run: &Run) -> i8 {
    run.last.max(s.clock)
}

fn far_limit(s: &State, run: &Run) -> i8 {
    s.clock.max(run.far_base).saturating_add(FAR)
}

/// A mark this database holds from an earlier start, as its backends or
/// the read find it.
fn earlier(db: &Db, run: &Run) -> Option<i8> {
    (db.mark != NONE && earlier_mark(db.stamp as i64, run.stamp as i64)).then_some(db.mark)
}

/// Apply a mark found in database `d` ([`judge_mark`]).
fn apply(s: &State, run: &mut Run, d: usize, found: i8, unread: bool) {
    match judge_mark(
        found as i64,
        run.res as i64,
        far_limit(s, run) as i64,
        unread,
    ) {
        Verdict::Hold => run.held |= bit(d),
        Verdict::Raise => run.last = run.last.max(found),
        Verdict::Nothing => {}
    }
}

/// Write the state file and a reservation record up to `res` with the
/// pending state of now.
fn log_reservation(s: &mut State, run: &mut Run, r: Rules, res: i8) {
    let p = pending(&progress(run, r));
    s.file = Some(File {
        res,
        current: false,
        pending: p,
    });
    s.wal = Some((res, p));
    s.wal_ever = Some((res, p));
    run.logged = p;
    run.res = res;
}

/// A pending state that grew is written down at once ([`must_log`]), and
/// so is a generator raised above its reservation by a mark.
fn log_if_grown(s: &mut State, run: &mut Run, r: Rules) {
    let p = pending(&progress(run, r));
    if must_log(p, run.logged) || (r.persist_held && run.last > run.res) {
        let res = run.res.max(run.last);
        log_reservation(s, run, r, res);
    }
}

/// Write a mark for database `d`: in place, WAL-logged; the page itself
/// reaches the disk at the next checkpoint, or at once where marks are
/// flushed.
fn write_mark(s: &mut State, run: &Run, r: Rules, d: usize, mark: i8) {
    let db = &mut s.dbs[d];
    // `row::Table::raise`: a mark at or above the target stays as it is.
    if db.mark >= mark {
        return;
    }
    db.mark = mark;
    db.stamp = run.stamp;
    if r.flush_marks {
        db.disk = db.mark;
    }
}

include!("starts_model/step.rs");

/// The events that can follow any state.
fn alphabet() -> Vec<Event> {
    let mut v = vec![];
    for d in 0..DBS {
        v.push(Event::Mint(d));
    }
    v.extend([
        Event::Stop,
        Event::Crash,
        Event::Start,
        Event::LoseStateFile,
        Event::Upgrade,
        Event::Resetwal,
        Event::Carry,
        Event::ReadLagging,
        Event::Accept,
        Event::Failover,
        Event::ClockBack(false),
        Event::ClockBack(true),
        Event::ClockForward(false),
        Event::ClockForward(true),
    ]);
    for d in 0..2 {
        v.push(Event::StartLagging(d));
        v.push(Event::DropDatabase(d));
        v.push(Event::DropExtension(d));
        v.push(Event::Hold(d));
        v.push(Event::Discard(d));
        v.push(Event::Template(d, 2));
        v.push(Event::DumpRestore(d, 2));
    }
    v
}

/// P3: from `s`, a start (if stopped) and an acceptance (if a mark is
/// held) let every database with the extension mint.
#[allow(clippy::needless_range_loop)]
fn stuck(s: &State, r: Rules) -> Option<String> {
    let mut t = *s;
    if t.run.is_none() {
        match step(&t, Event::Start, r) {
            Outcome::Next(n) => t = n,
            other => return Some(format!("no start: {other:?}")),
        }
    }
    for d in 0..DBS {
        if !t.dbs[d].exists || !t.dbs[d].ext {
            continue;
        }
        // The gate reads the marks first: then accept what is held.
        let mut u = t;
        for _ in 0..2 {
            match step(&u, Event::Mint(d), r) {
                Outcome::Next(n)
                    if n.issued[d] != u.issued[d] || n.dbs[d].max_id != u.dbs[d].max_id =>
                {
                    break
                }
                Outcome::Next(n) => {
                    u = match step(&n, Event::Accept, r) {
                        Outcome::Next(m) => m,
                        _ => n,
                    }
                }
                Outcome::Refused => {
                    u = match step(&u, Event::Accept, r) {
                        Outcome::Next(m) => m,
                        other => {
                            return Some(format!("{} refused, no acceptance: {other:?}", NAMES[d]))
                        }
                    }
                }
                // Past the model's time: not a refusal.
                Outcome::Impossible => break,
                Outcome::Violation(_) => break,
            }
        }
    }
    None
}

struct Search {
    states: usize,
    depth: usize,
    /// The first violation: its events in order, and what broke.
    found: Option<(Vec<Event>, String)>,
}

/// Breadth-first search from `starts` to `depth` events: every state once.
fn search(starts: &[State], r: Rules, depth: usize) -> Search {
    let events = alphabet();
    let mut parent = Visited::default();
    let mut queue = VecDeque::new();
    for s in starts {
        parent.insert(*s, None);
        queue.push_back((*s, 0usize));
    }
    let trace = |parent: &Visited, mut s: State| {
        let mut out = vec![];
        while let Some(Some((p, e))) = parent.get(&s) {
            out.push(*e);
            s = *p;
        }
        out.reverse();
        out
    };
    let mut reached = 0;
    while let Some((s, d)) = queue.pop_front() {
        reached = reached.max(d);
        if let Some(why) = stuck(&s, r) {
            return Search {
                states: parent.len(),
                depth: d,
                found: Some((trace(&parent, s), format!("P3: {why}"))),
            };
        }
        if d == depth {
            continue;
        }
        for &e in &events {
            match step(&s, e, r) {
                Outcome::Next(n) => {
                    if let std::collections::hash_map::Entry::Vacant(v) = parent.entry(n) {
                        v.insert(Some((s, e)));
                        queue.push_back((n, d + 1));
                    }
                }
                Outcome::Violation(why) => {
                    let mut t = trace(&parent, s);
                    t.push(e);
                    return Search {
                        states: parent.len(),
                        depth: d + 1,
                        found: Some((t, why)),
                    };
                }
                Outcome::Refused | Outcome::Impossible => {}
            }
        }
    }
    Search {
        states: parent.len(),
        depth: reached,
        found: None,
    }
}

fn initial() -> Vec<State> {
    vec![
        State::cold(),
        State::warm(true, true),
        State::warm(false, true),
        State::warm(true, false),
    ]
}

fn show(name: &str, t: &[Event], why: &str) -> String {
    let lines: Vec<String> = t.iter().map(|e| format!("  {e}")).collect();
    format!("{name}: {why}\n{}", lines.join("\n"))
}

/// Run `events` from `s`: the first violation, if any.
fn replay(mut s: State, events: &[Event], r: Rules) -> Option<String> {
    for (i, &e) in events.iter().enumerate() {
        match step(&s, e, r) {
            Outcome::Next(n) => s = n,
            Outcome::Refused => {}
            Outcome::Impossible => panic!("step {i} ({e}) is impossible"),
            Outcome::Violation(why) => return Some(format!("step {} ({e}): {why}", i + 1)),
        }
    }
    None
}

/// The five sequences of issue 62, from a server that minted (a ahead),
/// as named traces: the same events `tests/integration/traces/` replays.
fn defects() -> Vec<(&'static str, Rules, Vec<Event>)> {
    use Event::*;
    let only = |f: fn(&mut Rules)| {
        let mut r = FIXED;
        f(&mut r);
        r
    };
    vec![
        (
            "1 a dropped database's mark",
            only(|r| r.carry = false),
            vec![
                DropDatabase(0),
                Stop,
                Upgrade,
                ClockBack(false),
                Start,
                Mint(1),
            ],
        ),
        (
            "2 a lagging database, then a crash",
            only(|r| r.persist_lagging = false),
            vec![
                Stop,
                LoseStateFile,
                ClockBack(false),
                StartLagging(0),
                Mint(1),
                Crash,
                Start,
                Mint(0),
            ],
        ),
        (
            "3 a held mark, then a clean restart",
            only(|r| r.persist_held = false),
            vec![
                Stop,
                LoseStateFile,
                ClockBack(true),
                Start,
                Stop,
                ClockForward(true),
                Start,
                Mint(0),
            ],
        ),
        (
            "4 two starts with the same stamp",
            only(|r| r.unique_stamp = false),
            vec![Mint(0), Stop, LoseStateFile, Start, Mint(0)],
        ),
        (
            "5 pg_resetwal after a crash, the state file lost",
            only(|r| r.flush_marks = false),
            vec![
                Mint(0),
                Mint(0),
                Crash,
                LoseStateFile,
                Resetwal,
                Start,
                Mint(0),
            ],
        ),
    ]
}

#[test]
fn the_five_sequences_of_issue_62_break_97fb84c_and_hold_now() {
    for (name, rule, events) in defects() {
        let s = State::warm(true, true);
        let old = replay(s, &events, OLD);
        assert!(old.is_some(), "{name}: 97fb84c's rules keep every promise");
        let one = replay(s, &events, rule);
        assert!(one.is_some(), "{name}: not this defect's sequence");
        assert_eq!(replay(s, &events, FIXED), None, "{name}");
        println!("{name} on 97fb84c: {}", old.unwrap());
    }
}

/// The search finds each defect by itself: every fix on but that one's.
#[test]
fn the_search_finds_each_defect_with_its_fix_off() {
    for (name, rule, _) in defects() {
        let s = search(&initial(), rule, 8);
        let Some((t, why)) = s.found else {
            panic!("{name}: no counterexample in {} states", s.states);
        };
        println!("{}\n", show(name, &t, &why));
    }
}

#[test]
fn the_search_finds_97fb84c_breaking_a_promise() {
    let s = search(&initial(), OLD, 8);
    let (t, why) = s.found.expect("97fb84c keeps every promise to depth 8");
    println!("{}", show("97fb84c", &t, &why));
}

/// Every sequence of events to the depth that fits the unit layer's
/// budget (about 2 minutes on two cores, `--release`): no promise breaks.
#[test]
fn every_sequence_of_starts_keeps_every_promise() {
    let depth = std::env::var("STARTS_MODEL_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(7);
    let s = search(&initial(), FIXED, depth);
    if let Some((t, why)) = s.found {
        panic!("{}", show("counterexample", &t, &why));
    }
    println!(
        "starts model: {} states, every sequence of up to {} events",
        s.states, s.depth
    );
    assert_eq!(s.depth, depth, "the search ended before its depth");
}

/// A clean restart with nothing pending reads no mark (no start pays for
/// the fixes it does not need).
#[test]
fn a_clean_restart_with_nothing_pending_reads_no_mark() {
    let s = State::warm(true, false);
    let facts = StartFacts {
        file: facts(&s),
        shutdown: Shutdown::Clean,
        standby: false,
    };
    assert_eq!(read_at_start(&facts), Read::No);
}

/// A random walk of `len` events from a new server that started (the
/// replay's `init`), each event one the model allows there. A mint is
/// drawn only while no database lags or holds a mark: the replay checks
/// P1 without the documented exception those make (it cannot see which
/// marks the server left unread), so the walk reads or decides first.
/// The walk ends at its last mint. Seeded (xorshift): the same seed
/// gives the same walk.
fn sample(seed: u64, len: usize) -> Vec<Event> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    let Outcome::Next(mut s) = step(&State::cold(), Event::Start, FIXED) else {
        unreachable!("a new server starts");
    };
    let events = alphabet();
    let mut out = vec![];
    while out.len() < len {
        let quiet = s.run.is_some_and(|r| r.lagging == 0 && r.held == 0);
        let mut choices: Vec<(Event, State)> = vec![];
        for &e in &events {
            if matches!(e, Event::Mint(_)) && !quiet {
                continue;
            }
            if let Outcome::Next(n) = step(&s, e, FIXED) {
                choices.push((e, n));
            }
        }
        if choices.is_empty() {
            break;
        }
        // Mints a third of the time: a trace checks its properties there.
        let mints: Vec<usize> = (0..choices.len())
            .filter(|&i| matches!(choices[i].0, Event::Mint(_)))
            .collect();
        let i = if !mints.is_empty() && next(3) == 0 {
            mints[next(mints.len())]
        } else {
            next(choices.len())
        };
        let (e, n) = choices[i];
        out.push(e);
        s = n;
    }
    // What follows the last mint checks nothing.
    let last = out.iter().rposition(|e| matches!(e, Event::Mint(_)));
    out.truncate(last.map_or(0, |i| i + 1));
    out
}

#[test]
fn a_sample_is_a_walk_the_model_allows() {
    for seed in 1..200 {
        let t = sample(seed, 14);
        assert!(
            matches!(t.last(), Some(Event::Mint(_)) | None),
            "seed {seed}"
        );
        let mut s = State::cold();
        let mut all = vec![Event::Start];
        all.extend(&t);
        for &e in &all {
            match step(&s, e, FIXED) {
                Outcome::Next(n) => s = n,
                other => panic!("seed {seed}: {e}: {other:?}"),
            }
        }
    }
    assert_ne!(sample(1, 14), sample(2, 14));
    assert_eq!(sample(7, 14), sample(7, 14));
}

/// The model's traces, for `tests/integration/model_replay.sh`: the
/// five named ones when `STARTS_MODEL_TRACES` names a directory, and
/// `STARTS_MODEL_SAMPLES` random walks (`sample`) from the seed
/// `STARTS_MODEL_SEED` on, 14 events each (to the last mint; a
/// seed whose walk never mints is skipped).
#[test]
fn write_the_traces_for_the_replay() {
    let Ok(dir) = std::env::var("STARTS_MODEL_TRACES") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let first = var("STARTS_MODEL_SEED").unwrap_or(1);
    let want = var("STARTS_MODEL_SAMPLES").unwrap_or(0) as usize;
    let mut written = 0;
    // A walk that never minted checks nothing: the next seed instead.
    for seed in first.. {
        if written == want {
            break;
        }
        let walk = sample(seed, 14);
        if walk.is_empty() {
            continue;
        }
        written += 1;
        let body: Vec<String> = walk.iter().map(|e| e.to_string()).collect();
        std::fs::write(
            format!("{dir}/sample_{seed}.trace"),
            format!(
                "# A random walk of the start model, seed {seed} (STARTS_MODEL_SEED)\n{}\n",
                body.join("\n")
            ),
        )
        .unwrap();
    }
    let mut seen = HashSet::new();
    for (name, _, events) in defects() {
        let file = format!("{dir}/model_{}.trace", name.split(' ').next().unwrap());
        assert!(seen.insert(file.clone()));
        let body: Vec<String> = events.iter().map(|e| e.to_string()).collect();
        std::fs::write(
            &file,
            format!("# {name} (from the model)\n{}\n", body.join("\n")),
        )
        .unwrap();
    }
}
