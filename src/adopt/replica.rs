//! What a logical-replication worker changes where no hook of ours runs.
//! A replicated `TRUNCATE … RESTART IDENTITY` restarts the subscriber's
//! own sequences of those tables (the apply worker calls
//! `ExecuteTruncateGuts` itself, not the utility hook), which took an
//! adopted sequence's counter off its fence (the red-team review of
//! 2337972, F3). In a replication worker, every relation whose relcache
//! entry this transaction invalidated is noted; before the transaction
//! commits, each of them that is an adopted sequence has its counter put
//! back at the fence ([`super::calls::refence`]), in the same transaction.

use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::{Cell, RefCell};

thread_local! {
    /// Whether this process is a replication worker, once asked.
    static REPLICA: Cell<Option<bool>> = const { Cell::new(None) };
    /// The relations whose relcache entries this transaction invalidated.
    static SEEN: RefCell<Vec<pg_sys::Oid>> = const { RefCell::new(Vec::new()) };
}

/// Register the callbacks: in the postmaster, at preload.
pub(super) fn init() {
    // SAFETY: callbacks registered once, in _PG_init of the postmaster,
    // before any backend exists.
    unsafe {
        pg_sys::CacheRegisterRelcacheCallback(Some(relcache_changed), pg_sys::Datum::from(0));
        pg_sys::RegisterXactCallback(Some(on_xact), std::ptr::null_mut());
    }
}

fn replica() -> bool {
    REPLICA.with(|r| match r.get() {
        Some(v) => v,
        None => {
            let v = super::adopt_from_replication();
            r.set(Some(v));
            v
        }
    })
}

#[pg_guard]
unsafe extern "C-unwind" fn relcache_changed(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    if relid == pg_sys::Oid::INVALID || !replica() {
        return;
    }
    SEEN.with(|s| {
        let mut s = s.borrow_mut();
        if !s.contains(&relid) {
            s.push(relid);
        }
    });
}

#[pg_guard]
unsafe extern "C-unwind" fn on_xact(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    if SEEN.with(|s| s.borrow().is_empty()) {
        return;
    }
    match event {
        XACT_EVENT_PRE_COMMIT | XACT_EVENT_PARALLEL_PRE_COMMIT => {
            let seen = SEEN.with(|s| std::mem::take(&mut *s.borrow_mut()));
            // SAFETY: syscache look-ups, in the committing transaction.
            let seqs: Vec<pg_sys::Oid> = seen
                .into_iter()
                .filter(|&r| unsafe { pg_sys::get_rel_relkind(r) } == pg_sys::RELKIND_SEQUENCE as std::ffi::c_char)
                .filter(|&r| super::list::is_adopted(r))
                .collect();
            super::calls::refence(&seqs);
        }
        XACT_EVENT_COMMIT
        | XACT_EVENT_PARALLEL_COMMIT
        | XACT_EVENT_ABORT
        | XACT_EVENT_PARALLEL_ABORT
        | XACT_EVENT_PREPARE => SEEN.with(|s| s.borrow_mut().clear()),
        _ => {}
    }
}
