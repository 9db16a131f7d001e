//! Observability and administration: `snowflake_stats()` and
//! `snowflake_accept_configuration()`.

use crate::high_water;
use crate::mint::{reservation, shmem, worker};
use crate::read::decode;
use crate::{errors, gucs};
use pgrx::prelude::*;
use pgrx::{pg_sys, PgLogLevel, PgSqlErrorCode};
use snowflake_id_core::{Clock, SystemClock};
use std::sync::atomic::Ordering;

use crate::read::decode::unix_ms_to_timestamptz as tstz;

/// One row describing this server's generator. Every counter covers the
/// time since shared memory was created (server start or crash restart).
///
/// | column | meaning |
/// |---|---|
/// | `worker_id` | `snowflake_id.worker_id`, NULL while unset |
/// | `epoch` | the epoch of the layout |
/// | `timestamp_bits`, `worker_bits`, `sequence_bits` | the layout |
/// | `max_lead_ms` | `snowflake_id.max_lead` |
/// | `last_id` | the last ID issued by any backend (NULL if none yet), or a value just above it that was never handed out (the fast path's addition in a race with a new millisecond); after a restart, or on a standby replaying reservations, the floor the server continues above |
/// | `last_id_time` | its timestamp |
/// | `lead_ms` | `last_id_time` minus the wall clock now; positive when IDs run ahead (bursts, clock steps, the jump after a restart) |
/// | `reserved_until` | the durable reservation: no ID with a later timestamp has been issued |
/// | `sequence_overflows` | times a millisecond's sequence ran out and the next millisecond was borrowed |
/// | `clock_steps_back` | backward steps of the wall clock detected |
/// | `largest_step_back_ms` | the largest of them |
/// | `backpressure_waits` | sleeps because IDs were `max_lead` ahead of the clock (not a `snowflake_nextval(count)` call waiting at its `bulk_lead_share`) |
/// | `reservation_waits` | calls that had to wait for the reservation to be extended |
/// | `reservations_written` | durable reservation writes (each an fsync of the state file and a flushed WAL record) |
/// | `state` | `ok`, `worker_id unset`, `no worker id leased`, `standby: in recovery`, or why generation is disabled |
/// | `worker_id_source` | `static` or `registry` (`snowflake_id.worker_id_source`) |
/// | `lease_worker_id` | the worker id leased from the registry, NULL while none is held (and with a static worker id) |
/// | `lease_expires` | when the lease runs out unless renewed (this server's clock) |
/// | `lease_reserved_until` | the lease's reservation in the registry: no ID under it carries a later timestamp |
/// | `registry_errors` | requests to the registry that failed since start-up |
/// | `registry_last_error` | the last failure, NULL once a request succeeds again |
/// | `old_version_databases` | databases found since start-up with the extension at a version before 0.8.0, which hold no high-water mark (each is named in the log; run `ALTER EXTENSION snowflake_id UPDATE` there) |
///
/// ```sql
/// SELECT worker_id, last_id, lead_ms, reserved_until, clock_steps_back
///   FROM snowflake_stats();
/// SELECT worker_id_source, lease_worker_id, lease_expires, registry_last_error
///   FROM snowflake_stats();
/// ```
#[pg_extern(volatile, parallel_safe)]
#[allow(clippy::type_complexity)]
pub fn snowflake_stats() -> TableIterator<
    'static,
    (
        name!(worker_id, Option<i32>),
        name!(epoch, Option<TimestampWithTimeZone>),
        name!(timestamp_bits, i32),
        name!(worker_bits, i32),
        name!(sequence_bits, i32),
        name!(max_lead_ms, i32),
        name!(last_id, Option<i64>),
        name!(last_id_time, Option<TimestampWithTimeZone>),
        name!(lead_ms, Option<f64>),
        name!(reserved_until, Option<TimestampWithTimeZone>),
        name!(sequence_overflows, i64),
        name!(clock_steps_back, i64),
        name!(largest_step_back_ms, f64),
        name!(backpressure_waits, i64),
        name!(reservation_waits, i64),
        name!(reservations_written, i64),
        name!(state, String),
        name!(worker_id_source, String),
        name!(lease_worker_id, Option<i32>),
        name!(lease_expires, Option<TimestampWithTimeZone>),
        name!(lease_reserved_until, Option<TimestampWithTimeZone>),
        name!(registry_errors, i64),
        name!(registry_last_error, Option<String>),
        name!(old_version_databases, i32),
    ),
> {
    let Some(st) = shmem::state() else {
        errors::not_preloaded();
    };
    let layout = decode::layout();
    let wall_ns = SystemClock.wall_ns();
    let last = st.last_issued();
    let last_ms = last.map(|id| layout.epoch_ms() + layout.timestamp_of(id as u64) as i64);
    let reserved = st.reserved_until_ms.load(Ordering::Acquire);
    let c = &st.counters;
    let blocked = st.blocked.load(Ordering::Acquire);
    let state = match blocked & reservation::BLOCKED_MASK {
        reservation::BLOCKED_CONFIG_CHANGED => "disabled: configuration changed".to_string(),
        reservation::BLOCKED_STATE_FILE => "disabled: state file unusable".to_string(),
        reservation::BLOCKED_FOREIGN_FILE => "disabled: state file of another cluster".to_string(),
        reservation::BLOCKED_FAR_MARK => {
            "disabled: high-water mark far ahead of the clock".to_string()
        }
        _ if high_water::held_marks().1 => {
            "disabled: high-water mark far ahead of the clock".to_string()
        }
        _ if shmem::in_recovery() => "standby: in recovery".to_string(),
        _ if worker::current_worker_id().is_none() && gucs::leased() => {
            "no worker id leased".to_string()
        }
        _ if worker::current_worker_id().is_none() => "worker_id unset".to_string(),
        _ if shmem::tracking().is_some_and(|t| !t.mark_ready.load(Ordering::Acquire)) => {
            "waiting for the high-water mark".to_string()
        }
        _ if high_water::held_marks().0 => {
            "ok; another database holds a high-water mark far ahead of the clock".to_string()
        }
        _ if high_water::this_database_lags() => {
            "ok; some databases' high-water marks are still being read".to_string()
        }
        _ => "ok".to_string(),
    };
    let l = worker::stats();
    TableIterator::once((
        worker::current_worker_id().map(|w| w as i32),
        tstz(layout.epoch_ms()),
        layout.timestamp_bits() as i32,
        layout.worker_bits() as i32,
        layout.sequence_bits() as i32,
        gucs::max_lead_ms() as i32,
        last,
        last_ms.and_then(tstz),
        last_ms.map(|ms| (ms * 1_000_000 - wall_ns) as f64 / 1e6),
        (reserved != i64::MIN && reserved != i64::MAX)
            .then(|| tstz(reserved))
            .flatten(),
        c.sequence_overflows.load(Ordering::Relaxed) as i64,
        c.clock_steps_back.load(Ordering::Relaxed) as i64,
        c.largest_step_back_ns.load(Ordering::Relaxed) as f64 / 1e6,
        c.backpressure_waits.load(Ordering::Relaxed) as i64,
        c.reservation_waits.load(Ordering::Relaxed) as i64,
        c.reservations_written.load(Ordering::Relaxed) as i64,
        state,
        if gucs::leased() { "registry" } else { "static" }.to_string(),
        l.as_ref().and_then(|l| l.worker),
        l.as_ref().and_then(|l| l.expires_ms).and_then(tstz),
        l.as_ref().and_then(|l| l.reserved_until_ms).and_then(tstz),
        l.as_ref().map_or(0, |l| l.errors),
        l.and_then(|l| l.last_error),
        shmem::tracking().map_or(0, |t| t.old_versions.len() as i32),
    ))
}

/// Superuser only. Accept the current configuration after a change that
/// could make new IDs smaller than old ones (a later epoch, narrower
/// fields), or after the state file was found unreadable or corrupt, or
/// apply a high-water mark held back for being more than 10 minutes
/// ahead of the clock (a restore, or a clock far behind: the generator
/// moves above it; refused with 22008 when the mark is at the layout's
/// end).
/// Rewrites the state file with the current configuration and re-enables
/// `snowflake_nextval()`. New IDs continue above the old reservation's
/// timestamp (or from the clock if the file was unusable), but with a
/// changed layout they are not guaranteed to be numerically larger than old
/// IDs: that is what is being accepted. EXECUTE is revoked from PUBLIC.
///
/// ```sql
/// SELECT snowflake_accept_configuration();
/// ```
#[pg_extern(volatile, parallel_unsafe)]
pub fn snowflake_accept_configuration() -> String {
    // SAFETY: plain catalog check of the current user.
    if !unsafe { pg_sys::superuser() } {
        errors::not_superuser();
    }
    let Some(st) = shmem::state() else {
        errors::not_preloaded();
    };
    crate::mint::nextval::refuse_during_recovery();
    let layout = decode::layout();
    if worker::current_worker_id().is_none() {
        worker::refuse_without_worker();
    }
    // The generator is above every database's high-water mark before
    // anything is minted again.
    high_water::wait_ready();
    let was = st.blocked.load(Ordering::Acquire) & reservation::BLOCKED_MASK;
    // A mark held back for being far ahead of the clock is applied here,
    // and only here (issue 46), unless it would exhaust the layout.
    let far = high_water::apply_held_marks(st, &layout);
    let from_marks = shmem::tracking()
        .map(|t| t.mark_found_ms.load(Ordering::Acquire))
        .filter(|&ms| ms != i64::MIN);
    let reserved =
        reservation::renew(st, &layout, i64::MIN, || true).expect("always renews when asked to");
    if let Some(t) = shmem::tracking() {
        let clock = SystemClock;
        high_water::establish_far_base(
            t,
            st.frontier_ms(&layout, clock.wall_ns(), clock.mono_ns()),
        );
    }
    st.blocked
        .fetch_and(!reservation::BLOCKED_MASK, Ordering::AcqRel);
    let what = match was {
        reservation::BLOCKED_CONFIG_CHANGED => "configuration change accepted",
        reservation::BLOCKED_STATE_FILE => "unusable state file replaced",
        reservation::BLOCKED_FOREIGN_FILE => "state file of another cluster accepted",
        reservation::BLOCKED_FAR_MARK => "high-water mark far ahead of the clock accepted",
        _ => "configuration already accepted",
    };
    let applied;
    let what = match far {
        Some(ms) if was == 0 => {
            applied = format!(
                "high-water mark far ahead of the clock accepted; {} applied",
                snowflake_id_core::format_epoch(ms)
            );
            applied.as_str()
        }
        Some(ms) if was != reservation::BLOCKED_FAR_MARK => {
            applied = format!(
                "{what}; high-water mark {} applied",
                snowflake_id_core::format_epoch(ms)
            );
            applied.as_str()
        }
        _ => what,
    };
    if was == reservation::BLOCKED_STATE_FILE && from_marks.is_none() {
        errors::report(
            PgLogLevel::WARNING,
            PgSqlErrorCode::ERRCODE_WARNING,
            "snowflake_id: accepted with no floor but the clock",
            Some("The state file was unusable and no database holds a high-water mark of this configuration: new IDs start from this server's clock, which may be behind the IDs issued before.".into()),
            Some("Raise the floor above any ID this server issued before with SELECT snowflake_raise_floor(id)."),
        );
        return format!(
            "{what}: no floor but the clock; state file \"{}\" rewritten, reserved until {}",
            crate::datadir::state_path(),
            snowflake_id_core::format_epoch(reserved)
        );
    }
    errors::report(
        PgLogLevel::LOG,
        PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
        format!("snowflake_id: {what} by a superuser"),
        None,
        None,
    );
    format!(
        "{what}; state file \"{}\" rewritten, reserved until {}",
        crate::datadir::state_path(),
        snowflake_id_core::format_epoch(reserved)
    )
}

#[allow(unused_imports)] // named in `requires` below
use crate::operate::floor::{snowflake_raise_floor, snowflake_raise_floor_from_data};

extension_sql_file!(
    "sql/revoke_admin.sql",
    name = "revoke_admin",
    requires = [
        snowflake_accept_configuration,
        snowflake_raise_floor,
        snowflake_raise_floor_from_data
    ]
);
