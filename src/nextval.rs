//! `snowflake_nextval()`: the generator, as SQL.

use crate::{errors, gucs, reservation, shmem};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use snowflake_id_core::{Attempt, Clock, Config, Events, GeneratorState, SystemClock};
use std::sync::atomic::Ordering;

/// Returns a new ID, unique and strictly greater than every ID this server
/// issued before, in any backend and any database.
///
/// Lock-free: one compare-and-swap on shared memory in the common case.
/// VOLATILE (every call differs) and PARALLEL SAFE (the state is in shared
/// memory, so parallel workers draw from the same generator).
///
/// Requires `shared_preload_libraries = 'snowflake_id'` and
/// `snowflake_id.worker_id` to be set; fails with SQLSTATE 55000 otherwise.
///
/// ```sql
/// CREATE TABLE orders (
///     id   bigint PRIMARY KEY DEFAULT snowflake_nextval(),
///     item text
/// );
/// INSERT INTO orders (item) VALUES ('book') RETURNING id;
/// SELECT snowflake_nextval() FROM generate_series(1, 3);
/// ```
#[pg_extern(volatile, parallel_safe)]
pub fn snowflake_nextval() -> i64 {
    let Some(state) = shmem::state() else {
        errors::not_preloaded();
    };
    let layout = gucs::layout_or_error();
    let Some(worker) = gucs::worker_id() else {
        errors::worker_id_unset();
    };
    if worker > layout.max_worker() {
        errors::worker_out_of_range(worker, layout.max_worker());
    }
    let cfg = Config {
        layout,
        worker,
        max_lead_ms: gucs::max_lead_ms(),
    };
    let blocked = state.blocked.load(Ordering::Acquire);
    if blocked != 0 {
        let (msg, detail) = reservation::blocked_reason(blocked, &layout);
        errors::generation_blocked(msg, detail);
    }
    let mut ev = Events::default();
    let result = loop {
        match state.try_next(&cfg, &SystemClock, &mut ev) {
            Ok(Attempt::Issued(id)) => break Ok(id),
            Ok(Attempt::Wait(ms)) => sleep_ms(ms),
            Ok(Attempt::Reserve(upto_ms)) => {
                // Ahead of the durable reservation: wait on the renewal
                // lock (sleeping, not spinning) and renew it unless
                // someone else just did.
                let _guard = shmem::renewal_lock();
                if state.reserved_until_ms.load(Ordering::Acquire) < upto_ms {
                    reservation::renew_locked(state, &layout, upto_ms);
                }
            }
            Err(e) => break Err(e),
        }
    };
    if ev.step_back_ns.is_some() || ev.reanchored {
        report_clock_events(state, &ev);
    }
    match result {
        Ok(id) => id,
        Err(e) => errors::generator_error(e),
    }
}

/// Back-pressure: sleep on our latch, so that the wait is interruptible,
/// visible in pg_stat_activity, and ends if the postmaster dies.
fn sleep_ms(ms: u64) {
    // SAFETY: MyLatch is this backend's latch; WaitLatch/ResetLatch are the
    // standard way to sleep in a backend.
    unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
            ms as _,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
    pgrx::check_for_interrupts!();
}

fn report_clock_events(state: &GeneratorState, ev: &Events) {
    let now_ms = SystemClock.wall_ns().div_euclid(1_000_000);
    if !state.should_warn(now_ms) {
        return;
    }
    if let Some(ns) = ev.step_back_ns {
        errors::report(
            PgLogLevel::WARNING,
            PgSqlErrorCode::ERRCODE_WARNING,
            format!("system clock moved backwards by {:.3} s", ns as f64 / 1e9),
            Some("snowflake_nextval() continues from the last issued timestamp: IDs stay unique and increasing, and carry timestamps ahead of the clock until it catches up.".into()),
            Some("Check the time synchronisation of this server (NTP, chrony, the hypervisor)."),
        );
    }
    if ev.reanchored {
        errors::report(
            PgLogLevel::WARNING,
            PgSqlErrorCode::ERRCODE_WARNING,
            "snowflake_id re-anchored its reference clock",
            Some("IDs were further ahead of the clock than a burst can explain: the monotonic clock went backwards or snowflake_id.max_lead was lowered. Generation continues without waiting.".into()),
            None,
        );
    }
}
