//! The per-database bound: before an ID is returned, the database it is
//! minted in must hold a durable mark above it (`crate::high_water`
//! keeps the marks; this module only asks).
//!
//! The hot path is one load and one compare against a process-local
//! threshold: the smallest ID whose timestamp reaches the point where
//! this backend must ask again ([`check`]). Below it nothing is asked.
//! The threshold starts at 0, so a backend's first call waits, before it
//! computes any ID, for what the owner needs first ([`prepare`]: after
//! some starts, the start-up read of the marks), and its first ID asks;
//! the threshold is set from what the owner of the marks answers. A
//! caller whose ID the threshold does not cover asks, which can wait,
//! and computes its ID again after the wait (`crate::mint::nextval`).
//!
//! The owner registers itself at start-up ([`set_owner`]); `mint` never
//! names it, so the dependency runs one way: `high_water` uses `mint`.

use snowflake_id_core::Layout;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::OnceLock;

/// The owner of the marks, as `mint` sees it.
pub struct Owner {
    /// Before a call computes any ID: everything that may wait or raise
    /// the generator (the start-up read of the marks, this database's
    /// own read), so that no ID is ever computed before a wait of its
    /// call (issue 55). It returns (or raises an ERROR) once the
    /// generator may be used in this backend's database.
    pub before: fn(),
    /// The Unix ms of the largest ID about to be returned in this
    /// backend's database: it returns (or raises an ERROR) once that
    /// database's mark is above it, with the Unix ms at which this
    /// backend must ask again.
    pub cover: fn(ms: i64) -> i64,
}

static OWNER: OnceLock<Owner> = OnceLock::new();

/// Process-local: IDs below this are covered by this database's mark as
/// this backend last saw it, with room to spare.
static THRESHOLD: AtomicI64 = AtomicI64::new(0);

/// Register the owner of the marks (once, in `_PG_init` while preloading;
/// every backend inherits it).
pub fn set_owner(owner: Owner) {
    let _ = OWNER.set(owner);
}

/// Before a call computes its first ID: wait for what the owner of the
/// marks needs first (see [`Owner::before`]). Every minting call makes
/// it before it computes an ID: at a backend's first ID (and after
/// [`forget`]), and at every call while `always` (some database holds a
/// mark back: is it this one?).
/// Returns whether it asked (and so may have waited).
#[inline(always)]
pub fn prepare(always: bool) -> bool {
    let ask = always || THRESHOLD.load(Ordering::Relaxed) == 0;
    if ask {
        before();
    }
    ask
}

#[cold]
#[inline(never)]
fn before() {
    if let Some(owner) = OWNER.get() {
        (owner.before)();
    }
}

/// Make sure this database's mark covers `ms` (Unix ms) before any ID is
/// computed: a bulk call asks for the whole lead its blocks can take.
/// Asks nothing where the threshold is past it already.
pub fn cover_ms(ms: i64, layout: &Layout) {
    if threshold_for(ms, layout) >= THRESHOLD.load(Ordering::Relaxed) {
        ask_ms(ms, layout);
    }
}

/// Before returning `id` (the largest of a call's IDs): make sure this
/// database's mark covers it. This can wait (the mark's flush, its
/// table's lock): a caller that can compute its ID again does so after
/// it (see [`covers`]).
#[inline(always)]
pub fn check(id: i64, layout: &Layout) {
    if id >= THRESHOLD.load(Ordering::Relaxed) {
        ask(id, layout);
    }
}

/// Whether `id` is below the threshold, so that [`check`] would ask
/// nothing: the entry point of `snowflake_nextval()`, which may not ask
/// (asking can raise an error), returns only such IDs itself.
#[inline(always)]
pub fn covers(id: i64) -> bool {
    id < THRESHOLD.load(Ordering::Relaxed)
}

#[cold]
#[inline(never)]
fn ask(id: i64, layout: &Layout) {
    ask_ms(
        layout.epoch_ms() + layout.timestamp_of(id as u64) as i64,
        layout,
    );
}

fn ask_ms(ms: i64, layout: &Layout) {
    let Some(owner) = OWNER.get() else {
        // Not preloaded: there is no generator, and nothing to cover.
        return;
    };
    let again_ms = (owner.cover)(ms);
    THRESHOLD.store(threshold_for(again_ms, layout), Ordering::Relaxed);
}

/// The smallest ID of `layout` whose timestamp is `ms` or later.
fn threshold_for(ms: i64, layout: &Layout) -> i64 {
    if ms > layout.last_unix_ms() {
        return i64::MAX;
    }
    let ts = ms.saturating_sub(layout.epoch_ms()).max(0) as u64;
    layout.pack(ts, 0, 0) as i64
}

/// Ask again at the next ID (the configuration, the worker id or the
/// database's marks changed under this backend).
pub fn forget() {
    THRESHOLD.store(0, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_is_the_first_id_of_its_millisecond() {
        let l = Layout::default_layout();
        let ms = l.epoch_ms() + 1_000;
        let t = threshold_for(ms, &l);
        assert_eq!(l.timestamp_of(t as u64), 1_000);
        assert_eq!(l.timestamp_of((t - 1) as u64), 999);
        assert_eq!(threshold_for(l.epoch_ms() - 5, &l), 0);
        assert_eq!(threshold_for(l.last_unix_ms() + 1, &l), i64::MAX);
    }
}
