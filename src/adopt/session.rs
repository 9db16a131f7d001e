//! This session's values of adopted sequences (for `currval()` and
//! `lastval()`), which `DISCARD SEQUENCES` and `DISCARD ALL` forget as
//! they forget PostgreSQL's own.

use pgrx::pg_sys;
use std::cell::RefCell;
use std::collections::HashMap;

#[derive(Default)]
pub struct Session {
    /// The last `nextval` of each adopted sequence (for `currval`).
    pub current: HashMap<pg_sys::Oid, i64>,
    /// The adopted sequence and value of the session's latest tracked
    /// `nextval`, or `None` when that was a sequence of PostgreSQL's own
    /// (then `lastval()` is PostgreSQL's).
    pub last: Option<(pg_sys::Oid, i64)>,
    /// How many adopted values the session has taken (`nextval`,
    /// `snowflake_nextval_for`): a `COPY` compares it before and after.
    pub adopted_draws: u64,
}

thread_local! {
    static SESSION: RefCell<Session> = RefCell::new(Session::default());
}

/// Run `f` on the session's values.
pub fn with<R>(f: impl FnOnce(&mut Session) -> R) -> R {
    SESSION.with(|s| f(&mut s.borrow_mut()))
}

/// `v`, of adopted sequence `seq`, is the session's `currval(seq)` and
/// `lastval()`.
pub fn adopted(seq: pg_sys::Oid, v: i64) {
    with(|s| {
        s.current.insert(seq, v);
        s.last = Some((seq, v));
        s.adopted_draws += 1;
    });
}

/// A value PostgreSQL drew itself: `lastval()` is PostgreSQL's again.
pub fn drawn_by_postgres() {
    with(|s| s.last = None);
}

/// Forget every value (`DISCARD SEQUENCES`, `DISCARD ALL`).
pub fn discard() {
    with(|s| *s = Session::default());
}
