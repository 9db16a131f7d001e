//! One pair of (sub)transaction callbacks for the adopt room: what a
//! statement left in this backend's memory ([`super::copy`]'s swapped
//! cache entries, [`super::fill`]'s running fill) is put back when its
//! transaction or subtransaction aborts. Each registers a handler at
//! preload ([`on_abort`]).

use pgrx::pg_sys;
use pgrx::prelude::*;

static HANDLERS: std::sync::RwLock<Vec<fn(i32)>> = std::sync::RwLock::new(Vec::new());

/// Have an abort call `f` with the transaction nesting level it aborts
/// (0: the whole transaction; n: the subtransaction at level n and those
/// below it). At preload.
pub(super) fn on_abort(f: fn(i32)) {
    if let Ok(mut h) = HANDLERS.write() {
        h.push(f);
    }
}

/// Register the callbacks: in the postmaster, at preload.
pub(super) fn init() {
    // SAFETY: callbacks registered once, in _PG_init of the postmaster.
    unsafe {
        pg_sys::RegisterXactCallback(Some(xact_callback), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(subxact_callback), std::ptr::null_mut());
    }
}

fn aborted(level: i32) {
    if let Ok(h) = HANDLERS.read() {
        for f in h.iter() {
            f(level);
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn xact_callback(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    if event == pg_sys::XactEvent::XACT_EVENT_ABORT
        || event == pg_sys::XactEvent::XACT_EVENT_PARALLEL_ABORT
    {
        aborted(0);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn subxact_callback(
    event: pg_sys::SubXactEvent::Type,
    _my: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    if event == pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB {
        // SAFETY: the level of the subtransaction being aborted.
        aborted(unsafe { pg_sys::GetCurrentTransactionNestLevel() });
    }
}
