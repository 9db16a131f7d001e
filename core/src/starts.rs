//! The start decisions (issue 62), as pure functions: which marks a
//! start trusts, whether it must read every database's high-water mark
//! before the first ID, what it holds, what a state file or a WAL record
//! may claim, and when a start must be refused. The extension calls
//! these (`crate::mint::reservation`, `crate::high_water`), and the model
//! checker in `core/tests/starts_model.rs` calls the same ones over every
//! sequence of starts, crashes, tools and clock steps to a depth.
//!
//! The words:
//! - a database's **mark** is a time no ID minted in it has passed
//!   (`docs/high-water.md`); marks run up to 5 s ahead of the IDs;
//! - the **reservation** (state file, WAL record) is a time no ID of the
//!   server has passed;
//! - a start's **stamp** tells the marks it wrote from every earlier
//!   start's: a random number drawn when shared memory is made, never the
//!   clock (issue 62, defect 4: two starts with the same start-up time
//!   took each other's marks for their own);
//! - **pending** work is what makes the marks, on their own, not enough:
//!   a mark of an earlier start not read yet (the read runs, a database
//!   lags, a mark is held back) or the IDs of a dropped database not yet
//!   carried into another database's mark. Every state file and every
//!   reservation record says what is pending, so that no start path
//!   forgets it (issue 62, defects 2 and 3).

/// What a start finds in the data directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileFound {
    /// No state file (a first start, `pg_upgrade`, a lost file).
    Missing,
    /// A file that cannot be read, is corrupt, or is another cluster's.
    Unusable,
    /// This cluster's file.
    Ours(FileFacts),
}

/// What a start needs to know of this cluster's state file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileFacts {
    /// Written by the clean stop whose shutdown checkpoint `pg_control`
    /// names: no process minted after it.
    pub current: bool,
    /// What was pending when it was written.
    pub pending: Pending,
}

/// What was pending when a state file or a reservation record was
/// written: see the module documentation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Pending {
    /// Some database's mark from before this start was not applied: the
    /// start-up read had not ended, a database lagged, or a mark was held
    /// back as far ahead of the clock.
    pub marks_unread: bool,
    /// A dropped database's IDs (or those of a database whose extension
    /// was dropped) were not yet carried into another database's mark.
    pub carry: bool,
}

impl Pending {
    pub const NONE: Pending = Pending {
        marks_unread: false,
        carry: false,
    };
}

/// How the last run ended, as `pg_control` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shutdown {
    /// A clean stop (`DB_SHUTDOWNED`).
    Clean,
    /// A standby's clean stop (`DB_SHUTDOWNED_IN_RECOVERY`).
    CleanInRecovery,
    /// Anything else: a crash, or `pg_control` unreadable.
    Crash,
}

/// Everything a start decides from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StartFacts {
    pub file: FileFound,
    pub shutdown: Shutdown,
    /// `standby.signal` is there: the server follows a primary's WAL.
    pub standby: bool,
}

/// Whether a start reads every database's mark before the first ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Read {
    /// No: the file is current, or the WAL a standby follows carries
    /// every reservation.
    No,
    /// Only if crash recovery replays no reservation record
    /// ([`read_after_replay`]).
    UnlessReplayed,
    /// Yes, whatever recovery replays.
    Yes,
}

/// Whether this start must read the marks ([`Read`]).
///
/// Only this cluster's file can spare the read. A file that says marks
/// were unread demands it on every start path (issue 62: a crash restart
/// and a clean restart forgot a lagging database, or a mark held back):
/// the read finds the same marks again, and holds, applies or leaves
/// lagging each one as the first read did.
pub fn read_at_start(f: &StartFacts) -> Read {
    let FileFound::Ours(file) = f.file else {
        return Read::Yes;
    };
    if file.pending.marks_unread {
        return Read::Yes;
    }
    if f.standby {
        return Read::No;
    }
    match f.shutdown {
        Shutdown::Clean if file.current => Read::No,
        Shutdown::CleanInRecovery => Read::No,
        _ => Read::UnlessReplayed,
    }
}

/// Once crash recovery (or a standby's replay, at promotion) has ended:
/// whether the read is needed, given what the start planned and what
/// the last reservation record replayed said (`None`: none replayed).
///
/// Reservations only grow and each is logged before an ID it covers is
/// handed out, so the last record covers every ID the server handed out;
/// it does not cover marks of earlier starts that were never applied,
/// which its `pending` says.
pub fn read_after_replay(planned: Read, replayed: Option<Pending>) -> bool {
    match (planned, replayed) {
        (_, Some(p)) if p.marks_unread => true,
        (Read::Yes, _) => true,
        (Read::UnlessReplayed, None) => true,
        (Read::UnlessReplayed, Some(_)) | (Read::No, _) => false,
    }
}

/// Whether a start in binary-upgrade mode (`pg_upgrade` starting the old
/// cluster) must refuse: a dropped database's IDs are covered by this
/// cluster's state file alone, which `pg_upgrade` does not carry, so the
/// new cluster would mint below them. Start the old cluster normally
/// once (the carry takes a second), stop it, and run `pg_upgrade` again.
pub fn refuse_binary_upgrade(file: &FileFound) -> bool {
    matches!(file, FileFound::Ours(f) if f.pending.carry)
}

/// Where a start's stamp comes from: `random` is 64 random bits drawn
/// when shared memory is made. The stamp lies in `[1, 2^52)`, read as
/// microseconds since 2000 (the table's `written_at` is a
/// `timestamptz`): a valid time that `pg_dump` and a restore carry. Two
/// starts share a stamp with a chance of 2^-52, whatever the clock did.
pub fn start_stamp(random: u64) -> i64 {
    ((random >> 12) | 1) as i64
}

/// Which marks a read applies: every row not stamped by this start (its
/// own marks run ahead of its own IDs, and applying them would only add
/// lead).
pub fn earlier_mark(row_stamp: i64, this_start: i64) -> bool {
    row_stamp != this_start
}

/// What a start, or a database's first ID, does with a mark of an
/// earlier start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Nothing: the generator is above it already, or the database did
    /// not need reading (its mark is the last run's own).
    Nothing,
    /// Raise the generator above it.
    Raise,
    /// Hold it back in its database: it is more than `far_ms` ahead of
    /// the clock and of the generator, and moves nothing by itself.
    Hold,
}

/// The verdict on a mark `found` (Unix ms), with the durable reservation
/// at `reserved` (what a restart resumes above: a mark below the wall
/// clock but above it is raised all the same, and made durable, or a
/// restart with the clock stepped back would forget it), the far limit
/// at `far_limit` (`FAR_MS` beyond the later of the clock and the
/// generator's frontier when it was last established), and `unread`:
/// this database's marks of earlier starts were not applied by this
/// start yet (the read, a lagging database, a database copied since, a
/// start whose file said marks were unread).
pub fn judge_mark(found: i64, reserved: i64, far_limit: i64, unread: bool) -> Verdict {
    if found > far_limit {
        Verdict::Hold
    } else if unread && found > reserved {
        Verdict::Raise
    } else {
        Verdict::Nothing
    }
}

/// What this run has left undone, as shared memory says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Progress {
    /// The start-up read has ended (or none was needed).
    pub read_done: bool,
    /// Some database lags (or every one does: the list failed).
    pub lagging: bool,
    /// Some database holds a mark back.
    pub held: bool,
    /// The largest reservation a dropped database's IDs need carried
    /// into a surviving database's mark (`i64::MIN`: none), and the
    /// largest carried.
    pub carry_wanted: i64,
    pub carried: i64,
}

/// What every state file and reservation record written now says is
/// pending.
pub fn pending(p: &Progress) -> Pending {
    Pending {
        marks_unread: !p.read_done || p.lagging || p.held,
        carry: p.carry_wanted > p.carried,
    }
}

/// Whether a clean stop may write a file that calls itself current (the
/// next clean start then reads no mark): never while a mark is unread or
/// held. A carry still pending is said in the file, which re-arms it.
pub fn clean_stop_current(p: &Progress) -> bool {
    !pending(p).marks_unread
}

/// Whether a pending state must be written down now, before anything
/// else is minted: it grew since the last file and record
/// (`logged`). A hold, a lagging database and a carry must outlive a
/// crash that follows at once (issue 62); a pending state that shrank is
/// written with the next reservation.
pub fn must_log(now: Pending, logged: Pending) -> bool {
    (now.marks_unread && !logged.marks_unread) || (now.carry && !logged.carry)
}

/// Whether `DROP DATABASE` of a database, or `DROP EXTENSION` in it,
/// must be refused: its marks of earlier starts are not applied (it
/// lags, or holds a mark back), so nothing can carry them. The launcher
/// reads a lagging database again every second; a held mark waits for a
/// superuser's decision (accept or discard), which comes first. (A copy
/// of a held database holds the same mark, but the model finds that
/// "another database holds it as high" is no rule: that one may be
/// discarded as wrong, with the dropped one's right mark gone.)
pub fn refuse_drop(lags: bool, holds: bool) -> bool {
    lags || holds
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours(current: bool, marks_unread: bool) -> FileFound {
        FileFound::Ours(FileFacts {
            current,
            pending: Pending {
                marks_unread,
                carry: false,
            },
        })
    }

    #[test]
    fn only_a_current_file_without_pending_marks_spares_the_read() {
        let f = |file, shutdown, standby| {
            read_at_start(&StartFacts {
                file,
                shutdown,
                standby,
            })
        };
        assert_eq!(f(ours(true, false), Shutdown::Clean, false), Read::No);
        assert_eq!(f(ours(true, true), Shutdown::Clean, false), Read::Yes);
        assert_eq!(
            f(ours(false, false), Shutdown::Clean, false),
            Read::UnlessReplayed
        );
        assert_eq!(
            f(ours(true, false), Shutdown::Crash, false),
            Read::UnlessReplayed
        );
        assert_eq!(f(ours(false, true), Shutdown::Crash, false), Read::Yes);
        assert_eq!(f(ours(false, false), Shutdown::Crash, true), Read::No);
        assert_eq!(f(ours(false, true), Shutdown::Crash, true), Read::Yes);
        assert_eq!(f(FileFound::Missing, Shutdown::Clean, false), Read::Yes);
        assert_eq!(f(FileFound::Unusable, Shutdown::Clean, true), Read::Yes);
    }

    #[test]
    fn a_replayed_record_that_says_marks_were_unread_keeps_the_read() {
        let unread = Pending {
            marks_unread: true,
            carry: false,
        };
        assert!(!read_after_replay(
            Read::UnlessReplayed,
            Some(Pending::NONE)
        ));
        assert!(read_after_replay(Read::UnlessReplayed, None));
        assert!(read_after_replay(Read::UnlessReplayed, Some(unread)));
        assert!(read_after_replay(Read::No, Some(unread)));
        assert!(!read_after_replay(Read::No, None));
        assert!(read_after_replay(Read::Yes, Some(Pending::NONE)));
    }

    #[test]
    fn stamps_are_not_the_clock_and_stay_valid_times() {
        assert_eq!(start_stamp(0), 1);
        assert!(start_stamp(u64::MAX) < 1 << 52);
        assert_ne!(start_stamp(1 << 40), start_stamp(2 << 40));
        assert!(earlier_mark(5, 6));
        assert!(!earlier_mark(6, 6));
    }

    #[test]
    fn marks_are_held_raised_or_left() {
        assert_eq!(judge_mark(100, 50, 90, false), Verdict::Hold);
        assert_eq!(judge_mark(80, 50, 90, true), Verdict::Raise);
        assert_eq!(judge_mark(80, 50, 90, false), Verdict::Nothing);
        assert_eq!(judge_mark(40, 50, 90, true), Verdict::Nothing);
        assert_eq!(judge_mark(50, 50, 90, true), Verdict::Nothing);
    }

    #[test]
    fn a_clean_stop_is_current_only_with_nothing_unread() {
        let mut p = Progress {
            read_done: true,
            carry_wanted: i64::MIN,
            carried: i64::MIN,
            ..Progress::default()
        };
        assert!(clean_stop_current(&p));
        assert_eq!(pending(&p), Pending::NONE);
        p.held = true;
        assert!(!clean_stop_current(&p));
        p.held = false;
        p.lagging = true;
        assert!(!clean_stop_current(&p));
        p.lagging = false;
        p.read_done = false;
        assert!(!clean_stop_current(&p));
        p.read_done = true;
        p.carry_wanted = 10;
        assert!(clean_stop_current(&p));
        assert!(pending(&p).carry);
        p.carried = 10;
        assert!(!pending(&p).carry);
    }

    #[test]
    fn growth_of_the_pending_state_is_logged_at_once() {
        let unread = Pending {
            marks_unread: true,
            carry: false,
        };
        assert!(must_log(unread, Pending::NONE));
        assert!(!must_log(Pending::NONE, unread));
        assert!(!must_log(unread, unread));
    }

    #[test]
    fn only_an_upgrade_source_with_a_carry_pending_is_refused() {
        let carry = FileFound::Ours(FileFacts {
            current: true,
            pending: Pending {
                marks_unread: false,
                carry: true,
            },
        });
        assert!(refuse_binary_upgrade(&carry));
        assert!(!refuse_binary_upgrade(&ours(true, true)));
        assert!(!refuse_binary_upgrade(&FileFound::Missing));
    }
}
