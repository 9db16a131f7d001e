//! What `DROP DATABASE`, `DROP EXTENSION snowflake_id` and `CREATE
//! DATABASE` do to the marks (issue 62).
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
//! - **A copy of an unread mark lags.** A database made by `CREATE
//!   DATABASE … TEMPLATE` of a database that lags or holds a mark holds
//!   marks nobody applied: it lags until the launcher reads it, and its
//!   own backends apply them first.

use super::row::{self, Open, Table};
use super::{key, next_target};
use crate::errors;
use crate::gucs;
use crate::mint::{reservation, shmem, worker};
use crate::utility_hook::standard_ProcessUtility;
use pgrx::pg_sys;
use std::sync::atomic::Ordering;

static mut PREV_UTILITY: pg_sys::ProcessUtility_hook_type = None;

/// Install the hook: in the postmaster, at preload.
pub fn init() {
    // SAFETY: installed once, in _PG_init of the postmaster, before any
    // backend exists; the previous hook is kept and called.
    unsafe {
        PREV_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(utility);
    }
}

/// The hook: [`before`] (guarded), the next hook or the standard one,
/// then [`after`] (guarded) for a `CREATE DATABASE`.
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
        let created = before(pstmt);
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

/// Before the statement: a drop's checks and carry. Returns whether it
/// is a `CREATE DATABASE`.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn before(pstmt: *mut pg_sys::PlannedStmt) -> bool {
    // SAFETY: reading the statement's nodes.
    unsafe {
        let stmt = (*pstmt).utilityStmt;
        if stmt.is_null() || shmem::tracking().is_none() || shmem::in_recovery() {
            return false;
        }
        match (*stmt).type_ {
            pg_sys::NodeTag::T_DropdbStmt => {
                let name = (*(stmt as *mut pg_sys::DropdbStmt)).dbname;
                let oid = pg_sys::get_database_oid(name, true);
                if oid != pg_sys::InvalidOid {
                    before_drop(oid, "drop the database", true);
                }
                false
            }
            pg_sys::NodeTag::T_DropStmt => {
                let drop = stmt as *mut pg_sys::DropStmt;
                if (*drop).removeType == pg_sys::ObjectType::OBJECT_EXTENSION
                    && names_us((*drop).objects)
                {
                    before_drop(pg_sys::MyDatabaseId, "drop the extension", false);
                }
                false
            }
            pg_sys::NodeTag::T_CreatedbStmt => true,
            _ => false,
        }
    }
}

/// After a `CREATE DATABASE`: see [`after_create`].
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn after(pstmt: *mut pg_sys::PlannedStmt) {
    // SAFETY: reading the statement's node.
    unsafe {
        let stmt = (*pstmt).utilityStmt as *mut pg_sys::CreatedbStmt;
        let options = (*stmt).options;
        let template = (0..pg_sys::list_length(options))
            .map(|i| pg_sys::list_nth(options, i) as *mut pg_sys::DefElem)
            .find(|&d| std::ffi::CStr::from_ptr((*d).defname) == c"template")
            .map_or(c"template1".as_ptr(), |d| pg_sys::defGetString(d));
        let template = pg_sys::get_database_oid(template, true);
        let created = pg_sys::get_database_oid((*stmt).dbname, true);
        if template != pg_sys::InvalidOid && created != pg_sys::InvalidOid {
            after_create(template, created);
        }
    }
}

/// Whether a `DROP EXTENSION` list names snowflake_id.
///
/// # Safety
/// `objects` is the statement's list of `String` nodes.
unsafe fn names_us(objects: *mut pg_sys::List) -> bool {
    // SAFETY: iterating a node list of the statement.
    unsafe {
        (0..pg_sys::list_length(objects)).any(|i| {
            let node = pg_sys::list_nth(objects, i) as *mut pg_sys::Node;
            !node.is_null()
                && (*node).type_ == pg_sys::NodeTag::T_String
                && std::ffi::CStr::from_ptr((*(node as *mut pg_sys::String)).sval)
                    == c"snowflake_id"
        })
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
    let lags = t.lag_all.load(Ordering::Acquire) || t.lagging.contains(oid.to_u32());
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
    let want = state
        .reserved_until_ms
        .load(Ordering::Acquire)
        .max(t.mark_tried_ms.load(Ordering::Acquire));
    if want == i64::MIN {
        return;
    }
    t.carry_wanted_ms.fetch_max(want, Ordering::AcqRel);
    // SAFETY: reading this backend's database.
    let here = unsafe { pg_sys::MyDatabaseId };
    if whole_database && here != oid && carry_here(t, state, &layout, want) {
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

/// After `CREATE DATABASE … TEMPLATE`: a copy of a database that lags or
/// holds a mark lags until the launcher reads it (its marks are the
/// template's, which nobody applied); a copy of any other has nothing to
/// read, and can be dropped at once.
fn after_create(template: pg_sys::Oid, created: pg_sys::Oid) {
    let (Some(t), Some(state), Ok(layout)) = (shmem::tracking(), shmem::state(), gucs::layout())
    else {
        return;
    };
    let from = template.to_u32();
    let unread = t.lag_all.load(Ordering::Acquire)
        || t.lagging.contains(from)
        || t.held.contains(from)
        || t.held_overflow.load(Ordering::Acquire);
    if !unread {
        return;
    }
    if !t.lagging.insert(created.to_u32()) {
        t.lag_all.store(true, Ordering::Release);
    }
    reservation::persist(state, &layout, i64::MIN);
}
