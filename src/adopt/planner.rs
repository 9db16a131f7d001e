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
//! Cost: a statement whose tree plainly holds nothing to swap pays a
//! look at its nodes ([`super::walk::clean`]); any other, in a database
//! without adopted sequences (or without the extension), one
//! backend-local flag test; in one with them, a walk of the statement's
//! tree ([`super::walk::swap`]). Which
//! sequences are adopted is [`super::list`]'s. Operators whose function
//! is one of the four are swapped too; `CALL`'s arguments, evaluated
//! without a plan, are swapped in [`super::utility`]'s hook, which also
//! makes `DISCARD` forget the session's values.

use super::list::{self, Fns};
use super::walk::{mentions, swap};
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::RefCell;

static mut PREV_PLANNER: pg_sys::planner_hook_type = None;
static mut PREV_NEEDS_FMGR: pg_sys::needs_fmgr_hook_type = None;

/// `pg_language` OID of SQL (fixed in the catalog's initial data).
const SQL_LANGUAGE_ID: u32 = 14;

/// Install the planner's hooks and the invalidation callback of function
/// bodies: in the postmaster, at preload (every backend inherits them).
pub(super) fn init() {
    // SAFETY: hooks and callbacks are installed once, in _PG_init of the
    // postmaster, before any backend exists.
    unsafe {
        PREV_PLANNER = pg_sys::planner_hook;
        pg_sys::planner_hook = Some(planner);
        PREV_NEEDS_FMGR = pg_sys::needs_fmgr_hook;
        pg_sys::needs_fmgr_hook = Some(needs_fmgr);
        pg_sys::CacheRegisterSyscacheCallback(
            pg_sys::SysCacheIdentifier::PROCOID as _,
            Some(proc_changed),
            pg_sys::Datum::from(0),
        );
    }
    // A relation made, changed or dropped may be a view that a
    // set-returning function's body reads (`parsed_body_may_reach`).
    list::also_on_relcache(relation_changed);
}

/// A relation's relcache entry was invalidated (called from
/// [`super::list`]'s one relcache callback).
fn relation_changed(_relid: pg_sys::Oid) {
    BODIES.with(|b| b.borrow_mut().clear());
}

unsafe extern "C-unwind" {
    /// PostgreSQL's planner, called unguarded (see
    /// `walk::raw`).
    fn standard_planner(
        parse: *mut pg_sys::Query,
        query_string: *const std::ffi::c_char,
        cursor_options: std::ffi::c_int,
        bound_params: pg_sys::ParamListInfo,
    ) -> *mut pg_sys::PlannedStmt;
}

/// The planner hook: our swap (guarded), then the next planner, unguarded
/// (see `walk::raw`).
unsafe extern "C-unwind" fn planner(
    parse: *mut pg_sys::Query,
    query_string: *const std::ffi::c_char,
    cursor_options: std::ffi::c_int,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    // SAFETY: the planner's own input, which it may scribble on; then the
    // next hook or the standard planner, with our arguments.
    unsafe {
        // A statement planned while a COPY's swap lives (`super::copy`).
        super::copy::statement_starts();
        let next = PREV_PLANNER.unwrap_or(standard_planner);
        // A database without the extension, as this backend knows it; and,
        // once it has read the list, most statements hold nothing to swap,
        // which a look cheaper than the walk tells (`walk::clean`).
        let skip = match list::known() {
            Some(false) => true,
            Some(true) => super::walk::clean(parse.cast(), 0),
            None => false,
        };
        if skip {
            return next(parse, query_string, cursor_options, bound_params);
        }
        let mut f = swaps();
        if f.nextval != pg_sys::Oid::INVALID {
            swap(parse.cast(), (&raw mut f).cast());
        } else if list::unreadable() && mentions(parse.cast(), std::ptr::null_mut()) {
            list::refuse_unreadable();
        }
        next(parse, query_string, cursor_options, bound_params)
    }
}

/// The swaps to make in this database's statements, if any: [`list::active`]
/// behind pgrx's guard (it reads the catalogs, which may raise an ERROR),
/// called once per statement; the walk itself runs unguarded (see
/// `walk::raw`), for its callback runs once per node.
#[pg_guard]
unsafe extern "C-unwind" fn swaps() -> Fns {
    list::active().unwrap_or(Fns::NONE)
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
    // COPY building a swapped default (`super::copy`).
    super::copy::looked_up(fn_oid);
    // SAFETY: the previous hook, with our argument.
    if let Some(prev) = unsafe { PREV_NEEDS_FMGR } {
        if unsafe { prev(fn_oid) } {
            return true;
        }
    }
    // PostgreSQL's own functions (below FirstNormalObjectId) name no
    // sequence of a database: most lookups stop here, at no cost.
    if fn_oid.to_u32() < pg_sys::FirstNormalObjectId
        || (list::active().is_none() && !list::unreadable())
    {
        return false;
    }
    sql_body_may_call_sequences(fn_oid)
}

thread_local! {
    /// [`sql_body_may_call_sequences`] per function, forgotten when any
    /// function changes (a syscache invalidation of pg_proc).
    static BODIES: RefCell<std::collections::HashMap<pg_sys::Oid, bool>> = RefCell::new(Default::default());
}

#[pg_guard]
unsafe extern "C-unwind" fn proc_changed(_arg: pg_sys::Datum, _cacheid: i32, _hash: u32) {
    BODIES.with(|b| b.borrow_mut().clear());
    super::walk::forget_defaults();
}

/// Whether `f` is an SQL function whose body calls `nextval`, `currval`,
/// `setval` or `lastval`: a `BEGIN ATOMIC` body's parsed statements are
/// walked; a string body is searched for the names (an operator over
/// them in such a body escapes: docs/adopting.md). Cached per backend.
fn sql_body_may_call_sequences(f: pg_sys::Oid) -> bool {
    if let Some(v) = BODIES.with(|b| b.borrow().get(&f).copied()) {
        return v;
    }
    let v = body_calls_sequences(f);
    BODIES.with(|b| b.borrow_mut().insert(f, v));
    v
}

/// Whether a string body, parsed (no analysis, no lock), may reach one
/// of the four once inlined: a call of a function so named, however the
/// name is spelled (`U&"\0073etval"`, which the text search misses: the
/// red-team review of 930c88a, P2); an operator that some operator of
/// its name calls one of the four through (the review of 6dda376, F2); a
/// call of a function of a name that
/// some function with defaults calling the four has, in any schema (its
/// defaults are added after the swap: the review of 9aee40a, F2); and,
/// for a set-returning function the planner may inline into a `FROM`
/// clause (`inlinable_set`), a relation that is a view as the current
/// `search_path` finds it (the view's query is expanded after the swap:
/// F2). Only a body of one `SELECT` can be inlined; any other is answered
/// `false`, and one that does not parse `true`.
///
/// # Safety
/// `src` is a C string.
unsafe fn parsed_body_may_reach(src: *const std::ffi::c_char, inlinable_set: bool) -> bool {
    let src = src as usize;
    PgTryBuilder::new(move || {
        // SAFETY: PostgreSQL's raw parser over the body's text; its
        // result read as raw statements; catalog look-ups by name and by
        // OID, without locks.
        unsafe {
            let stmts = pg_sys::raw_parser(
                src as *const std::ffi::c_char,
                pg_sys::RawParseMode::RAW_PARSE_DEFAULT,
            );
            if stmts.is_null() || (*stmts).length != 1 {
                return false;
            }
            let raw = (*(*stmts).elements).ptr_value as *mut pg_sys::RawStmt;
            let stmt = (*raw).stmt;
            if stmt.is_null() || (*stmt).type_ != pg_sys::NodeTag::T_SelectStmt {
                return false;
            }
            if super::walk::names_the_four(stmt, std::ptr::null_mut()) {
                return true;
            }
            let mut found = super::walk::RawNames::default();
            super::walk::raw_names(stmt, (&raw mut found).cast());
            if found
                .functions
                .iter()
                .any(|&name| named_with_such_defaults(name))
                || found
                    .operators
                    .iter()
                    .any(|&names| super::walk::operator_calls_the_four(names))
            {
                return true;
            }
            inlinable_set
                && found.relations.iter().any(|&rv| {
                    crate::catalog::relation_named(rv).is_some_and(|rel| {
                        pg_sys::get_rel_relkind(rel) as u8 == pg_sys::RELKIND_VIEW
                    })
                })
        }
    })
    .catch_others(|_| true)
    .execute()
}

/// Whether some function named `name`, in any schema, has defaults that
/// call one of the four.
///
/// # Safety
/// `name` is a C string; called where PostgreSQL may raise an ERROR.
unsafe fn named_with_such_defaults(name: *const std::ffi::c_char) -> bool {
    // SAFETY: a catalog cache list by name, its members read and the list
    // released; the walk's guarded check of each function.
    unsafe {
        let list = pg_sys::SearchSysCacheList(
            pg_sys::SysCacheIdentifier::PROCNAMEARGSNSP as _,
            1,
            pg_sys::Datum::from(name),
            pg_sys::Datum::from(0),
            pg_sys::Datum::from(0),
        );
        if list.is_null() {
            return false;
        }
        let members = (*list).members.as_slice((*list).n_members as usize);
        let oids: Vec<pg_sys::Oid> = members
            .iter()
            .map(|&m| {
                (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_proc>(&raw mut (*m).tuple))
                    .oid
            })
            .collect();
        pg_sys::ReleaseCatCacheList(list);
        oids.into_iter()
            .any(|f| super::walk::defaults_call_the_four(f))
    }
}

fn body_calls_sequences(f: pg_sys::Oid) -> bool {
    let Some(p) = super::proc::read(f) else {
        return false;
    };
    if p.language.to_u32() != SQL_LANGUAGE_ID {
        return false;
    }
    if let Some(body) = p.sql_body {
        // A BEGIN ATOMIC body: its parsed statements, walked for calls of
        // the four (functions or operators, and functions whose defaults
        // call them), and, for a set-returning function the planner may
        // inline, for views (the review of 9aee40a, F2).
        // SAFETY: PostgreSQL's reader over a node tree it wrote.
        return unsafe {
            let tree: *mut pg_sys::Node = pg_sys::stringToNode(body.as_ptr()).cast();
            mentions(tree, std::ptr::null_mut())
                || (p.inlinable_set && super::walk::reads_view(tree, std::ptr::null_mut()))
        };
    }
    let inlinable_set = p.inlinable_set;
    p.source.is_some_and(|src| {
        let text = src.to_string_lossy().to_ascii_lowercase();
        ["nextval", "currval", "setval", "lastval"]
            .iter()
            .any(|w| text.contains(w))
            // SAFETY: a C string of ours.
            || unsafe { parsed_body_may_reach(src.as_ptr(), inlinable_set) }
    })
}
