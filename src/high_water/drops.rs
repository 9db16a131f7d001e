//! What dropping a database or the extension, and `CREATE DATABASE`, do
//! to the marks (issue 62). Drops are seen by PostgreSQL's object access
//! hook (`OAT_DROP`), after the drop's lock and permission checks, however
//! the drop comes (`DROP DATABASE`, `DROP EXTENSION`, `DROP SCHEMA …
//! CASCADE`, `DROP OWNED`); `CREATE DATABASE` by the utility hook, which
//! knows its template.
//!
//! - **A dropped database's IDs stay covered.** Its mark goes with it,
//!   and after `pg_upgrade` or a start without the state file only the
//!   other databases' marks say how far the IDs went. Before the drop,
//!   the server's reservation (above every ID it handed out) is carried
//!   into another database's mark: at once into the database the DROP
//!   runs in, where it has the extension; otherwise by the high-water
//!   launcher within a second ([`super::scan`]). Until then every state
//!   file and reservation record says a carry is pending, a restart
//!   makes it again, and `pg_upgrade` refuses to start the old cluster.
//! - **No drop of a mark nobody applied.** A database that lags (its
//!   marks of earlier starts not read) or holds a mark back cannot be
//!   dropped, nor its extension: 55000, until the launcher has read it
//!   or a superuser has decided.
//! - **A copy of an unread mark is not forgotten.** A database made by
//!   `CREATE DATABASE … TEMPLATE` of a held database holds its mark at
//!   once; a copy of one that lags lags until the launcher reads it.

use super::row::{self, Open, Table};
use super::{key, next_target};
use crate::errors;
use crate::gucs;
use crate::mint::{reservation, shmem, worker};
use crate::utility_hook::standard_ProcessUtility;
use pgrx::pg_sys;
use snowflake_id_core::{Clock, SystemClock};
use std::sync::atomic::Ordering;

static mut PREV_UTILITY: pg_sys::ProcessUtility_hook_type = None;
static mut PREV_ACCESS: pg_sys::object_access_hook_type = None;

/// Install the hooks: in the postmaster, at preload.
pub fn init() {
    // SAFETY: installed once, in _PG_init of the postmaster, before any
    // backend exists; the previous hooks are kept and called.
    unsafe {
        PREV_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(utility);
        PREV_ACCESS = pg_sys::object_access_hook;
        pg_sys::object_access_hook = Some(access);
    }
}

/// The object access hook: a database, or this database's snowflake_id
/// extension, about to be dropped (its lock taken, its owner checked).
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn access(
    kind: pg_sys::ObjectAccessType::Type,
    class: pg_sys::Oid,
    object: pg_sys::Oid,
    sub: std::ffi::c_int,
    arg: *mut std::ffi::c_void,
) {
    // SAFETY: the previous hook, with PostgreSQL's arguments; then
    // catalog lookups in a backend.
    unsafe {
        if let Some(prev) = PREV_ACCESS {
            prev(kind, class, object, sub, arg);
        }
        // pg_upgrade's new cluster drops and makes databases while it
        // restores them: nothing is minted there, and no mark is read.
        if kind != pg_sys::ObjectAccessType::OAT_DROP
            || shmem::tracking().is_none()
            || shmem::in_recovery()
            || shmem::binary_upgrade()
        {
            return;
        }
        if class == pg_sys::DatabaseRelationId {
            before_drop(object, "drop the database", true);
        } else if class == pg_sys::ExtensionRelationId
            && object == pg_sys::get_extension_oid(c"snowflake_id".as_ptr(), true)
        {
            before_drop(pg_sys::MyDatabaseId, "drop the extension", false);
        }
    }
}

/// The utility hook: the next hook or the standard one, then, for a
/// `CREATE DATABASE`, [`after`] (guarded).
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn utility(
    pstmt: *mut pg_sys::PlannedStmt,
    query_string: *const std::ffi::c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    // SAFETY: the statement PostgreSQL passes, read only; then the next
    // hook or the standard one.
    unsafe {
        let stmt = (*pstmt).utilityStmt;
        let created = !stmt.is_null() && (*stmt).type_ == pg_sys::NodeTag::T_CreatedbStmt;
        let next = PREV_UTILITY.unwrap_or(standard_ProcessUtility);
        next(
            pstmt,
            query_string,
            read_only_tree,
            context,
            params,
            query_env,
            dest,
            qc,
        );
        if created {
            after(pstmt);
        }
    }
}

/// After a `CREATE DATABASE`: see [`after_create`].
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn after(pstmt: *mut pg_sys::PlannedStmt) {
    // SAFETY: reading the statement's node and its options.
    unsafe {
        if shmem::tracking().is_none() || shmem::binary_upgrade() {
            return;
        }
        let stmt = (*pstmt).utilityStmt as *mut pg_sys::CreatedbStmt;
        let options = (*stmt).options;
        // `TEMPLATE = name`; `TEMPLATE DEFAULT` has no argument.
        let template = (0..pg_sys::list_length(options))
            .map(|i| pg_sys::list_nth(options, i) as *mut pg_sys::DefElem)
            .find(|&d| std::ffi::CStr::from_ptr((*d).defname) == c"template")
            .filter(|&d| !(*d).arg.is_null())
            .map_or(c"template1".as_ptr(), |d| pg_sys::defGetString(d));
        let template = pg_sys::get_database_oid(template, true);
        let created = pg_sys::get_database_oid((*stmt).dbname, true);
        if template != pg_sys::InvalidOid && created != pg_sys::InvalidOid {
            after_create(template, created);
        }
    }
}

/// Before a drop of database `oid`'s mark: refuse where it was never
/// applied; else carry the server's reservation into another mark.
fn before_drop(oid: pg_sys::Oid, what: &str, whole_database: bool) {
    let (Some(t), Some(state), Ok(layout)) = (shmem::tracking(), shmem::state(), gucs::layout())
    else {
        return;
    };
    if worker::current_worker_id().is_none() {
        return;
    }
    // A database is unread while the start-up read runs, too (the red-team
    // review of issue 62: dropped before the read reached it, its mark
    // was never applied).
    let lags = !t.mark_ready.load(Ordering::Acquire)
        || t.lag_all.load(Ordering::Acquire)
        || t.lagging.contains(oid.to_u32());
    let holds = t.held.contains(oid.to_u32());
    if snowflake_id_core::starts::refuse_drop(lags, holds) {
        errors::drop_unread(
            what,
            if holds {
                "held back"
            } else {
                "not read since start-up"
            },
        );
    }
    // Above every ID handed out and every mark applied: the generator's
    // frontier (the clock at least), its reservation, the marks written
    // and found.
    let clock = SystemClock;
    let want = state
        .frontier_ms(&layout, clock.wall_ns(), clock.mono_ns())
        .max(state.reserved_until_ms.load(Ordering::Acquire))
        .max(t.mark_tried_ms.load(Ordering::Acquire))
        .max(t.mark_found_ms.load(Ordering::Acquire));
    t.carry_wanted_ms.fetch_max(want, Ordering::AcqRel);
    if t.carried_into.load(Ordering::Acquire) == oid.to_u32() {
        // The mark it was carried into goes: carry it again.
        t.carried_ms.store(i64::MIN, Ordering::Release);
    }
    // SAFETY: reading this backend's database.
    let here = unsafe { pg_sys::MyDatabaseId };
    if whole_database && here != oid && carry_here(t, state, &layout, want) {
        t.carried_into.store(here.to_u32(), Ordering::Release);
        t.carried_ms.fetch_max(want, Ordering::AcqRel);
        return;
    }
    reservation::persist(state, &layout, i64::MIN);
    super::scan::set_launcher_latch(t);
}

/// Raise this database's mark to at least `want`, if it has the table:
/// whether it was carried.
fn carry_here(
    t: &shmem::Tracking,
    state: &snowflake_id_core::GeneratorState,
    layout: &snowflake_id_core::Layout,
    want: i64,
) -> bool {
    let Some(worker) = worker::current_worker_id() else {
        return false;
    };
    if row::table_oid().is_none() {
        return false;
    }
    let key = key(layout, worker);
    row::with_lock_timeout(|| {
        let table = match Table::open(pg_sys::RowExclusiveLock) {
            Open::Opened(table) => table,
            Open::Missing | Open::Locked => return false,
        };
        let target = next_target(t, state, layout, want).max(want);
        let stamp = t.started_at.load(Ordering::Acquire);
        table
            .raise_or_insert(&key, target, stamp)
            .is_some_and(|m| m >= want)
    })
}

/// After `CREATE DATABASE … TEMPLATE`: a copy of a held database holds
/// its template's mark at once (its backends would find it held); a
/// copy of one that lags lags until the launcher reads it (its marks are
/// the template's, which nobody applied); a copy of any other has
/// nothing to read, and can be dropped at once.
fn after_create(template: pg_sys::Oid, created: pg_sys::Oid) {
    let (Some(t), Some(state), Ok(layout)) = (shmem::tracking(), shmem::state(), gucs::layout())
    else {
        return;
    };
    let from = template.to_u32();
    if let Some(mark) = t.held.mark_of(from) {
        if !t.held.hold(created.to_u32(), mark) {
            // No slot: its backends hold it themselves.
            t.held_overflow.store(true, Ordering::Release);
        }
    } else if t.lag_all.load(Ordering::Acquire)
        || t.lagging.contains(from)
        || t.held_overflow.load(Ordering::Acquire)
    {
        if !t.lagging.insert(created.to_u32()) {
            t.lag_all.store(true, Ordering::Release);
        }
    } else {
        return;
    }
    reservation::persist(state, &layout, i64::MIN);
}
