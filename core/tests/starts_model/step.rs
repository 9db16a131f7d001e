// The model's transitions: included by core/tests/starts_model.rs (one
// crate; split to keep each file under 900 lines).

fn step(s: &State, e: Event, r: Rules) -> Outcome {
    let mut n = *s;
    match e {
        Event::Mint(d) => {
            let Some(mut run) = n.run else {
                return Outcome::Impossible;
            };
            if !n.dbs[d].exists || !n.dbs[d].ext {
                return Outcome::Impossible;
            }
            // The gate: once per database and run, read its marks from
            // before this start (`high_water::gate::read_own_mark`).
            if run.gated & bit(d) == 0 {
                run.gated |= bit(d);
                // Some database lags, or holds a mark: this one may be a
                // copy of it made since, whose marks nobody read.
                let unread = run.lagging != 0 || run.held != 0;
                if let Some(found) = earlier(&n.dbs[d], &run) {
                    apply(&n, &mut run, d, found, unread);
                }
                log_if_grown(&mut n, &mut run, r);
            }
            if run.held & bit(d) != 0 {
                n.run = Some(run);
                return if n == *s {
                    Outcome::Refused
                } else {
                    Outcome::Next(n)
                };
            }
            let id = if run.last == NONE {
                n.clock
            } else {
                (run.last + 1).max(n.clock)
            };
            if id > MAX_T {
                return Outcome::Impossible;
            }
            // The documented exception: an ID that only the mark of a
            // database lagging or holding a mark covers (of the marks of
            // earlier starts: this start's own cover only its own IDs).
            let unread = run.lagging | run.held;
            let cover = |lagging: bool| {
                (0..DBS)
                    .filter(|&e| n.dbs[e].exists && ((unread & bit(e) != 0) == lagging))
                    .filter_map(|e| earlier(&n.dbs[e], &run))
                    .max()
                    .unwrap_or(NONE)
            };
            let (read, unread_only) = (cover(false), cover(true));
            let exempt = |x: i8| x > read && x <= unread_only;
            if let Some(x) = n
                .issued
                .iter()
                .copied()
                .chain([n.dropped])
                .find(|&x| id <= x && !exempt(x))
            {
                return Outcome::Violation(format!(
                    "P1: {} minted {id}, not above {x} handed out before",
                    NAMES[d]
                ));
            }
            let stored = n.dbs[d].max_id.max(n.dbs[d].restored);
            if id <= stored {
                return Outcome::Violation(format!(
                    "P2: {} minted {id}, not above {stored} stored there",
                    NAMES[d]
                ));
            }
            run.last = id;
            n.issued[d] = n.issued[d].max(id);
            n.dbs[d].max_id = n.dbs[d].max_id.max(id);
            if id > run.res {
                let res = id + WINDOW;
                log_reservation(&mut n, &mut run, r, res);
            }
            if n.dbs[d].mark <= id {
                let m = id.max(frontier(&n, &run)) + AHEAD;
                write_mark(&mut n, &run, r, d, m);
            }
            n.run = Some(run);
        }
        Event::Stop => {
            let Some(run) = n.run.take() else {
                return Outcome::Impossible;
            };
            let p = progress(&run, r);
            // 97fb84c wrote nothing while a database lagged.
            if r.persist_lagging || run.lagging == 0 {
                n.file = Some(File {
                    res: frontier(s, &run),
                    current: clean_stop_current(&p),
                    pending: pending(&p),
                });
            }
            for db in n.dbs.iter_mut() {
                db.disk = db.mark;
            }
            n.wal = None;
            n.clean = true;
        }
        Event::Crash => {
            if n.run.take().is_none() {
                return Outcome::Impossible;
            }
            n.clean = false;
        }
        Event::Start | Event::StartLagging(_) => {
            if n.run.is_some() {
                return Outcome::Impossible;
            }
            let lag = match e {
                Event::StartLagging(d) if n.dbs[d].exists && n.dbs[d].ext => Some(d),
                Event::StartLagging(_) => return Outcome::Impossible,
                _ => None,
            };
            let facts = StartFacts {
                file: facts(&n),
                shutdown: if n.clean {
                    Shutdown::Clean
                } else {
                    Shutdown::Crash
                },
                standby: false,
            };
            let replayed = if n.clean { None } else { n.wal };
            start(&mut n, r, facts, replayed, lag);
        }
        Event::Failover => {
            // The synchronous standby has every record and every mark; it
            // wrote the last reservation it replayed into its own file.
            if n.run.take().is_none() {
                return Outcome::Impossible;
            }
            n.file = n.wal_ever.map(|(res, p)| File {
                res,
                current: false,
                pending: p,
            });
            for db in n.dbs.iter_mut() {
                db.disk = db.mark;
            }
            let facts = StartFacts {
                file: facts(&n),
                shutdown: Shutdown::Crash,
                standby: true,
            };
            let replayed = n.wal_ever;
            start(&mut n, r, facts, replayed, None);
        }
        Event::LoseStateFile => {
            if n.run.is_some() || n.file.is_none() {
                return Outcome::Impossible;
            }
            // The operator's one rule (docs/durability.md): never remove
            // the file while it says a carry is pending.
            if r.carry && n.file.is_some_and(|f| f.pending.carry) {
                return Outcome::Impossible;
            }
            n.file = None;
        }
        Event::Upgrade => {
            if n.run.is_some() || !n.clean {
                return Outcome::Impossible;
            }
            if r.carry && refuse_binary_upgrade(&facts(&n)) {
                return Outcome::Refused;
            }
            n.file = None;
            n.wal = None;
        }
        Event::Resetwal => {
            if n.run.is_some() || n.clean {
                return Outcome::Impossible;
            }
            for db in n.dbs.iter_mut() {
                // A restore's transaction since the last checkpoint is
                // lost with the WAL: its mark and its keys alike.
                if db.disk < db.mark && db.restored != NONE {
                    db.restored = NONE;
                }
                db.mark = db.disk;
            }
            n.wal = None;
            n.clean = true;
            if let Some(f) = n.file.as_mut() {
                f.current = false;
            }
        }
        Event::DropDatabase(d) | Event::DropExtension(d) => {
            let Some(mut run) = n.run else {
                return Outcome::Impossible;
            };
            if !n.dbs[d].exists || !n.dbs[d].ext {
                return Outcome::Impossible;
            }
            if r.carry && refuse_drop(run.lagging & bit(d) != 0, run.held & bit(d) != 0) {
                return Outcome::Refused;
            }
            if r.carry {
                run.carry_wanted = run.carry_wanted.max(run.res.max(run.last));
            }
            run.held &= !bit(d);
            run.lagging &= !bit(d);
            if let Event::DropDatabase(_) = e {
                n.dropped = n.dropped.max(n.issued[d]);
                n.issued[d] = NONE;
                n.dbs[d] = NO_DB;
            } else {
                let db = &mut n.dbs[d];
                (db.ext, db.mark, db.disk) = (false, NONE, NONE);
            }
            log_if_grown(&mut n, &mut run, r);
            n.run = Some(run);
        }
        Event::Carry => {
            let Some(mut run) = n.run else {
                return Outcome::Impossible;
            };
            if !r.carry {
                return Outcome::Refused;
            }
            if run.carry_wanted <= run.carried {
                return Outcome::Impossible;
            }
            let Some(d) = (0..DBS).find(|&d| n.dbs[d].exists && n.dbs[d].ext) else {
                return Outcome::Impossible;
            };
            let m = run.carry_wanted;
            write_mark(&mut n, &run, r, d, m);
            run.carried = m;
            n.run = Some(run);
        }
        Event::ReadLagging => {
            let Some(mut run) = n.run else {
                return Outcome::Impossible;
            };
            if run.lagging == 0 {
                return Outcome::Impossible;
            }
            for d in 0..DBS {
                if run.lagging & bit(d) != 0 {
                    if let Some(found) = earlier(&n.dbs[d], &run) {
                        apply(&n, &mut run, d, found, true);
                    }
                }
            }
            run.lagging = 0;
            log_if_grown(&mut n, &mut run, r);
            n.run = Some(run);
        }
        Event::Hold(d) => {
            // A superuser restores into d a mark far ahead, with the keys
            // it covers (an old server's, of the same worker id).
            let Some(mut run) = n.run else {
                return Outcome::Impossible;
            };
            if !n.dbs[d].exists || !n.dbs[d].ext || run.held & bit(d) != 0 {
                return Outcome::Impossible;
            }
            let m = far_limit(&n, &run) + 1;
            if m > MAX_T {
                return Outcome::Impossible;
            }
            let db = &mut n.dbs[d];
            db.kept = (db.mark, db.stamp);
            db.mark = db.mark.max(m);
            db.stamp = -1;
            db.restored = m - 1;
            run.held |= bit(d);
            log_if_grown(&mut n, &mut run, r);
            n.run = Some(run);
        }
        Event::Accept => {
            let Some(mut run) = n.run else {
                return Outcome::Impossible;
            };
            if run.held == 0 {
                return Outcome::Impossible;
            }
            for d in 0..DBS {
                if run.held & bit(d) != 0 {
                    run.last = run.last.max(n.dbs[d].mark);
                }
            }
            run.held = 0;
            run.far_base = frontier(&n, &run);
            log_if_grown(&mut n, &mut run, r);
            n.run = Some(run);
        }
        Event::Discard(d) => {
            let Some(mut run) = n.run else {
                return Outcome::Impossible;
            };
            // Only a wrong mark is discarded: one a restore brought, with
            // no ID of this server's above the generator.
            if run.held & bit(d) == 0
                || n.dbs[d].restored == NONE
                || n.dbs[d].max_id > frontier(&n, &run)
            {
                return Outcome::Impossible;
            }
            // The mark was wrong: so are the keys it came with.
            let m = frontier(&n, &run) + AHEAD;
            let db = &mut n.dbs[d];
            // The rows from before the restore stay as they were (one
            // mark stands for them here: the larger, with their stamp).
            (db.mark, db.stamp) = if db.kept.0 != NONE {
                (db.kept.0.max(m), db.kept.1)
            } else {
                (m, run.stamp)
            };
            if r.flush_marks {
                db.disk = db.mark;
            }
            db.restored = NONE;
            db.kept = (NONE, 0);
            run.held &= !bit(d);
            // The rows it kept are read as the start-up read would have:
            // the database lags no more.
            if let Some(found) = earlier(&n.dbs[d], &run) {
                apply(&n, &mut run, d, found, true);
            }
            run.lagging &= !bit(d);
            log_if_grown(&mut n, &mut run, r);
            n.run = Some(run);
        }
        Event::Template(src, dst) | Event::DumpRestore(src, dst) => {
            let Some(mut run) = n.run else {
                return Outcome::Impossible;
            };
            if src == dst || !n.dbs[src].exists || !n.dbs[src].ext || n.dbs[dst].exists {
                return Outcome::Impossible;
            }
            let mut copy = n.dbs[src];
            if let Event::DumpRestore(..) = e {
                // The restore's INSERT fires the trigger: the mark raises
                // the generator, or is held back.
                copy.disk = if r.flush_marks { copy.mark } else { NONE };
                if copy.mark != NONE {
                    let unread = true;
                    apply(&n, &mut run, dst, copy.mark, unread);
                }
            }
            n.dbs[dst] = copy;
            run.gated &= !bit(dst);
            // A copy of a held database holds its mark at once; a copy of
            // one that lags lags until the launcher has read it: its marks
            // are the template's, which nobody applied
            // (`high_water::drops`).
            if r.persist_held {
                if let Event::Template(..) = e {
                    if run.held & bit(src) != 0 {
                        run.held |= bit(dst);
                    } else if run.lagging & bit(src) != 0 {
                        run.lagging |= bit(dst);
                    }
                }
            }
            log_if_grown(&mut n, &mut run, r);
            n.run = Some(run);
        }
        Event::ClockBack(big) => {
            let by = if big { BIG } else { SMALL };
            if n.clock - by < 0 {
                return Outcome::Impossible;
            }
            // A running generator keeps its reference clock: its frontier
            // never steps back with the wall clock.
            if let Some(run) = n.run.as_mut() {
                run.last = run.last.max(n.clock);
            }
            n.clock -= by;
        }
        Event::ClockForward(big) => {
            let by = if big { BIG } else { SMALL };
            if n.clock + by > MAX_T {
                return Outcome::Impossible;
            }
            n.clock += by;
            // The launcher applies a held mark the clock came within
            // reach of, within 100 ms (`release_far_mark_in_reach`).
            if let Some(mut run) = n.run {
                let held = (0..DBS)
                    .filter(|&d| run.held & bit(d) != 0)
                    .map(|d| n.dbs[d].mark)
                    .max();
                if let Some(m) = held.filter(|&m| m <= far_limit(&n, &run)) {
                    run.last = run.last.max(m);
                    run.held = 0;
                    log_if_grown(&mut n, &mut run, r);
                }
                n.run = Some(run);
            }
        }
    }
    Outcome::Next(n)
}

fn facts(s: &State) -> FileFound {
    match s.file {
        None => FileFound::Missing,
        Some(f) => FileFound::Ours(FileFacts {
            current: f.current,
            pending: f.pending,
        }),
    }
}

/// A start: the decisions of `mint::reservation::startup_state` and of
/// the high-water launcher's start-up read.
fn start(
    n: &mut State,
    r: Rules,
    facts: StartFacts,
    replayed: Option<(i8, Pending)>,
    lag: Option<usize>,
) {
    let planned = read_at_start(&facts);
    let read = read_after_replay(planned, replayed.map(|(_, p)| p));
    // A start's stamp: the clock (97fb84c), or a number no earlier start
    // had (kept small here: every earlier stamp is renumbered to 0).
    let stamp = if r.unique_stamp {
        for db in n.dbs.iter_mut() {
            db.stamp = 0;
            db.kept.1 = 0;
        }
        1
    } else {
        n.clock
    };
    let file_res = n.file.map_or(NONE, |f| f.res);
    let last = file_res.max(replayed.map_or(NONE, |(res, _)| res));
    let mut run = Run {
        stamp,
        last,
        res: last,
        far_base: NONE,
        lagging: 0,
        held: 0,
        gated: 0,
        // A carry the file or the last record says is pending is due
        // again: the reservation covers what it must carry.
        carry_wanted: if r.carry
            && (n.file.is_some_and(|f| f.pending.carry) || replayed.is_some_and(|(_, p)| p.carry))
        {
            last
        } else {
            NONE
        },
        carried: NONE,
        logged: n.file.map_or(Pending::NONE, |f| f.pending),
    };
    if read {
        for d in 0..DBS {
            if !n.dbs[d].exists || !n.dbs[d].ext {
                continue;
            }
            if lag == Some(d) {
                run.lagging |= bit(d);
            } else if let Some(found) = earlier(&n.dbs[d], &run) {
                apply(n, &mut run, d, found, true);
            }
        }
    }
    run.far_base = frontier(n, &run);
    // Crash recovery ends with a checkpoint: its records are behind it.
    n.wal = None;
    n.clean = false;
    log_if_grown(n, &mut run, r);
    n.run = Some(run);
}

