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
//! once per backend from `snowflake_id_internal.snowflake_adopted` (the
//! extension's own table and functions only, checked by their extension
//! membership, with a fresh snapshot and no SQL), and read again after an
//! invalidation of that table, which every change of a row sends
//! (`snowflake_id_internal.adopt_changed()`); the same invalidation drops
//! every cached plan of the backend, so no plan made before an adoption
//! outlives it. Operators whose function is one of the four are swapped
//! too; `CALL`'s arguments, evaluated without a plan, are swapped in the
//! utility hook, which also makes `DISCARD` forget the session's values.

use super::session;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;

/// The functions that take the built-ins' places.
#[derive(Clone, Copy)]
#[repr(C)]
struct Fns {
    nextval: pg_sys::Oid,
    currval: pg_sys::Oid,
    setval: pg_sys::Oid,
    setval3: pg_sys::Oid,
    lastval: pg_sys::Oid,
    /// `seq_drawn` for `smallint`, `integer` and `bigint`: wrapped around
    /// an identity column's draw, so that `lastval()` knows of it.
    drawn: [pg_sys::Oid; 3],
}

impl Fns {
    /// No swaps.
    const NONE: Fns = Fns {
        nextval: pg_sys::Oid::INVALID,
        currval: pg_sys::Oid::INVALID,
        setval: pg_sys::Oid::INVALID,
        setval3: pg_sys::Oid::INVALID,
        lastval: pg_sys::Oid::INVALID,
        drawn: [pg_sys::Oid::INVALID; 3],
    };

    /// The replacement of built-in function `f`, or `InvalidOid`.
    fn swap_of(&self, f: pg_sys::Oid) -> pg_sys::Oid {
        match f.to_u32() {
            pg_sys::F_NEXTVAL => self.nextval,
            pg_sys::F_CURRVAL => self.currval,
            pg_sys::F_SETVAL_REGCLASS_INT8 => self.setval,
            pg_sys::F_SETVAL_REGCLASS_INT8_BOOL => self.setval3,
            pg_sys::F_LASTVAL => self.lastval,
            _ => pg_sys::Oid::INVALID,
        }
    }

    /// The `seq_drawn` of an identity column's type, or `InvalidOid`.
    fn drawn_of(&self, typ: pg_sys::Oid) -> pg_sys::Oid {
        match typ {
            pg_sys::INT2OID => self.drawn[0],
            pg_sys::INT4OID => self.drawn[1],
            pg_sys::INT8OID => self.drawn[2],
            _ => pg_sys::Oid::INVALID,
        }
    }
}

/// Whether `f` is one of the four built-ins (setval in both forms).
fn is_builtin(f: pg_sys::Oid) -> bool {
    [
        pg_sys::F_NEXTVAL,
        pg_sys::F_CURRVAL,
        pg_sys::F_SETVAL_REGCLASS_INT8,
        pg_sys::F_SETVAL_REGCLASS_INT8_BOOL,
        pg_sys::F_LASTVAL,
    ]
    .contains(&f.to_u32())
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
    /// The table's OID once read, for the invalidation callback.
    static TABLE: Cell<pg_sys::Oid> = const { Cell::new(pg_sys::Oid::INVALID) };
    /// The swaps of the last list this backend read (`Fns::NONE` where it
    /// was empty, or none was read): used while the list cannot be read
    /// (in parallel mode; while its lock is held up), so that a statement
    /// planned then is swapped as the last list said (a swap of a sequence
    /// that is not adopted calls the built-in: harmless).
    static LAST_SWAPS: Cell<Fns> = const { Cell::new(Fns::NONE) };
    /// Whether this backend has read the list since it started.
    static EVER_READ: Cell<bool> = const { Cell::new(false) };
    /// Whether a read was skipped since the last plan-cache reset: the
    /// next read resets the plan cache again, for the plans made meanwhile.
    static SKIPPED: Cell<bool> = const { Cell::new(false) };
    /// Whether the last attempt to read the list was held up by a lock
    /// (on the list, or on the catalogs its membership is checked in) in
    /// a backend that never read it: a statement that calls one of the
    /// four is then refused (55P03); any other is planned as it is.
    static UNREADABLE: Cell<bool> = const { Cell::new(false) };
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
        pg_sys::CacheRegisterSyscacheCallback(
            pg_sys::SysCacheIdentifier::PROCOID as _,
            Some(proc_changed),
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

/// How long a backend tries for the locks it reads the list under
/// (without queueing) before it goes on without the list (see
/// [`held_up`]): a role that holds a lock while someone queues for an
/// exclusive one (an ALTER EXTENSION) holds up a read this long at most.
const LIST_LOCK_WAIT_MS: u64 = 1_000;

/// The first column of a row of `snowflake_id_internal.snowflake_adopted`
/// (`seq regclass`, NOT NULL, fixed-width).
#[repr(C)]
struct AdoptedRow {
    seq: pg_sys::Oid,
}

/// The function `name(args)` of schema `ns` if it is a member of
/// extension `ext`, else `InvalidOid`.
///
/// # Safety
/// In a transaction.
unsafe fn member_function(
    ext: pg_sys::Oid,
    ns: pg_sys::Oid,
    name: &std::ffi::CStr,
    args: &[pg_sys::Oid],
) -> pg_sys::Oid {
    // SAFETY: a syscache look-up by name, exact argument types and schema
    // (no search path, no defaults, no privilege check: this runs for
    // every role), released at once; then its extension membership.
    unsafe {
        let types = pg_sys::buildoidvector(args.as_ptr(), args.len() as _);
        let tup = pg_sys::SearchSysCache3(
            pg_sys::SysCacheIdentifier::PROCNAMEARGSNSP as _,
            pg_sys::Datum::from(name.as_ptr()),
            pg_sys::Datum::from(types),
            pg_sys::Datum::from(ns),
        );
        pg_sys::pfree(types.cast());
        if tup.is_null() {
            return pg_sys::Oid::INVALID;
        }
        let f = (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_proc>(tup)).oid;
        pg_sys::ReleaseSysCache(tup);
        if pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, f) != ext {
            return pg_sys::Oid::INVALID;
        }
        f
    }
}

/// pg_extension and pg_depend.
const EXTENSION_RELATION: pg_sys::Oid = pg_sys::ExtensionRelationId;
const DEPEND_RELATION: pg_sys::Oid = pg_sys::Oid::from_u32(2608);

/// Take ACCESS SHARE on each of `rels` without queueing behind anyone,
/// trying for at most [`LIST_LOCK_WAIT_MS`]; false (and none held) if not.
///
/// # Safety
/// In a transaction.
unsafe fn lock_without_queueing(rels: &[pg_sys::Oid]) -> bool {
    let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
    let mut waited = 0;
    // SAFETY: lock calls of this backend; each one taken is released on
    // failure.
    unsafe {
        loop {
            let mut got = 0;
            while got < rels.len() && pg_sys::ConditionalLockRelationOid(rels[got], lock) {
                got += 1;
            }
            if got == rels.len() {
                return true;
            }
            for r in &rels[..got] {
                pg_sys::UnlockRelationOid(*r, lock);
            }
            if waited >= LIST_LOCK_WAIT_MS {
                return false;
            }
            pgrx::check_for_interrupts!();
            pg_sys::pg_usleep(10_000);
            waited += 10;
        }
    }
}

/// Releases ACCESS SHARE on the relations when dropped (taken by
/// [`lock_without_queueing`]).
struct UnlockOnDrop(&'static [pg_sys::Oid]);
impl Drop for UnlockOnDrop {
    fn drop(&mut self) {
        for r in self.0 {
            // SAFETY: a lock this backend took.
            unsafe { pg_sys::UnlockRelationOid(*r, pg_sys::AccessShareLock as pg_sys::LOCKMODE) };
        }
    }
}

/// The list could not be read for a lock: a backend that read it before
/// goes on with what it read (see [`LAST_SWAPS`]); one that never did
/// refuses the statements that call the four ([`UNREADABLE`]).
fn held_up() {
    SKIPPED.with(|k| k.set(true));
    if !EVER_READ.with(|e| e.get()) {
        UNREADABLE.with(|u| u.set(true));
    }
}

/// Read the list into [`KNOWN`]: only the extension's own objects (a
/// schema, table or function of that name that is not a member of the
/// installed extension is ignored: any role with CREATE on a database
/// can make them), with a fresh snapshot (a session in REPEATABLE READ
/// sees an adoption committed after its snapshot), and no SQL.
fn load() {
    // SAFETY: catalog look-ups, in a transaction; the list's table is
    // scanned under its lock with a registered snapshot, and its rows'
    // first column is a NOT NULL oid.
    unsafe {
        // Not in a parallel worker or a parallel query (no new snapshot may
        // be taken there, and nothing is planned there), nor under logical
        // decoding's historic snapshot: the list stays unknown, no swap.
        if !pg_sys::IsTransactionState()
            || pg_sys::IsInParallelMode()
            || pg_sys::HistoricSnapshotActive()
        {
            SKIPPED.with(|k| k.set(true));
            return;
        }
        let absent = || {
            LAST_SWAPS.with(|l| l.set(Fns::NONE));
            KNOWN.with(|k| *k.borrow_mut() = Known::Absent)
        };
        // The schema first, from the syscache that planning reads anyway:
        // a database without it has no list, and its statements touch no
        // catalog they would not touch without the extension.
        let ns = pg_sys::get_namespace_oid(c"snowflake_id_internal".as_ptr(), true);
        if ns == pg_sys::Oid::INVALID {
            return absent();
        }
        // The extension and its members: pg_extension and pg_depend, which
        // ordinary planning does not read. A lock queued on either (CREATE
        // RULE takes one before it checks anything) must not hold up every
        // statement: take them without queueing, for at most a second.
        if !lock_without_queueing(&[EXTENSION_RELATION, DEPEND_RELATION]) {
            return held_up();
        }
        let _unlock = UnlockOnDrop(&[EXTENSION_RELATION, DEPEND_RELATION]);
        let ext = pg_sys::get_extension_oid(c"snowflake_id".as_ptr(), true);
        if ext == pg_sys::Oid::INVALID
            || pg_sys::getExtensionOfObject(pg_sys::NamespaceRelationId, ns) != ext
        {
            return absent();
        }
        let table = pg_sys::get_relname_relid(c"snowflake_adopted".as_ptr(), ns);
        if table == pg_sys::Oid::INVALID
            || pg_sys::getExtensionOfObject(pg_sys::RelationRelationId, table) != ext
        {
            return absent();
        }
        let regclass = pg_sys::REGCLASSOID;
        let fns = Fns {
            nextval: member_function(ext, ns, c"seq_nextval", &[regclass]),
            currval: member_function(ext, ns, c"seq_currval", &[regclass]),
            setval: member_function(ext, ns, c"seq_setval", &[regclass, pg_sys::INT8OID]),
            setval3: member_function(
                ext,
                ns,
                c"seq_setval",
                &[regclass, pg_sys::INT8OID, pg_sys::BOOLOID],
            ),
            lastval: member_function(ext, ns, c"seq_lastval", &[]),
            drawn: [pg_sys::INT2OID, pg_sys::INT4OID, pg_sys::INT8OID]
                .map(|t| member_function(ext, ns, c"seq_drawn", &[t])),
        };
        if [
            fns.nextval,
            fns.currval,
            fns.setval,
            fns.setval3,
            fns.lastval,
        ]
        .iter()
        .chain(&fns.drawn)
        .any(|f| *f == pg_sys::Oid::INVALID)
        {
            return absent();
        }
        TABLE.with(|t| t.set(table));
        let mut adopted = HashSet::new();
        let Some(list) = read_list(table, true) else {
            return held_up();
        };
        UNREADABLE.with(|u| u.set(false));
        for seq in list {
            // A sequence that is gone without a DROP (a temporary one at
            // the end of its session) leaves its OID: ignore anything that
            // is not a sequence now.
            if pg_sys::get_rel_relkind(seq) == pg_sys::RELKIND_SEQUENCE as std::ffi::c_char {
                adopted.insert(seq);
            }
        }
        LAST_SWAPS.with(|l| l.set(if adopted.is_empty() { Fns::NONE } else { fns }));
        EVER_READ.with(|e| e.set(true));
        if SKIPPED.with(|k| k.replace(false)) {
            // Plans made while the list could not be read: plan them again.
            pg_sys::ResetPlanCache();
        }
        KNOWN.with(|k| *k.borrow_mut() = Known::Loaded { adopted, fns });
    }
}

/// The OIDs in the list `table`, read with a fresh snapshot under a lock
/// taken without queueing and let go at once: a transaction that planned
/// a statement does not hold the list to its end (an exclusive lock
/// queued behind it would hold up every new session of the database).
/// When the lock stays unavailable for [`LIST_LOCK_WAIT_MS`]: `None` if
/// `may_skip` (the caller goes on with what it read before), else 55P03.
///
/// # Safety
/// In a transaction, not in parallel mode; `table` is the list.
pub(super) unsafe fn read_list(table: pg_sys::Oid, may_skip: bool) -> Option<Vec<pg_sys::Oid>> {
    // SAFETY: the list's table scanned under its lock with a registered
    // snapshot; its rows' first column is a NOT NULL oid.
    unsafe {
        if !lock_without_queueing(&[table]) {
            if may_skip {
                return None;
            }
            crate::errors::adopt_list_locked(LIST_LOCK_WAIT_MS);
        }
        let rel = pg_sys::table_open(table, pg_sys::NoLock as _);
        let snapshot = pg_sys::RegisterSnapshot(pg_sys::GetLatestSnapshot());
        let scan = pg_sys::systable_beginscan(
            rel,
            pg_sys::InvalidOid,
            false,
            snapshot,
            0,
            std::ptr::null_mut(),
        );
        let mut list = Vec::new();
        loop {
            let tup = pg_sys::systable_getnext(scan);
            if tup.is_null() {
                break;
            }
            list.push((*pg_sys::heap_tuple_get_struct::<AdoptedRow>(tup)).seq);
        }
        pg_sys::systable_endscan(scan);
        pg_sys::UnregisterSnapshot(snapshot);
        pg_sys::table_close(rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        Some(list)
    }
}

/// Read the list if this backend does not know it (see [`load`]).
fn read_if_unknown() {
    if KNOWN.with(|k| matches!(&*k.borrow(), Known::Unknown)) {
        load();
    }
}

/// The swaps to make in this database's statements, if any.
fn active() -> Option<Fns> {
    read_if_unknown();
    KNOWN.with(|k| match &*k.borrow() {
        Known::Loaded { adopted, fns, .. } if !adopted.is_empty() => Some(*fns),
        Known::Unknown => {
            let last = LAST_SWAPS.with(|l| l.get());
            (last.nextval != pg_sys::Oid::INVALID).then_some(last)
        }
        _ => None,
    })
}

/// Whether `seq` is adopted in this database.
pub fn is_adopted(seq: pg_sys::Oid) -> bool {
    read_if_unknown();
    KNOWN.with(|k| matches!(&*k.borrow(), Known::Loaded { adopted, .. } if adopted.contains(&seq)))
}

/// PostgreSQL's own planner and utility processor, called without pgrx's
/// guard: an ERROR inside them (any statement's, a DO block's with its
/// PL/pgSQL CONTEXT) must reach the caller as PostgreSQL raised it, not
/// re-raised by pgrx at our frame without its CONTEXT. The hooks' frames
/// hold nothing to drop, so the error's longjmp passes over them; the
/// hooks' own work runs in guarded functions.
mod raw {
    use pgrx::pg_sys::Node;
    use pgrx::pg_sys::{
        DestReceiver, ParamListInfo, PlannedStmt, ProcessUtilityContext, Query, QueryCompletion,
        QueryEnvironment,
    };
    use std::ffi::{c_char, c_int, c_void};
    /// A tree walker's callback.
    pub type Walker = Option<unsafe extern "C-unwind" fn(*mut Node, *mut c_void) -> bool>;
    unsafe extern "C-unwind" {
        #[cfg_attr(not(feature = "pg15"), link_name = "expression_tree_walker_impl")]
        pub fn expression_tree_walker(
            node: *mut Node,
            walker: Walker,
            context: *mut c_void,
        ) -> bool;
        #[cfg_attr(not(feature = "pg15"), link_name = "query_tree_walker_impl")]
        pub fn query_tree_walker(
            query: *mut Query,
            walker: Walker,
            context: *mut c_void,
            flags: c_int,
        ) -> bool;
        pub fn standard_planner(
            parse: *mut Query,
            query_string: *const c_char,
            cursor_options: c_int,
            bound_params: ParamListInfo,
        ) -> *mut PlannedStmt;
        #[allow(clippy::too_many_arguments)]
        pub fn standard_ProcessUtility(
            pstmt: *mut PlannedStmt,
            query_string: *const c_char,
            read_only_tree: bool,
            context: ProcessUtilityContext::Type,
            params: ParamListInfo,
            query_env: *mut QueryEnvironment,
            dest: *mut DestReceiver,
            qc: *mut QueryCompletion,
        );
    }
}

/// The planner hook: our swap (guarded), then the next planner, unguarded
/// (see [`raw`]).
unsafe extern "C-unwind" fn planner(
    parse: *mut pg_sys::Query,
    query_string: *const std::ffi::c_char,
    cursor_options: std::ffi::c_int,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    // SAFETY: the planner's own input, which it may scribble on; then the
    // next hook or the standard planner, with our arguments.
    unsafe {
        let mut f = swaps();
        if f.nextval != pg_sys::Oid::INVALID {
            swap(parse.cast(), (&raw mut f).cast());
        } else if UNREADABLE.with(|u| u.get()) && mentions(parse.cast(), std::ptr::null_mut()) {
            refuse_unreadable();
        }
        let next = PREV_PLANNER.unwrap_or(raw::standard_planner);
        next(parse, query_string, cursor_options, bound_params)
    }
}

/// The swaps to make in this database's statements, if any: [`active`]
/// behind pgrx's guard (it reads the catalogs, which may raise an ERROR),
/// called once per statement; the walk itself runs unguarded (see
/// [`raw`]), for its callback runs once per node.
#[pg_guard]
unsafe extern "C-unwind" fn swaps() -> Fns {
    active().unwrap_or(Fns::NONE)
}

/// 55P03: the statement calls one of the four and the list could not be
/// read (see [`UNREADABLE`]).
#[pg_guard]
unsafe extern "C-unwind" fn refuse_unreadable() {
    crate::errors::adopt_list_locked(LIST_LOCK_WAIT_MS);
}

/// `CALL p(nextval('s'))`: a procedure's arguments are evaluated without
/// a plan, so the hook swaps them in the statement (in a copy where the
/// tree is the plan cache's own); `DISCARD ALL` and `DISCARD SEQUENCES`
/// forget the session's values. The statement itself runs unguarded
/// (see [`raw`]).
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
    let mut pstmt = pstmt;
    let mut read_only_tree = read_only_tree;
    // SAFETY: the statement PostgreSQL passes (copied before any change
    // where it is read-only); then the next hook or the standard one.
    unsafe {
        let mut f = Fns::NONE;
        let discard = prepare_utility(&raw mut pstmt, &raw mut read_only_tree, &raw mut f);
        let stmt = (*pstmt).utilityStmt;
        if f.nextval != pg_sys::Oid::INVALID {
            let call = stmt as *mut pg_sys::CallStmt;
            swap((*call).funcexpr.cast(), (&raw mut f).cast());
        } else if !stmt.is_null()
            && (*stmt).type_ == pg_sys::NodeTag::T_CallStmt
            && UNREADABLE.with(|u| u.get())
            && mentions(
                (*(stmt as *mut pg_sys::CallStmt)).funcexpr.cast(),
                std::ptr::null_mut(),
            )
        {
            refuse_unreadable();
        }
        // A COPY that may draw where no planned call sees it: afterwards
        // lastval() is PostgreSQL's again, unless an adopted value was
        // taken during it (a statement trigger's; ahead of or after the
        // rows' draws, it cannot tell: it keeps the adopted one).
        let draws = !stmt.is_null()
            && (*stmt).type_ == pg_sys::NodeTag::T_CopyStmt
            && session::with(|s| s.last.is_some())
            && copy_draws(stmt.cast());
        let adopted_draws = session::with(|s| s.adopted_draws);
        let next = PREV_UTILITY.unwrap_or(raw::standard_ProcessUtility);
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
        if discard {
            // As PostgreSQL forgets its sequences' values (sequence.c).
            session::discard();
        }
        // Rows drawn for: some copied, or rows that a WHERE clause or
        // ON_ERROR may have dropped after their defaults were drawn (an
        // empty COPY draws nothing: lastval() stays; the third review).
        let stmt_copy = stmt as *mut pg_sys::CopyStmt;
        if draws
            && (qc.is_null()
                || (*qc).nprocessed > 0
                || !(*stmt_copy).whereClause.is_null()
                || has_option(stmt_copy, c"on_error"))
        {
            session::with(|s| {
                if s.adopted_draws == adopted_draws {
                    s.last = None;
                }
            });
        }
    }
}

/// Whether a `COPY ... FROM` about to run may draw from a sequence where
/// no planned call sees it: a column it leaves to its default (the
/// column's own, or its domain's) that is an identity column (a
/// partition's too) or calls `nextval()`, whatever its argument (a
/// `serial`'s, an inheritance child's copy of its parent's, `nextval('s'
/// ::text)`). PostgreSQL's `lastval()` then moves, and after the `COPY`
/// the session's is PostgreSQL's own again, as after [`wrap_draw`]'s
/// draws. Asked only where the session's last value is an adopted
/// sequence's, before the `COPY` runs, from the relation cache: the
/// relation is looked up as `COPY` itself looks it up (the same errors),
/// not again after it, and no catalog is read under a lock another
/// session can queue (the fourth review, F2 and F3, and its re-review, B1
/// and C1).
#[pg_guard]
unsafe extern "C-unwind" fn copy_draws(stmt: *mut pg_sys::CopyStmt) -> bool {
    // SAFETY: the statement about to run; its relation opened as COPY
    // opens it (a lock COPY would take anyway), and its defaults built as
    // COPY builds them, in the current memory context.
    unsafe {
        let given = (*stmt).attlist;
        // Without a column list COPY gives every column: no default runs,
        // unless its DEFAULT option (PostgreSQL 16) names a marker that
        // runs a column's default, given or not (the third review).
        let marker = has_option(stmt, c"default");
        if !(*stmt).is_from || (*stmt).relation.is_null() || (given.is_null() && !marker) {
            return false;
        }
        // A server-side file or program that the caller may not read or
        // run: COPY refuses it before it locks anything, and so no lock
        // is taken here (the fifth review).
        if !(*stmt).filename.is_null() {
            let role = if (*stmt).is_program {
                pg_sys::ROLE_PG_EXECUTE_SERVER_PROGRAM
            } else {
                pg_sys::ROLE_PG_READ_SERVER_FILES
            };
            if !pg_sys::has_privs_of_role(pg_sys::GetUserId(), pg_sys::Oid::from(role)) {
                return false;
            }
        }
        let relid = pg_sys::RangeVarGetRelidExtended(
            (*stmt).relation,
            // COPY FROM's own lock: taking a weaker one first would make
            // COPY upgrade it, and deadlock with DDL queued in between.
            pg_sys::RowExclusiveLock as pg_sys::LOCKMODE,
            pg_sys::RVROption::RVR_MISSING_OK as _,
            None,
            std::ptr::null_mut(),
        );
        if relid == pg_sys::Oid::INVALID {
            return false;
        }
        let listed = if given.is_null() || marker {
            0
        } else {
            (*given).length as usize
        };
        let names: Vec<&std::ffi::CStr> = (0..listed)
            .map(|i| (*(*given).elements.add(i)).ptr_value as *mut pg_sys::String)
            .filter(|n| !n.is_null() && (**n).type_ == pg_sys::NodeTag::T_String)
            .map(|n| std::ffi::CStr::from_ptr((*n).sval))
            .collect();
        let rel = pg_sys::relation_open(relid, pg_sys::NoLock as pg_sys::LOCKMODE);
        let desc = pgrx::PgTupleDesc::from_pg_unchecked((*rel).rd_att);
        let mut draws = false;
        for i in 0..desc.len() {
            let Some(att) = desc.get(i) else { continue };
            if att.attisdropped
                || att.attgenerated != 0
                || names.contains(&std::ffi::CStr::from_ptr(att.attname.data.as_ptr()))
            {
                continue;
            }
            let expr = pg_sys::build_column_default(rel, (i + 1) as _);
            if !expr.is_null() && draw_in(expr, std::ptr::null_mut()) {
                draws = true;
                break;
            }
        }
        drop(desc);
        pg_sys::relation_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        draws
    }
}

/// Whether a `COPY` statement has option `name` (`WITH (name ...)`).
///
/// # Safety
/// `stmt` is a valid `CopyStmt`.
unsafe fn has_option(stmt: *mut pg_sys::CopyStmt, name: &std::ffi::CStr) -> bool {
    // SAFETY: the statement's option list, of DefElem nodes.
    unsafe {
        let opts = (*stmt).options;
        !opts.is_null()
            && (0..(*opts).length as usize).any(|i| {
                let d = (*(*opts).elements.add(i)).ptr_value as *mut pg_sys::DefElem;
                !d.is_null()
                    && !(*d).defname.is_null()
                    && std::ffi::CStr::from_ptr((*d).defname) == name
            })
    }
}

/// The walker of [`copy_draws`]: an identity's draw, or a call of
/// `nextval()`. Unguarded, as [`swap`].
unsafe extern "C-unwind" fn draw_in(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: nodes of an expression tree.
    unsafe {
        if (*node).type_ == pg_sys::NodeTag::T_NextValueExpr {
            return true;
        }
        let f = called_function(node);
        if !f.is_null() && (*f).to_u32() == pg_sys::F_NEXTVAL {
            return true;
        }
        raw::expression_tree_walker(node, Some(draw_in), ctx)
    }
}

/// The utility hook's own work: for a `CALL` in a database with adopted
/// sequences, the swaps to make in its arguments (in `fns`; a read-only
/// statement copied first); whether the statement is a `DISCARD` that
/// forgets sequence values.
#[pg_guard]
unsafe extern "C-unwind" fn prepare_utility(
    pstmt: *mut *mut pg_sys::PlannedStmt,
    read_only_tree: *mut bool,
    fns: *mut Fns,
) -> bool {
    // SAFETY: the statement PostgreSQL passes, copied before any change
    // where it is read-only, as utility.c itself does.
    unsafe {
        let stmt = (**pstmt).utilityStmt;
        if stmt.is_null() {
            return false;
        }
        if (*stmt).type_ == pg_sys::NodeTag::T_CallStmt {
            if let Some(f) = active() {
                if *read_only_tree {
                    *pstmt = pg_sys::copyObjectImpl((*pstmt).cast()).cast();
                    *read_only_tree = false;
                }
                *fns = f;
            }
            return false;
        }
        if (*stmt).type_ == pg_sys::NodeTag::T_DiscardStmt {
            let target = (*(stmt as *mut pg_sys::DiscardStmt)).target;
            return target == pg_sys::DiscardMode::DISCARD_ALL
                || target == pg_sys::DiscardMode::DISCARD_SEQUENCES;
        }
        false
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
    // PostgreSQL's own functions (below FirstNormalObjectId) name no
    // sequence of a database: most lookups stop here, at no cost.
    if fn_oid.to_u32() < pg_sys::FirstNormalObjectId
        || (active().is_none() && !UNREADABLE.with(|u| u.get()))
    {
        return false;
    }
    sql_body_may_call_sequences(fn_oid)
}

/// Whether a parsed tree calls one of the four built-ins (as a function
/// or through an operator). Unguarded, and calling PostgreSQL's walkers
/// unguarded, as [`swap`]: once per node (a guard per node took 1.5 kB of
/// stack per level: a deep body ran out of stack), holding nothing to drop.
unsafe extern "C-unwind" fn mentions(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: nodes of a parsed tree.
    unsafe {
        if (*node).type_ == pg_sys::NodeTag::T_Query {
            return raw::query_tree_walker(node.cast(), Some(mentions), ctx, 0);
        }
        let slot = called_function(node);
        if !slot.is_null() && is_builtin(*slot) {
            return true;
        }
        raw::expression_tree_walker(node, Some(mentions), ctx)
    }
}

thread_local! {
    /// [`sql_body_may_call_sequences`] per function, forgotten when any
    /// function changes (a syscache invalidation of pg_proc).
    static BODIES: RefCell<std::collections::HashMap<pg_sys::Oid, bool>> = RefCell::new(Default::default());
}

#[pg_guard]
unsafe extern "C-unwind" fn proc_changed(_arg: pg_sys::Datum, _cacheid: i32, _hash: u32) {
    BODIES.with(|b| b.borrow_mut().clear());
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

fn body_calls_sequences(f: pg_sys::Oid) -> bool {
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
            let body = pg_sys::SysCacheGetAttr(
                pg_sys::SysCacheIdentifier::PROCOID as _,
                tup,
                pg_sys::Anum_pg_proc_prosqlbody as _,
                &mut isnull,
            );
            if !isnull {
                // A BEGIN ATOMIC body: its parsed statements, walked for
                // calls of the four (functions or operators).
                let c = pg_sys::text_to_cstring(body.cast_mut_ptr());
                let tree = pg_sys::stringToNode(c) as *mut pg_sys::Node;
                pg_sys::pfree(c.cast());
                found = mentions(tree, std::ptr::null_mut());
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

/// The function a node calls, as the field that names it: a `FuncExpr`'s,
/// or an operator's (`CREATE OPERATOR ... FUNCTION = nextval`); null for
/// any other node. [`swap`] and [`mentions`] look at the same nodes.
///
/// # Safety
/// `node` is a valid node.
unsafe fn called_function(node: *mut pg_sys::Node) -> *mut pg_sys::Oid {
    // SAFETY: the node's tag says its type.
    unsafe {
        match (*node).type_ {
            pg_sys::NodeTag::T_FuncExpr => &raw mut (*(node as *mut pg_sys::FuncExpr)).funcid,
            pg_sys::NodeTag::T_OpExpr
            | pg_sys::NodeTag::T_DistinctExpr
            | pg_sys::NodeTag::T_NullIfExpr => &raw mut (*(node as *mut pg_sys::OpExpr)).opfuncid,
            _ => std::ptr::null_mut(),
        }
    }
}

/// Wrap the expression in `slot`, if it is an identity column's draw
/// (a `NextValueExpr`, which the rewriter puts in a target list or a
/// `VALUES` row for a column left to its default), in `seq_drawn(...)` of
/// its type: `lastval()` then returns it, as PostgreSQL's does, and not
/// an adopted sequence's value drawn before.
///
/// # Safety
/// `slot` points into a query tree that the planner may scribble on.
unsafe fn wrap_draw(slot: *mut *mut pg_sys::Node, f: &Fns) {
    // SAFETY: the node's tag says its type; `makeFuncExpr` and `lappend`
    // allocate in the planner's memory context.
    unsafe {
        let node = *slot;
        if node.is_null() || (*node).type_ != pg_sys::NodeTag::T_NextValueExpr {
            return;
        }
        let typ = (*(node as *mut pg_sys::NextValueExpr)).typeId;
        let drawn = f.drawn_of(typ);
        if drawn == pg_sys::Oid::INVALID {
            return;
        }
        let args = pg_sys::lappend(std::ptr::null_mut(), node.cast());
        *slot = pg_sys::makeFuncExpr(
            drawn,
            typ,
            args,
            pg_sys::InvalidOid,
            pg_sys::InvalidOid,
            pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
        )
        .cast();
    }
}

/// The walker: every query and expression of the statement, subqueries,
/// CTEs and sublinks included; each `FuncExpr` of the four functions gets
/// its replacement's OID, and each identity column's draw is wrapped
/// ([`wrap_draw`]). Unguarded, and calling PostgreSQL's walkers
/// unguarded (see [`raw`]): it is called once per node, and holds
/// nothing to drop.
unsafe extern "C-unwind" fn swap(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: nodes of a query tree; `ctx` is the `Fns` of `planner`.
    unsafe {
        let f = &*(ctx as *const Fns);
        match (*node).type_ {
            pg_sys::NodeTag::T_Query => {
                return raw::query_tree_walker(node.cast(), Some(swap), ctx, 0);
            }
            // A target list's entry, or a VALUES row (a list): where the
            // rewriter puts an identity column's draw.
            pg_sys::NodeTag::T_TargetEntry => {
                wrap_draw(&raw mut (*(node as *mut pg_sys::TargetEntry)).expr as _, f);
            }
            pg_sys::NodeTag::T_List => {
                let list = node as *mut pg_sys::List;
                for i in 0..(*list).length as usize {
                    wrap_draw(&raw mut (*(*list).elements.add(i)).ptr_value as _, f);
                }
            }
            // A draw wrapped already: nothing more inside.
            pg_sys::NodeTag::T_FuncExpr
                if f.drawn.contains(&(*(node as *mut pg_sys::FuncExpr)).funcid) =>
            {
                return false;
            }
            _ => {}
        }
        let slot = called_function(node);
        if !slot.is_null() {
            let to = f.swap_of(*slot);
            if to != pg_sys::Oid::INVALID {
                *slot = to;
            }
        }
        raw::expression_tree_walker(node, Some(swap), ctx)
    }
}
