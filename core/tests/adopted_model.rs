//! The model of the shared list of adopted sequences (issue 63,
//! `snowflake_id_core::adopted`): loaders that read a database's list
//! after a start, and transactions that change it and apply their
//! changes at commit, in every order. Property: once every actor is done,
//! a database that the table calls loaded has exactly the sequences the
//! list holds. (Between a commit and its apply the table may lag the
//! list; that window is the same for every backend and ends at the
//! apply.)

use snowflake_id_core::adopted::{AdoptedTable, Change, Published, Word};
use std::collections::BTreeSet;

const DB: u32 = 7;

#[derive(Clone, Copy, Debug)]
enum Actor {
    /// A transaction that makes `change`: reads the word just before its
    /// commit, becomes visible, applies.
    Committer(Change),
    /// A backend that loads the list: reads the word, reads the list
    /// (a snapshot), publishes.
    Loader,
}

#[derive(Clone, Debug)]
struct Progress {
    step: usize,
    seen: Option<Word>,
    read: Option<Vec<u32>>,
}

fn steps(a: Actor) -> usize {
    match a {
        Actor::Committer(_) => 3,
        Actor::Loader => 3,
    }
}

/// Every interleaving of the actors' steps (each actor's in its own
/// order), checked by [`check`]: the first failing one's trace.
fn search(actors: &[Actor], order: &mut Vec<usize>, rules: Rules) -> Option<Vec<String>> {
    let total: usize = actors.iter().map(|a| steps(*a)).sum();
    if order.len() == total {
        return check(actors, order, rules);
    }
    for i in 0..actors.len() {
        let done = order.iter().filter(|&&j| j == i).count();
        if done < steps(actors[i]) {
            order.push(i);
            if let Some(t) = search(actors, order, rules) {
                return Some(t);
            }
            order.pop();
        }
    }
    None
}

thread_local! {
    static START: std::cell::RefCell<(Vec<u32>, bool)> = const { std::cell::RefCell::new((Vec::new(), false)) };
}

fn check(actors: &[Actor], order: &[usize], rules: Rules) -> Option<Vec<String>> {
    let (initial, preloaded) = START.with(|s| s.borrow().clone());
    let t: AdoptedTable<4, 64> = AdoptedTable::default();
    if preloaded {
        assert_eq!(t.publish(DB, Word::NONE, &initial), Published::Yes);
    }
    let mut list: BTreeSet<u32> = initial.iter().copied().collect();
    let mut progress = vec![
        Progress {
            step: 0,
            seen: None,
            read: None
        };
        actors.len()
    ];
    let mut trace = Vec::new();
    for &i in order {
        let p = &mut progress[i];
        match (actors[i], p.step) {
            (Actor::Committer(c), 0) => {
                p.seen = Some(t.word(DB));
                trace.push(format!("committer {i}: {c:?} reads the word"));
            }
            (Actor::Committer(c), 1) => {
                match c {
                    Change::Add(s) => {
                        list.insert(s);
                    }
                    Change::Remove(s) => {
                        list.remove(&s);
                    }
                    Change::Forget => list.clear(),
                }
                trace.push(format!("committer {i}: {c:?} commits"));
            }
            (Actor::Committer(c), _) => {
                match rules {
                    Rules::IgnoreSeen => t.apply_ignoring_seen(DB, &[c]),
                    Rules::ApplyOnlyWhenLoaded if !t.word(DB).loaded() => {}
                    _ => t.apply(DB, p.seen.unwrap(), &[c]),
                }
                trace.push(format!("committer {i}: applies {c:?}"));
            }
            (Actor::Loader, 0) => {
                p.seen = Some(t.word(DB));
                trace.push(format!("loader {i}: reads the word"));
            }
            (Actor::Loader, 1) => {
                p.read = Some(list.iter().copied().collect());
                trace.push(format!("loader {i}: reads the list {:?}", p.read));
            }
            (Actor::Loader, _) => {
                let ok = t.publish(DB, p.seen.unwrap(), p.read.as_ref().unwrap()) == Published::Yes;
                trace.push(format!("loader {i}: publishes ({ok})"));
            }
        }
        p.step += 1;
    }
    let (w, got) = t.seqs_of(DB);
    if w.loaded() {
        let got: BTreeSet<u32> = got.unwrap().into_iter().collect();
        if got != list {
            trace.push(format!("end: the table has {got:?}, the list {list:?}"));
            return Some(trace);
        }
    }
    None
}

/// Which rules the table follows: its own, or one that it does not (to
/// show that the model finds what that rule breaks).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rules {
    Table,
    /// A commit leaves the word of an unloaded database alone.
    ApplyOnlyWhenLoaded,
    /// An apply ignores what moved the word since its commit.
    IgnoreSeen,
}

fn run(actors: &[Actor], initial: &[u32], preloaded: bool, rules: Rules) -> Option<Vec<String>> {
    START.with(|s| *s.borrow_mut() = (initial.to_vec(), preloaded));
    let mut order = Vec::new();
    search(actors, &mut order, rules)
}

#[test]
fn loaders_and_committers_in_every_order_agree_with_the_list() {
    use Actor::*;
    use Change::*;
    let cases: &[(&[Actor], &[u32], bool)] = &[
        (&[Loader, Committer(Add(1)), Loader], &[], false),
        (
            &[Loader, Committer(Add(1)), Committer(Remove(2))],
            &[2],
            false,
        ),
        (&[Committer(Add(1)), Committer(Add(3)), Loader], &[2], true),
        (&[Loader, Committer(Forget), Loader], &[2], false),
        (
            &[Loader, Committer(Remove(2)), Committer(Add(2))],
            &[2],
            false,
        ),
        (&[Loader, Loader, Committer(Add(5))], &[], false),
        (
            &[
                Loader,
                Committer(Add(1)),
                Committer(Remove(1)),
                Committer(Add(3)),
            ],
            &[],
            false,
        ),
        (
            &[
                Loader,
                Committer(Remove(2)),
                Committer(Add(2)),
                Committer(Forget),
            ],
            &[2],
            true,
        ),
    ];
    for (actors, initial, preloaded) in cases {
        if let Some(trace) = run(actors, initial, *preloaded, Rules::Table) {
            panic!("{actors:?} from {initial:?}:\n{}", trace.join("\n"));
        }
    }
}

/// The rules the model guards. A commit moves the word even where nothing
/// is loaded. Without it, a loader that read the list before a commit
/// publishes a set without that commit's sequence, for good.
#[test]
fn the_model_finds_a_commit_that_does_not_move_an_unloaded_word() {
    use Actor::*;
    let trace = run(
        &[Loader, Committer(Change::Add(1))],
        &[],
        false,
        Rules::ApplyOnlyWhenLoaded,
    )
    .expect("the model must find the lost adoption");
    let text = trace.join("\n");
    assert!(text.contains("loader 0: publishes (true)"), "{text}");
    assert!(text.contains("the table has {}, the list {1}"), "{text}");
}

/// And an apply unloads where the word moved since its commit: applies
/// come after their commits, in any order, so a removal applied after a
/// later re-adoption of the same sequence would lose it.
#[test]
fn the_model_finds_a_removal_applied_after_a_re_adoption() {
    use Actor::*;
    use Change::*;
    let actors = [Committer(Remove(2)), Committer(Add(2))];
    let trace = run(&actors, &[2], true, Rules::Table);
    assert!(trace.is_none(), "{trace:?}");
    let trace = run(&actors, &[2], true, Rules::IgnoreSeen)
        .expect("the model must find the lost re-adoption");
    assert!(
        trace.join("\n").contains("the table has {}, the list {2}"),
        "{trace:?}"
    );
}
