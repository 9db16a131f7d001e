//! The utility hook of adopted sequences: `CALL p(nextval('s'))`, whose
//! arguments are evaluated without a plan, is swapped here as
//! [`super::planner`] swaps a planned statement; `DISCARD` forgets the
//! session's values; and after a `COPY ... FROM` that drew from a
//! sequence where no planned call sees it, `lastval()` is PostgreSQL's
//! again ([`copy_draws`]).

use super::list::{self, Fns};
use super::session;
use super::walk::{draw_in, mentions, swap};
use crate::utility_hook::standard_ProcessUtility;
use pgrx::pg_sys;
use pgrx::prelude::*;

static mut PREV_UTILITY: pg_sys::ProcessUtility_hook_type = None;

/// Install the hook: in the postmaster, at preload.
pub(super) fn init() {
    // SAFETY: the hook is installed once, in _PG_init of the postmaster,
    // before any backend exists.
    unsafe {
        PREV_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(utility);
    }
}

/// `CALL p(nextval('s'))`: a procedure's arguments are evaluated without
/// a plan, so the hook swaps them in the statement (in a copy where the
/// tree is the plan cache's own); `DISCARD ALL` and `DISCARD SEQUENCES`
/// forget the session's values. The statement itself runs unguarded
/// (see `walk::raw`).
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
        // A statement run while a COPY's swap lives (`super::copy`).
        super::copy::statement_starts();
        let mut f = Fns::NONE;
        let discard = prepare_utility(&raw mut pstmt, &raw mut read_only_tree, &raw mut f);
        let stmt = (*pstmt).utilityStmt;
        if f.nextval != pg_sys::Oid::INVALID {
            let call = stmt as *mut pg_sys::CallStmt;
            swap((*call).funcexpr.cast(), (&raw mut f).cast());
        } else if !stmt.is_null()
            && (*stmt).type_ == pg_sys::NodeTag::T_CallStmt
            && list::unreadable()
            && mentions(
                (*(stmt as *mut pg_sys::CallStmt)).funcexpr.cast(),
                std::ptr::null_mut(),
            )
        {
            list::refuse_unreadable();
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
        // Its defaults' nextval() in this backend's cache entry of the
        // table, swapped until it ends (`super::copy`).
        let swapped = if !stmt.is_null() && (*stmt).type_ == pg_sys::NodeTag::T_CopyStmt {
            copy_swaps(stmt.cast())
        } else {
            0
        };
        // A database dropped, or made (maybe with a dropped one's OID,
        // `CREATE DATABASE … OID`): once it is done, its entry in the
        // server's table goes. Not at the drop hook: a session still in
        // the database while DROP DATABASE waits for it to leave could
        // publish again (the red-team review of issue 63, F1).
        let dropped = database_of(stmt, pg_sys::NodeTag::T_DropdbStmt);
        // Statements that may move an adopted sequence's counter: ALTER
        // SEQUENCE's sequence, looked up before it runs (an identity's
        // ALTER TABLE … ALTER COLUMN … RESTART/SET/TYPE comes here as the
        // ALTER SEQUENCE PostgreSQL makes of it); TRUNCATE … RESTART
        // IDENTITY's, after it (`calls::refence` after both).
        let mut moved = Vec::new();
        if !stmt.is_null() && (*stmt).type_ == pg_sys::NodeTag::T_AlterSeqStmt {
            counters_moved_by(stmt, &raw mut moved);
            if !moved.is_empty() {
                restart_within_bounds(&raw mut pstmt, &raw mut read_only_tree, moved[0]);
            }
        }
        // TRUNCATE … RESTART IDENTITY: the tables it names, looked up
        // before it runs (a trigger of it may change what a name resolves
        // to: the red-team review of 2337972, F2).
        let mut truncated: Vec<(pg_sys::Oid, bool)> = Vec::new();
        if !stmt.is_null() && (*stmt).type_ == pg_sys::NodeTag::T_TruncateStmt {
            truncate_targets(stmt.cast(), &raw mut truncated);
        }
        // SET UNLOGGED of an adopted sequence, or of a table that owns one:
        // refused (see `refuse_unlogged`).
        if !stmt.is_null() && (*stmt).type_ == pg_sys::NodeTag::T_AlterTableStmt {
            refuse_unlogged(stmt.cast());
        }
        // EXECUTE's parameters are evaluated without a plan: their calls
        // of the four are swapped by name (`super::execute`), in the
        // statement's own copy.
        if !super::execute::execute_of(stmt).is_null() {
            super::execute::swap_parameters(
                &raw mut pstmt,
                &raw mut read_only_tree,
                query_string,
                query_env,
            );
        }
        // ADD COLUMN of a bigserial or bigint identity while the switch is
        // on: its rows filled with Snowflake IDs (`super::fill`).
        let filled = !stmt.is_null()
            && (*stmt).type_ == pg_sys::NodeTag::T_AlterTableStmt
            && super::fill::prepare(&raw mut pstmt, &raw mut read_only_tree);
        // A carrier of the switch restored where it exists already
        // (`super::switch`): done.
        let carrier_again = !stmt.is_null()
            && (*stmt).type_ == pg_sys::NodeTag::T_CreateEventTrigStmt
            && super::switch::made_already(stmt.cast());
        let next = PREV_UTILITY.unwrap_or(standard_ProcessUtility);
        if !carrier_again {
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
        }
        if filled {
            super::fill::finish(query_string);
        }
        if !stmt.is_null() && (*stmt).type_ == pg_sys::NodeTag::T_AlterTableStmt {
            super::replica::keep_always(stmt.cast());
        }
        if !stmt.is_null() && (*stmt).type_ == pg_sys::NodeTag::T_CreateEventTrigStmt {
            super::switch::created(stmt.cast());
        }
        super::copy::put_back_copy(swapped);
        if !truncated.is_empty() {
            truncated_sequences(stmt.cast(), &truncated, &raw mut moved);
        }
        if !moved.is_empty() {
            refence_after(&moved);
        }
        let database_made_or_dropped =
            dropped.or_else(|| database_of(stmt, pg_sys::NodeTag::T_CreatedbStmt));
        if discard {
            // As PostgreSQL forgets its sequences' values (sequence.c).
            session::discard();
        }
        if let Some(db) = database_made_or_dropped {
            super::shared::forget_database(db);
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

/// The OID of the database a `DROP DATABASE` names (`tag`
/// `T_DropdbStmt`, asked before it runs) or a `CREATE DATABASE` made
/// (`T_CreatedbStmt`, asked after), if `stmt` is that statement.
///
/// # Safety
/// `stmt` is a utility statement (or null).
unsafe fn database_of(stmt: *mut pg_sys::Node, tag: pg_sys::NodeTag) -> Option<u32> {
    // SAFETY: the node's tag read first; the look-up guarded.
    unsafe {
        if stmt.is_null() || (*stmt).type_ != tag {
            return None;
        }
        let db = database_named(stmt, tag);
        (db != 0).then_some(db)
    }
}

/// [`database_of`]'s look-up, guarded: it reads `pg_database` under a
/// lock that a maintenance command may hold, and its ERROR (a lock or
/// statement timeout, a cancel) must reach PostgreSQL as an ERROR, not
/// as a Rust panic through the unguarded hook, which aborted the server
/// (the red-team review of cc922ac). 0 where there is none.
#[pg_guard]
unsafe extern "C-unwind" fn database_named(stmt: *mut pg_sys::Node, tag: pg_sys::NodeTag) -> u32 {
    // SAFETY: the node read as the statement its tag names; a catalog
    // look-up by name.
    unsafe {
        let name = match tag {
            pg_sys::NodeTag::T_DropdbStmt => (*(stmt as *mut pg_sys::DropdbStmt)).dbname,
            _ => (*(stmt as *mut pg_sys::CreatedbStmt)).dbname,
        };
        pg_sys::get_database_oid(name, true).to_u32()
    }
}

/// Whether a `COPY ... FROM` about to run may draw from a sequence where
/// no planned call sees it: a column it leaves to its default (the
/// column's own, or its domain's) that is an identity column (a
/// partition's too) or calls `nextval()`, whatever its argument (a
/// `serial`'s, an inheritance child's copy of its parent's, `nextval('s'
/// ::text)`). PostgreSQL's `lastval()` then moves, and after the `COPY`
/// the session's is PostgreSQL's own again, as after [`super::walk::swap`]'s
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
        let Some(relid) = copy_target(stmt) else {
            return false;
        };
        let given = (*stmt).attlist;
        let marker = has_option(stmt, c"default");
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

/// The table of a `COPY … FROM` that may run a column's default, locked
/// as `COPY` locks it; `None` for any other `COPY`, or one that `COPY`
/// itself refuses before it locks anything.
///
/// # Safety
/// `stmt` is a valid `CopyStmt`; called where PostgreSQL may raise an
/// ERROR (a guarded function).
unsafe fn copy_target(stmt: *mut pg_sys::CopyStmt) -> Option<pg_sys::Oid> {
    // SAFETY: the statement's fields; a privilege test; the name looked
    // up as COPY looks it up (the same errors).
    unsafe {
        // Without a column list COPY gives every column: no default runs,
        // unless its DEFAULT option (PostgreSQL 16) names a marker that
        // runs a column's default, given or not (the third review).
        let marker = has_option(stmt, c"default");
        if !(*stmt).is_from || (*stmt).relation.is_null() || ((*stmt).attlist.is_null() && !marker)
        {
            return None;
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
                return None;
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
        (relid != pg_sys::Oid::INVALID).then_some(relid)
    }
}

/// A `COPY … FROM` about to run in a database with adopted sequences: its
/// table's defaults swapped ([`super::copy::swap_defaults`]); how many.
#[pg_guard]
unsafe extern "C-unwind" fn copy_swaps(stmt: *mut pg_sys::CopyStmt) -> usize {
    if super::list::active().is_none() {
        return 0;
    }
    // SAFETY: the statement about to run; its column list, of String
    // nodes (none with the DEFAULT option: every column may default).
    unsafe {
        let Some(relid) = copy_target(stmt) else {
            return 0;
        };
        let list = (*stmt).attlist;
        let given: Vec<std::ffi::CString> = if list.is_null() || has_option(stmt, c"default") {
            vec![]
        } else {
            (0..(*list).length as usize)
                .map(|i| (*(*list).elements.add(i)).ptr_value as *mut pg_sys::String)
                .filter(|n| !n.is_null() && (**n).type_ == pg_sys::NodeTag::T_String)
                .map(|n| std::ffi::CStr::from_ptr((*n).sval).to_owned())
                .collect()
        };
        super::copy::swap_defaults(relid, &given)
    }
}

/// The sequence whose counter or type an `ALTER SEQUENCE` may change
/// (also the one PostgreSQL makes of an identity's `ALTER TABLE … ALTER
/// COLUMN … RESTART`/`SET …`/`TYPE`), looked up before it runs, as the
/// statement will (a missing one is its error, not ours).
#[pg_guard]
unsafe extern "C-unwind" fn counters_moved_by(stmt: *mut pg_sys::Node, out: *mut Vec<pg_sys::Oid>) {
    // A database without adopted sequences: nothing to look up.
    if !list::any_adopted() {
        return;
    }
    // SAFETY: the caller's vector.
    unsafe { *out = moved_by(stmt) };
}

/// The tables a `TRUNCATE … RESTART IDENTITY` names, each with whether
/// it takes their inheritance children and partitions (not `ONLY`), in a
/// database with adopted sequences; looked up without a lock, as the
/// statement will look them up (a missing one is its error).
#[pg_guard]
unsafe extern "C-unwind" fn truncate_targets(
    stmt: *mut pg_sys::TruncateStmt,
    out: *mut Vec<(pg_sys::Oid, bool)>,
) {
    if !list::any_adopted() {
        return;
    }
    // SAFETY: the statement's own nodes; the caller's vector.
    unsafe {
        if !(*stmt).restart_seqs || (*stmt).relations.is_null() {
            return;
        }
        let rels = (*stmt).relations;
        for i in 0..(*rels).length as usize {
            let rv = (*(*rels).elements.add(i)).ptr_value as *mut pg_sys::RangeVar;
            if let Some(rel) = crate::catalog::relation_named(rv) {
                (*out).push((rel, (*rv).inh));
            }
        }
    }
}

/// After a `TRUNCATE … RESTART IDENTITY` ran (its tables locked): the
/// owned sequences of the tables it emptied, as PostgreSQL's TRUNCATE
/// found them: those it named ([`truncate_targets`]), their inheritance
/// children and partitions unless `ONLY`, and with `CASCADE` the tables
/// that reference any of them, themselves only (the red-team reviews of
/// 7d48b49, F2, and of 2337972, F4).
#[pg_guard]
unsafe extern "C-unwind" fn truncated_sequences(
    stmt: *mut pg_sys::TruncateStmt,
    named: &Vec<(pg_sys::Oid, bool)>,
    out: *mut Vec<pg_sys::Oid>,
) {
    // SAFETY: catalog reads of PostgreSQL's, by OID, of locked tables;
    // the caller's vector.
    unsafe {
        let oids = |list: *mut pg_sys::List| -> Vec<pg_sys::Oid> {
            if list.is_null() {
                return Vec::new();
            }
            (0..(*list).length as usize)
                .map(|i| (*(*list).elements.add(i)).oid_value)
                .collect()
        };
        let mut tables: Vec<pg_sys::Oid> = Vec::new();
        let mut seen: std::collections::HashSet<pg_sys::Oid> = Default::default();
        for &(rel, inh) in named {
            let all = if inh {
                crate::catalog::inheritors(rel)
            } else {
                vec![rel]
            };
            for r in all {
                if seen.insert(r) {
                    tables.push(r);
                }
            }
        }
        if (*stmt).behavior == pg_sys::DropBehavior::DROP_CASCADE {
            loop {
                pgrx::check_for_interrupts!();
                let mut list: *mut pg_sys::List = std::ptr::null_mut();
                for &r in &tables {
                    list = pg_sys::lappend_oid(list, r);
                }
                let more: Vec<pg_sys::Oid> = oids(pg_sys::heap_truncate_find_FKs(list))
                    .into_iter()
                    .filter(|r| seen.insert(*r))
                    .collect();
                if more.is_empty() {
                    break;
                }
                tables.extend(more);
            }
        }
        for rel in tables {
            (*out).extend(oids(pg_sys::getOwnedSequences(rel)));
        }
    }
}

/// [`counters_moved_by`]'s work: `ALTER SEQUENCE`'s sequence.
///
/// # Safety
/// `stmt` is a utility statement (or null); called guarded.
unsafe fn moved_by(stmt: *mut pg_sys::Node) -> Vec<pg_sys::Oid> {
    // SAFETY: the statement's own nodes; a name look-up without a lock
    // (RVR_MISSING_OK: the statement takes its lock and raises its own
    // errors).
    unsafe {
        if stmt.is_null() || (*stmt).type_ != pg_sys::NodeTag::T_AlterSeqStmt {
            return Vec::new();
        }
        crate::catalog::relation_named((*(stmt as *mut pg_sys::AlterSeqStmt)).sequence)
            .into_iter()
            .collect()
    }
}

/// An `ALTER SEQUENCE` of an adopted sequence that changes its bounds or
/// type (an identity's `ALTER TABLE … ALTER COLUMN … SET MAXVALUE` or
/// `TYPE` comes here too, as the subcommand PostgreSQL makes of it): its
/// counter stands at the end of its range (the fence, `adopt_record`),
/// which PostgreSQL checks against the new bounds ("RESTART value … cannot
/// be greater than MAXVALUE"), where a stock sequence's counter would
/// pass. The statement gets a `RESTART` (to its start, inside the new
/// bounds unless the statement fails on them itself, as on stock
/// PostgreSQL) unless it has one; [`refence_after`] then puts the counter
/// back at the new end. Transactional, as the statement: a rollback
/// takes both back. The statement is copied first where it is read-only.
#[pg_guard]
unsafe extern "C-unwind" fn restart_within_bounds(
    pstmt: *mut *mut pg_sys::PlannedStmt,
    read_only_tree: *mut bool,
    seq: pg_sys::Oid,
) {
    if !list::is_adopted(seq) {
        return;
    }
    // SAFETY: the statement PostgreSQL passes, an `AlterSeqStmt` whose
    // options are `DefElem`s; copied before any change where read-only.
    unsafe {
        let names = |stmt: *mut pg_sys::AlterSeqStmt| -> Vec<std::ffi::CString> {
            let opts = (*stmt).options;
            if opts.is_null() {
                return Vec::new();
            }
            (0..(*opts).length as usize)
                .map(|i| (*(*opts).elements.add(i)).ptr_value as *mut pg_sys::DefElem)
                .filter(|d| !d.is_null() && !(**d).defname.is_null())
                .map(|d| std::ffi::CStr::from_ptr((*d).defname).to_owned())
                .collect()
        };
        let stmt = (**pstmt).utilityStmt as *mut pg_sys::AlterSeqStmt;
        // CYCLE: its counter would come round, from the fence, to values it
        // gave out (the red-team review of 7d48b49, F1): refused, to a
        // caller with its owner's rights (any other gets PostgreSQL's
        // 42501, and learns nothing of the adoption: the review of
        // 2337972).
        let opts = (*stmt).options;
        let owner = crate::convert::as_owner::owner_of(seq);
        if !opts.is_null() && pg_sys::has_privs_of_role(pg_sys::GetUserId(), owner) {
            for i in 0..(*opts).length as usize {
                let d = (*(*opts).elements.add(i)).ptr_value as *mut pg_sys::DefElem;
                if !d.is_null()
                    && !(*d).defname.is_null()
                    && std::ffi::CStr::from_ptr((*d).defname) == c"cycle"
                    && pg_sys::defGetBoolean(d)
                {
                    super::errors::adopted_cycle(&crate::convert::as_owner::relation_name(seq));
                }
            }
        }
        let given = names(stmt);
        let has = |n: &std::ffi::CStr| given.iter().any(|g| g.as_c_str() == n);
        if has(c"restart") || !(has(c"maxvalue") || has(c"minvalue") || has(c"as")) {
            return;
        }
        if *read_only_tree {
            *pstmt = pg_sys::copyObjectImpl((*pstmt).cast()).cast();
            *read_only_tree = false;
        }
        let stmt = (**pstmt).utilityStmt as *mut pg_sys::AlterSeqStmt;
        let restart = pg_sys::makeDefElem(
            pg_sys::pstrdup(c"restart".as_ptr()),
            std::ptr::null_mut(),
            -1,
        );
        (*stmt).options = pg_sys::lappend((*stmt).options, restart.cast());
    }
}

/// `ALTER SEQUENCE … SET UNLOGGED` of an adopted sequence, or `ALTER
/// TABLE … SET UNLOGGED` of a table that owns one: refused (0A000). An
/// unlogged sequence comes back from a crash as its init fork holds it,
/// not at its fence, and its own values could be drawn again (the
/// red-team review of 7d48b49, F5); unlogged sequences are not adopted.
#[pg_guard]
unsafe extern "C-unwind" fn refuse_unlogged(stmt: *mut pg_sys::AlterTableStmt) {
    if !list::any_adopted() {
        return;
    }
    // SAFETY: the statement's own nodes; a name look-up without a lock
    // (the statement takes its own, and raises its own errors).
    unsafe {
        let cmds = (*stmt).cmds;
        let unlogged = !cmds.is_null()
            && (0..(*cmds).length as usize).any(|i| {
                let c = (*(*cmds).elements.add(i)).ptr_value as *mut pg_sys::AlterTableCmd;
                !c.is_null() && (*c).subtype == pg_sys::AlterTableType::AT_SetUnLogged
            });
        if !unlogged {
            return;
        }
        let Some(rel) = crate::catalog::relation_named((*stmt).relation) else {
            return;
        };
        let mut seqs = vec![rel];
        let owned = pg_sys::getOwnedSequences(rel);
        if !owned.is_null() {
            seqs.extend(
                (0..(*owned).length as usize).map(|i| (*(*owned).elements.add(i)).oid_value),
            );
        }
        if let Some(&seq) = seqs.iter().find(|&&s| list::is_adopted(s)) {
            super::errors::adopted_unlogged(&crate::convert::as_owner::relation_name(seq));
        }
    }
}

/// After the statement: [`super::calls::refence`], guarded. (A `Vec`: a
/// slice is no C type.)
#[allow(clippy::ptr_arg)]
#[pg_guard]
unsafe extern "C-unwind" fn refence_after(seqs: &Vec<pg_sys::Oid>) {
    super::calls::refence(seqs);
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
            if let Some(f) = list::active() {
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
