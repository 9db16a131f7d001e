//! The anchor of adopted sequences on stock PostgreSQL: a planner hook
//! that puts [`super::calls`]' functions in place of `nextval`,
//! `currval`, `setval` and `lastval` in every statement planned in a
//! database that has adopted sequences.
//!
//! PostgreSQL has no hook in `nextval()` itself, but every statement's
//! expressions reach the planner: plain SQL, prepared statements,
//! PL/pgSQL (its simple expressions too), SQL functions, views, rules and
//! the column defaults the rewriter adds to an `INSERT`. The hook swaps
//! the function of each such call in place (same arguments, same result
//! type), so the plan, EXPLAIN aside, is the one PostgreSQL made.
//!
//! Cost: a database without adopted sequences (or without the extension)
//! pays one backend-local flag test per planned statement; one with them
//! a walk of the statement's tree. Which sequences are adopted is read
//! once per backend from `snowflake_id_internal.snowflake_adopted`, as
//! the table's owner, and read again after an invalidation of that table,
//! which every change of it sends (`snowflake_id_internal.adopt_changed()`);
//! the same invalidation drops every cached plan of the backend, so no
//! plan made before an adoption outlives it.

use crate::convert::as_owner;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;

/// The functions that take the built-ins' places.
#[derive(Clone, Copy)]
struct Fns {
    nextval: pg_sys::Oid,
    currval: pg_sys::Oid,
    setval: pg_sys::Oid,
    setval3: pg_sys::Oid,
    lastval: pg_sys::Oid,
}

/// What this backend knows of its database's adopted sequences.
enum Known {
    /// To be read (at start, and after an invalidation).
    Unknown,
    /// No extension (of a version with adoption) in this database.
    Absent,
    Loaded {
        adopted: HashSet<pg_sys::Oid>,
        fns: Fns,
    },
}

thread_local! {
    static KNOWN: RefCell<Known> = const { RefCell::new(Known::Unknown) };
    /// Set while the table is being read: its own statement is planned
    /// without the hook's work.
    static LOADING: Cell<bool> = const { Cell::new(false) };
    /// The table's OID once read, for the invalidation callback.
    static TABLE: Cell<pg_sys::Oid> = const { Cell::new(pg_sys::Oid::INVALID) };
}

static mut PREV_PLANNER: pg_sys::planner_hook_type = None;
static mut PREV_NEEDS_FMGR: pg_sys::needs_fmgr_hook_type = None;
static mut PREV_UTILITY: pg_sys::ProcessUtility_hook_type = None;

/// `pg_language` OID of SQL (fixed in the catalog's initial data).
const SQL_LANGUAGE_ID: u32 = 14;

/// Install the hook and the invalidation callbacks: in the postmaster, at
/// preload (every backend inherits them).
pub fn init() {
    // SAFETY: hooks and callbacks are installed once, in _PG_init of the
    // postmaster, before any backend exists.
    unsafe {
        PREV_PLANNER = pg_sys::planner_hook;
        pg_sys::planner_hook = Some(planner);
        PREV_NEEDS_FMGR = pg_sys::needs_fmgr_hook;
        pg_sys::needs_fmgr_hook = Some(needs_fmgr);
        PREV_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(utility);
        pg_sys::CacheRegisterRelcacheCallback(Some(relcache_changed), pg_sys::Datum::from(0));
        pg_sys::CacheRegisterSyscacheCallback(
            pg_sys::SysCacheIdentifier::NAMESPACEOID as _,
            Some(schema_changed),
            pg_sys::Datum::from(0),
        );
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn relcache_changed(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    let table = TABLE.with(|t| t.get());
    if relid == pg_sys::Oid::INVALID || (relid == table && table != pg_sys::Oid::INVALID) {
        KNOWN.with(|k| *k.borrow_mut() = Known::Unknown);
        if relid == table {
            // Plans made before the change may hold calls the hook would
            // now swap (or swapped calls it would not): plan them again.
            // SAFETY: marks every cached plan of this backend invalid, as
            // PostgreSQL's own invalidation callbacks do.
            unsafe { pg_sys::ResetPlanCache() };
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn schema_changed(_arg: pg_sys::Datum, _cacheid: i32, _hash: u32) {
    // A schema created or dropped: maybe the extension's. Only an absent
    // extension needs looking for again; a loaded one hears of its table.
    KNOWN.with(|k| {
        if matches!(&*k.borrow(), Known::Absent) {
            *k.borrow_mut() = Known::Unknown;
        }
    });
}

/// Read the table (as its owner) into [`KNOWN`].
fn load() {
    if LOADING.with(|l| l.get()) {
        return;
    }
    // SAFETY: catalog look-ups by name, in a transaction.
    let table = unsafe {
        if !pg_sys::IsTransactionState() {
            return;
        }
        let ns = pg_sys::get_namespace_oid(c"snowflake_id_internal".as_ptr(), true);
        if ns == pg_sys::Oid::INVALID {
            pg_sys::Oid::INVALID
        } else {
            pg_sys::get_relname_relid(c"snowflake_adopted".as_ptr(), ns)
        }
    };
    if table == pg_sys::Oid::INVALID {
        KNOWN.with(|k| *k.borrow_mut() = Known::Absent);
        return;
    }
    TABLE.with(|t| t.set(table));
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            LOADING.with(|l| l.set(false));
        }
    }
    LOADING.with(|l| l.set(true));
    let _reset = Reset;
    // The table's owner is the extension's: a superuser. Its statement
    // names only the extension's own objects, with every name qualified.
    let owner = as_owner::owner_of(table);
    let row = as_owner::with_role(owner, || {
        Spi::connect(|client| {
            let t = client.select(
                "SELECT (SELECT pg_catalog.array_agg(a.seq::pg_catalog.oid) FROM snowflake_id_internal.snowflake_adopted a),
                        'snowflake_id_internal.seq_nextval(pg_catalog.regclass)'::pg_catalog.regprocedure::pg_catalog.oid,
                        'snowflake_id_internal.seq_currval(pg_catalog.regclass)'::pg_catalog.regprocedure::pg_catalog.oid,
                        'snowflake_id_internal.seq_setval(pg_catalog.regclass, bigint)'::pg_catalog.regprocedure::pg_catalog.oid,
                        'snowflake_id_internal.seq_setval(pg_catalog.regclass, bigint, boolean)'::pg_catalog.regprocedure::pg_catalog.oid,
                        'snowflake_id_internal.seq_lastval()'::pg_catalog.regprocedure::pg_catalog.oid",
                None,
                &[],
            )?;
            let r = t.first();
            Ok::<_, pgrx::spi::Error>((
                r.get::<Vec<pg_sys::Oid>>(1)?.unwrap_or_default(),
                [
                    r.get::<pg_sys::Oid>(2)?,
                    r.get::<pg_sys::Oid>(3)?,
                    r.get::<pg_sys::Oid>(4)?,
                    r.get::<pg_sys::Oid>(5)?,
                    r.get::<pg_sys::Oid>(6)?,
                ],
            ))
        })
    });
    let (list, f) = match row {
        Ok(x) => x,
        Err(e) => crate::errors::adopt_read_failed(&e.to_string()),
    };
    let oid = |o: Option<pg_sys::Oid>| o.unwrap_or(pg_sys::Oid::INVALID);
    let fns = Fns {
        nextval: oid(f[0]),
        currval: oid(f[1]),
        setval: oid(f[2]),
        setval3: oid(f[3]),
        lastval: oid(f[4]),
    };
    KNOWN.with(|k| {
        *k.borrow_mut() = Known::Loaded {
            adopted: list.into_iter().collect(),
            fns,
        }
    });
}

/// The swaps to make in this database's statements, if any.
fn active() -> Option<Fns> {
    if KNOWN.with(|k| matches!(&*k.borrow(), Known::Unknown)) {
        load();
    }
    KNOWN.with(|k| match &*k.borrow() {
        Known::Loaded { adopted, fns, .. } if !adopted.is_empty() => Some(*fns),
        _ => None,
    })
}

/// Whether `seq` is adopted in this database.
pub fn is_adopted(seq: pg_sys::Oid) -> bool {
    if KNOWN.with(|k| matches!(&*k.borrow(), Known::Unknown)) {
        load();
    }
    KNOWN.with(|k| matches!(&*k.borrow(), Known::Loaded { adopted, .. } if adopted.contains(&seq)))
}

#[pg_guard]
unsafe extern "C-unwind" fn planner(
    parse: *mut pg_sys::Query,
    query_string: *const std::ffi::c_char,
    cursor_options: std::ffi::c_int,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    if !LOADING.with(|l| l.get()) {
        if let Some(fns) = active() {
            let mut f = fns;
            // SAFETY: the planner's own input, which it may scribble on.
            unsafe { swap(parse.cast(), (&raw mut f).cast()) };
        }
    }
    // SAFETY: the next hook or the standard planner, with our arguments.
    unsafe {
        match PREV_PLANNER {
            Some(prev) => prev(parse, query_string, cursor_options, bound_params),
            None => pg_sys::standard_planner(parse, query_string, cursor_options, bound_params),
        }
    }
}

/// `CALL p(nextval('s'))`: a procedure's arguments are evaluated without
/// a plan, so the hook swaps them in the statement (in a copy where the
/// tree is the plan cache's own).
#[allow(clippy::too_many_arguments)]
#[pg_guard]
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
    let mut pstmt = pstmt;
    let mut read_only_tree = read_only_tree;
    // SAFETY: the statement PostgreSQL passes; copied before any change
    // where it is read-only, as utility.c itself does.
    unsafe {
        let stmt = (*pstmt).utilityStmt;
        if !stmt.is_null()
            && (*stmt).type_ == pg_sys::NodeTag::T_CallStmt
            && !LOADING.with(|l| l.get())
        {
            if let Some(fns) = active() {
                if read_only_tree {
                    pstmt = pg_sys::copyObjectImpl(pstmt.cast()).cast();
                    read_only_tree = false;
                }
                let call = (*pstmt).utilityStmt as *mut pg_sys::CallStmt;
                let mut f = fns;
                swap((*call).funcexpr.cast(), (&raw mut f).cast());
            }
        }
        match PREV_UTILITY {
            Some(prev) => prev(
                pstmt,
                query_string,
                read_only_tree,
                context,
                params,
                query_env,
                dest,
                qc,
            ),
            None => pg_sys::standard_ProcessUtility(
                pstmt,
                query_string,
                read_only_tree,
                context,
                params,
                query_env,
                dest,
                qc,
            ),
        }
    }
}

/// The planner inlines a simple SQL function's body into the statement
/// after the hook has walked it: such a body's `nextval()` would escape.
/// PostgreSQL does not inline a function that a plugin hooks
/// (`FmgrHookIsNeeded`), so in a database with adopted sequences every
/// SQL function whose body may call one of the four is hooked (by
/// `fmgr_security_definer`, with no hook of ours to run): it runs as a
/// function, and its statements are planned, and swapped, on their own.
/// Elsewhere this is one flag test per function a statement looks up.
#[pg_guard]
unsafe extern "C-unwind" fn needs_fmgr(fn_oid: pg_sys::Oid) -> bool {
    // SAFETY: the previous hook, with our argument.
    if let Some(prev) = unsafe { PREV_NEEDS_FMGR } {
        if unsafe { prev(fn_oid) } {
            return true;
        }
    }
    if LOADING.with(|l| l.get()) || active().is_none() {
        return false;
    }
    sql_body_may_call_sequences(fn_oid)
}

/// Whether `f` is an SQL function whose body names `nextval`, `currval`,
/// `setval` or `lastval` (a `BEGIN ATOMIC` body: always, conservatively).
fn sql_body_may_call_sequences(f: pg_sys::Oid) -> bool {
    // SAFETY: a syscache look-up and release; the tuple is a pg_proc row
    // and its attributes are read while it is held.
    unsafe {
        let tup = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::PROCOID as _,
            pg_sys::Datum::from(f),
        );
        if tup.is_null() {
            return false;
        }
        let form = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_proc>(tup);
        let mut found = false;
        if (*form).prolang.to_u32() == SQL_LANGUAGE_ID {
            let mut isnull = false;
            pg_sys::SysCacheGetAttr(
                pg_sys::SysCacheIdentifier::PROCOID as _,
                tup,
                pg_sys::Anum_pg_proc_prosqlbody as _,
                &mut isnull,
            );
            if !isnull {
                found = true;
            } else {
                let src = pg_sys::SysCacheGetAttr(
                    pg_sys::SysCacheIdentifier::PROCOID as _,
                    tup,
                    pg_sys::Anum_pg_proc_prosrc as _,
                    &mut isnull,
                );
                if !isnull {
                    let c = pg_sys::text_to_cstring(src.cast_mut_ptr());
                    let body = std::ffi::CStr::from_ptr(c)
                        .to_string_lossy()
                        .to_ascii_lowercase();
                    pg_sys::pfree(c.cast());
                    found = ["nextval", "currval", "setval", "lastval"]
                        .iter()
                        .any(|w| body.contains(w));
                }
            }
        }
        pg_sys::ReleaseSysCache(tup);
        found
    }
}

/// The walker: every query and expression of the statement, subqueries,
/// CTEs and sublinks included; each `FuncExpr` of the four functions gets
/// its replacement's OID.
#[pg_guard]
unsafe extern "C-unwind" fn swap(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: nodes of a query tree; `ctx` is the `Fns` of `planner`.
    unsafe {
        match (*node).type_ {
            pg_sys::NodeTag::T_Query => {
                return pg_sys::query_tree_walker(node.cast(), Some(swap), ctx, 0);
            }
            pg_sys::NodeTag::T_FuncExpr => {
                let f = &*(ctx as *const Fns);
                let e = node as *mut pg_sys::FuncExpr;
                let to = match (*e).funcid.to_u32() {
                    pg_sys::F_NEXTVAL => f.nextval,
                    pg_sys::F_CURRVAL => f.currval,
                    pg_sys::F_SETVAL_REGCLASS_INT8 => f.setval,
                    pg_sys::F_SETVAL_REGCLASS_INT8_BOOL => f.setval3,
                    pg_sys::F_LASTVAL => f.lastval,
                    _ => pg_sys::Oid::INVALID,
                };
                if to != pg_sys::Oid::INVALID {
                    (*e).funcid = to;
                }
            }
            _ => {}
        }
        pg_sys::expression_tree_walker(node, Some(swap), ctx)
    }
}
