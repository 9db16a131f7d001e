//! The walks of a statement's tree: [`swap`] puts the functions of
//! [`super::calls`] in place of the four built-ins and wraps an identity
//! column's draw; [`mentions`] finds a call of the four; [`draw_in`] a
//! draw from a sequence. Each is unguarded and calls PostgreSQL's walkers
//! unguarded (see [`raw`]): it runs once per node (a guard per node took
//! 1.5 kB of stack per level: a deep body ran out of stack), and holds
//! nothing to drop.

use super::list::Fns;
use pgrx::pg_sys;

/// PostgreSQL's own walkers (and, in [`super::planner`] and
/// [`super::utility`], its planner and utility processor), called
/// without pgrx's guard: an ERROR inside them (any statement's, a DO
/// block's with its PL/pgSQL CONTEXT) must reach the caller as PostgreSQL
/// raised it, not re-raised by pgrx at our frame without its CONTEXT. The
/// frames of our callers hold nothing to drop, so the error's longjmp
/// passes over them; the hooks' own work runs in guarded functions.
mod raw {
    use pgrx::pg_sys::{Node, Query};
    use std::ffi::{c_int, c_void};
    /// A tree walker's callback.
    pub type Walker = Option<unsafe extern "C-unwind" fn(*mut Node, *mut c_void) -> bool>;
    unsafe extern "C-unwind" {
        #[cfg_attr(not(feature = "pg15"), link_name = "expression_tree_walker_impl")]
        pub fn expression_tree_walker(
            node: *mut Node,
            walker: Walker,
            context: *mut c_void,
        ) -> bool;
        #[cfg_attr(not(feature = "pg15"), link_name = "raw_expression_tree_walker_impl")]
        pub fn raw_expression_tree_walker(
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
    }
}

pub(super) use raw::Walker;

/// PostgreSQL's `expression_tree_walker`, unguarded (see [`raw`]), for
/// the walkers of [`super::execute`].
///
/// # Safety
/// `node` is a valid node of an analysed tree; `walker` as PostgreSQL's.
pub(super) unsafe fn expression_walk(
    node: *mut pg_sys::Node,
    walker: Walker,
    ctx: *mut std::ffi::c_void,
) -> bool {
    // SAFETY: as the caller promises.
    unsafe { raw::expression_tree_walker(node, walker, ctx) }
}

/// PostgreSQL's `raw_expression_tree_walker`, unguarded (see [`raw`]),
/// for walkers of raw parse trees.
///
/// # Safety
/// `node` is a valid node of a raw parse tree; `walker` as PostgreSQL's.
pub(super) unsafe fn raw_walk(
    node: *mut pg_sys::Node,
    walker: Walker,
    ctx: *mut std::ffi::c_void,
) -> bool {
    // SAFETY: as the caller promises.
    unsafe { raw::raw_expression_tree_walker(node, walker, ctx) }
}

/// Whether a raw parse tree calls a function named `nextval`, `currval`,
/// `setval` or `lastval` (in any schema, however the name was spelled:
/// the parser has decoded `U&"\0073etval"`). Unguarded, as [`swap`].
pub(super) unsafe extern "C-unwind" fn names_the_four(
    node: *mut pg_sys::Node,
    ctx: *mut std::ffi::c_void,
) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: nodes of a raw parse tree; a `FuncCall`'s name is a list of
    // `String` nodes.
    unsafe {
        if (*node).type_ == pg_sys::NodeTag::T_FuncCall {
            let names = (*(node as *mut pg_sys::FuncCall)).funcname;
            if !names.is_null() && (*names).length > 0 {
                let last = (*(*names).elements.add((*names).length as usize - 1)).ptr_value
                    as *mut pg_sys::String;
                if !last.is_null() && (*last).type_ == pg_sys::NodeTag::T_String {
                    let name = std::ffi::CStr::from_ptr((*last).sval).to_bytes();
                    if [&b"nextval"[..], b"currval", b"setval", b"lastval"].contains(&name) {
                        return true;
                    }
                }
            }
        }
        raw::raw_expression_tree_walker(node, Some(names_the_four), ctx)
    }
}

/// What a raw parse tree names, into `ctx`, a [`RawNames`]: the
/// functions it calls (each `FuncCall`'s last name, as a C string of the
/// tree), the relations it names (its `RangeVar`s) and its operators
/// (each `A_Expr`'s name list). Unguarded, as [`swap`]: it calls nothing
/// of PostgreSQL's but its walker.
pub(super) unsafe extern "C-unwind" fn raw_names(
    node: *mut pg_sys::Node,
    ctx: *mut std::ffi::c_void,
) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: nodes of a raw parse tree; `ctx` as above.
    unsafe {
        let c = &mut *(ctx as *mut RawNames);
        match (*node).type_ {
            pg_sys::NodeTag::T_FuncCall => {
                let names = (*(node as *mut pg_sys::FuncCall)).funcname;
                if !names.is_null() && (*names).length > 0 {
                    let last = (*(*names).elements.add((*names).length as usize - 1)).ptr_value
                        as *mut pg_sys::String;
                    if !last.is_null() && (*last).type_ == pg_sys::NodeTag::T_String {
                        c.functions.push((*last).sval);
                    }
                }
            }
            pg_sys::NodeTag::T_RangeVar => c.relations.push(node.cast()),
            pg_sys::NodeTag::T_A_Expr => {
                let names = (*(node as *mut pg_sys::A_Expr)).name;
                if !names.is_null() {
                    c.operators.push(names);
                }
            }
            _ => {}
        }
        raw::raw_expression_tree_walker(node, Some(raw_names), ctx)
    }
}

/// What [`raw_names`] collects.
#[derive(Default)]
pub(super) struct RawNames {
    pub(super) functions: Vec<*const std::ffi::c_char>,
    pub(super) relations: Vec<*mut pg_sys::RangeVar>,
    pub(super) operators: Vec<*mut pg_sys::List>,
}

/// Whether some operator of name `names` (any argument types, as the
/// search path or the schema named finds them) calls one of the four: a
/// body using it may not be inlined (the red-team review of 6dda376, F2:
/// an operator over `setval()` in an inlined SQL body moved an adopted
/// sequence's counter back). In a guarded context.
///
/// # Safety
/// `names` is a raw operator name list.
pub(super) unsafe fn operator_calls_the_four(names: *mut pg_sys::List) -> bool {
    // SAFETY: a catalog look-up of the operators of that name.
    unsafe {
        let mut c = pg_sys::OpernameGetCandidates(names, 0, true);
        while !c.is_null() {
            if is_builtin(pg_sys::get_opcode((*c).oid)) {
                return true;
            }
            c = (*c).next;
        }
    }
    false
}

/// Whether a parsed tree's queries read a view (a range table entry of a
/// view, which the rewriter expands only once the planner inlines the
/// function that holds it). Unguarded, as [`swap`].
pub(super) unsafe extern "C-unwind" fn reads_view(
    node: *mut pg_sys::Node,
    ctx: *mut std::ffi::c_void,
) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: nodes of a parsed tree.
    unsafe {
        match (*node).type_ {
            pg_sys::NodeTag::T_Query => raw::query_tree_walker(
                node.cast(),
                Some(reads_view),
                ctx,
                pg_sys::QTW_EXAMINE_RTES_BEFORE as _,
            ),
            pg_sys::NodeTag::T_RangeTblEntry => {
                let rte = node as *mut pg_sys::RangeTblEntry;
                (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION
                    && (*rte).relkind as u8 == pg_sys::RELKIND_VIEW
            }
            _ => raw::expression_tree_walker(node, Some(reads_view), ctx),
        }
    }
}

/// Whether `f` is one of the four built-ins (setval in both forms).
pub(super) fn is_builtin(f: pg_sys::Oid) -> bool {
    [
        pg_sys::F_NEXTVAL,
        pg_sys::F_CURRVAL,
        pg_sys::F_SETVAL_REGCLASS_INT8,
        pg_sys::F_SETVAL_REGCLASS_INT8_BOOL,
        pg_sys::F_LASTVAL,
    ]
    .contains(&f.to_u32())
}

/// Whether a parsed tree calls one of the four built-ins (as a function
/// or through an operator). Unguarded, and calling PostgreSQL's walkers
/// unguarded, as [`swap`]: once per node (a guard per node took 1.5 kB of
/// stack per level: a deep body ran out of stack), holding nothing to drop.
pub(super) unsafe extern "C-unwind" fn mentions(
    node: *mut pg_sys::Node,
    ctx: *mut std::ffi::c_void,
) -> bool {
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
        // A function whose defaults call one of them (the red-team review
        // of 9aee40a, F2: inlined into a caller's statement, a call that
        // left them out was completed after the swap).
        if (*node).type_ == pg_sys::NodeTag::T_FuncExpr
            && defaults_call_the_four_from_walk((*(node as *mut pg_sys::FuncExpr)).funcid)
        {
            return true;
        }
        raw::expression_tree_walker(node, Some(mentions), ctx)
    }
}

/// The walker of [`super::utility`]'s `copy_draws`: an identity's draw, or a call of
/// `nextval()`. Unguarded, as [`swap`].
pub(super) unsafe extern "C-unwind" fn draw_in(
    node: *mut pg_sys::Node,
    ctx: *mut std::ffi::c_void,
) -> bool {
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

/// How many nodes of an expression call function `ctx.0` (a `FuncExpr`,
/// or an operator over it), added to `ctx.1`. Unguarded, as [`swap`].
pub(super) unsafe extern "C-unwind" fn count_calls(
    node: *mut pg_sys::Node,
    ctx: *mut std::ffi::c_void,
) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: nodes of an expression tree; `ctx` is a `(Oid, usize)`.
    unsafe {
        let c = &mut *(ctx as *mut (pg_sys::Oid, usize));
        let f = called_function(node);
        if !f.is_null() && *f == c.0 {
            c.1 += 1;
        }
        raw::expression_tree_walker(node, Some(count_calls), ctx)
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

thread_local! {
    /// [`defaults_call_the_four`] per function, forgotten when any
    /// function changes (`super::planner`'s syscache callback).
    static DEFAULTS: std::cell::RefCell<std::collections::HashMap<pg_sys::Oid, bool>> =
        std::cell::RefCell::new(Default::default());
}

/// Forget what [`defaults_call_the_four`] learnt (a function changed).
pub(super) fn forget_defaults() {
    DEFAULTS.with(|d| d.borrow_mut().clear());
}

/// Whether a function's default arguments call one of the four (as a
/// function or through an operator, or through another function's
/// defaults). PostgreSQL's own functions' never do. Cached per backend;
/// the borrow is let go before PostgreSQL is called, and a function is
/// marked `true` while its defaults are walked (a default that calls its
/// own function ends there, and a walk that fails leaves the cautious
/// answer).
///
/// Guarded: the walkers call it where an ERROR of PostgreSQL's (a default
/// too deep to read back: the red-team review of 9aee40a, F1) must reach
/// PostgreSQL as an ERROR, not as a Rust panic through its C frames,
/// which aborted the server. They ask [`defaults_known`] first, which
/// calls nothing of PostgreSQL's.
#[pgrx::pg_guard]
pub(super) unsafe extern "C-unwind" fn defaults_call_the_four(f: pg_sys::Oid) -> bool {
    if let Some(v) = defaults_known(f) {
        return v;
    }
    // `true` while its defaults are walked: where the walk ends in an
    // ERROR (a default too deep), the function stays marked, and calls
    // that leave its defaults out are completed before the swap.
    DEFAULTS.with(|d| d.borrow_mut().insert(f, true));
    let v = super::proc::read(f)
        .and_then(|p| p.defaults)
        // SAFETY: PostgreSQL's reader over a node tree it wrote, walked
        // unguarded (see `raw`), in this guarded function.
        .is_some_and(|d| unsafe {
            mentions(
                pg_sys::stringToNode(d.as_ptr()).cast(),
                std::ptr::null_mut(),
            )
        });
    DEFAULTS.with(|d| d.borrow_mut().insert(f, v));
    v
}

/// [`defaults_call_the_four`]'s answer where it needs nothing of
/// PostgreSQL's: `false` for PostgreSQL's own functions, the cached one
/// for others, `None` where it must look.
fn defaults_known(f: pg_sys::Oid) -> Option<bool> {
    if f.to_u32() < pg_sys::FirstNormalObjectId {
        return Some(false);
    }
    DEFAULTS.with(|d| d.borrow().get(&f).copied())
}

/// Whether a function's defaults call one of the four, from a walker:
/// the cache first, then the guarded look-up.
///
/// # Safety
/// Called from a walker, with nothing to drop.
pub(super) unsafe fn defaults_call_the_four_from_walk(f: pg_sys::Oid) -> bool {
    // SAFETY: a guarded function of ours.
    defaults_known(f).unwrap_or_else(|| unsafe { defaults_call_the_four(f) })
}

/// A function call that leaves out arguments whose defaults call one of
/// the four: its arguments completed as the planner would complete them,
/// later (`expand_function_arguments`), so that [`swap`] sees those calls
/// (the red-team review of 930c88a, P1: `f(a int, b bigint DEFAULT
/// nextval('s'))` drew the sequence's own values). Asks the cache
/// first; the completion itself runs guarded ([`complete_guarded`]).
///
/// # Safety
/// `fe` is a `FuncExpr` of a tree the caller may change; called from a
/// walker, with nothing to drop.
unsafe fn complete_defaults(fe: *mut pg_sys::FuncExpr) {
    // SAFETY: the node's own field; guarded functions of ours.
    unsafe {
        if defaults_call_the_four_from_walk((*fe).funcid) {
            complete_guarded(fe);
        }
    }
}

/// [`complete_defaults`]'s completion, guarded (see
/// [`defaults_call_the_four`]).
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn complete_guarded(fe: *mut pg_sys::FuncExpr) {
    // SAFETY: the node's own fields; a syscache look-up and release
    // around PostgreSQL's own expansion.
    unsafe {
        let tup = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::PROCOID as _,
            pg_sys::Datum::from((*fe).funcid),
        );
        if tup.is_null() {
            return;
        }
        (*fe).args =
            pg_sys::expand_function_arguments((*fe).args, false, (*fe).funcresulttype, tup);
        pg_sys::ReleaseSysCache(tup);
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
        let seq = (*(node as *mut pg_sys::NextValueExpr)).seqid;
        if typ == pg_sys::INT8OID
            && f.identity != pg_sys::Oid::INVALID
            && super::list::is_adopted_known(seq)
        {
            // An adopted identity (issue 63: it stays an identity): its
            // draw is a Snowflake ID.
            *slot = identity_draw(f.identity, seq);
            return;
        }
        let drawn = f.drawn_of(typ);
        if drawn == pg_sys::Oid::INVALID {
            return;
        }
        *slot = call_of(drawn, typ, node);
    }
}

/// `drawn(arg)`, a call returning `typ`, made guarded (an allocation's
/// ERROR must reach PostgreSQL as one, not as a panic through the
/// walkers' C frames: see [`defaults_call_the_four`]).
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn call_of(
    drawn: pg_sys::Oid,
    typ: pg_sys::Oid,
    arg: *mut pg_sys::Node,
) -> *mut pg_sys::Node {
    // SAFETY: node constructors of PostgreSQL, in the current memory
    // context.
    unsafe {
        let args = pg_sys::lappend(std::ptr::null_mut(), arg.cast());
        pg_sys::makeFuncExpr(
            drawn,
            typ,
            args,
            pg_sys::InvalidOid,
            pg_sys::InvalidOid,
            pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
        )
        .cast()
    }
}

/// Whether a `seq_drawn(…)` call's one argument is an identity's draw
/// (a `NextValueExpr`), as [`wrap_draw`] makes it.
///
/// # Safety
/// `fe` is a valid `FuncExpr`.
unsafe fn wraps_identity_draw(fe: *mut pg_sys::FuncExpr) -> bool {
    // SAFETY: the node's argument list, of nodes.
    unsafe {
        let args = (*fe).args;
        !args.is_null() && (*args).length == 1 && {
            let a = (*(*args).elements).ptr_value as *mut pg_sys::Node;
            !a.is_null() && (*a).type_ == pg_sys::NodeTag::T_NextValueExpr
        }
    }
}

/// `seq_identity(seq)`: an adopted identity column's draw, in place of
/// its `NextValueExpr` (here and in [`super::copy`]).
///
/// # Safety
/// Allocates in the current memory context.
#[pgrx::pg_guard]
pub(super) unsafe extern "C-unwind" fn identity_draw(
    identity: pg_sys::Oid,
    seq: pg_sys::Oid,
) -> *mut pg_sys::Node {
    // SAFETY: node constructors of PostgreSQL.
    unsafe {
        let arg = pg_sys::makeConst(
            pg_sys::REGCLASSOID,
            -1,
            pg_sys::InvalidOid,
            4,
            pg_sys::Datum::from(seq),
            false,
            true,
        );
        let args = pg_sys::lappend(std::ptr::null_mut(), arg.cast());
        pg_sys::makeFuncExpr(
            identity,
            pg_sys::INT8OID,
            args,
            pg_sys::InvalidOid,
            pg_sys::InvalidOid,
            pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
        )
        .cast()
    }
}

/// The walker: every query and expression of the statement, subqueries,
/// CTEs and sublinks included; each `FuncExpr` of the four functions gets
/// its replacement's OID, and each identity column's draw is wrapped
/// ([`wrap_draw`]). Unguarded, and calling PostgreSQL's walkers
/// unguarded (see [`raw`]): it is called once per node, and holds
/// nothing to drop.
pub(super) unsafe extern "C-unwind" fn swap(
    node: *mut pg_sys::Node,
    ctx: *mut std::ffi::c_void,
) -> bool {
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
            // A draw wrapped already (by `wrap_draw`: its argument an
            // identity's `NextValueExpr`): nothing more inside. A call of
            // `seq_drawn` written by hand around anything else is walked
            // (the red-team review of 7d48b49, F3: it hid a `nextval()`).
            pg_sys::NodeTag::T_FuncExpr
                if f.drawn.contains(&(*(node as *mut pg_sys::FuncExpr)).funcid)
                    && wraps_identity_draw(node.cast()) =>
            {
                return false;
            }
            pg_sys::NodeTag::T_FuncExpr => complete_defaults(node.cast()),
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

/// Whether a statement's tree certainly holds nothing for [`swap`] to do:
/// no call of the four (as a function or through an operator), no
/// function of a user's (whose default arguments may call them), no
/// identity draw, and nothing this test does not know (a subquery, a
/// CTE, a sublink, a view expanded or a policy added by the rewriter, an
/// aggregate). Read-only and calling nothing of PostgreSQL's, so the
/// planner hook asks it first: a statement such as `pgbench -S`'s is then
/// planned as on stock PostgreSQL, without the walk or the list's look-up
/// (issue 63, part 7: the walk cost 1.3% of that statement). `false`
/// sends the statement to the full walk; so does a tree deeper than 200
/// levels (PostgreSQL's walkers check the stack, this does not).
///
/// # Safety
/// `node` is a valid node of a query tree, or null.
pub(super) unsafe fn clean(node: *mut pg_sys::Node, depth: u32) -> bool {
    use pg_sys::NodeTag as T;
    if node.is_null() {
        return true;
    }
    if depth > 200 {
        return false;
    }
    let d = depth + 1;
    // SAFETY: each node read as the type its tag names; lists as lists.
    unsafe {
        match (*node).type_ {
            T::T_Query => {
                let q = &*(node as *mut pg_sys::Query);
                matches!(
                    q.commandType,
                    pg_sys::CmdType::CMD_SELECT
                        | pg_sys::CmdType::CMD_INSERT
                        | pg_sys::CmdType::CMD_UPDATE
                        | pg_sys::CmdType::CMD_DELETE
                ) && q.utilityStmt.is_null()
                    && q.cteList.is_null()
                    && q.onConflict.is_null()
                    && q.mergeActionList.is_null()
                    && q.withCheckOptions.is_null()
                    && q.setOperations.is_null()
                    && q.windowClause.is_null()
                    && q.havingQual.is_null()
                    && q.limitOffset.is_null()
                    && q.limitCount.is_null()
                    && clean_list(q.rtable, d)
                    && clean(q.jointree.cast(), d)
                    && clean_list(q.targetList, d)
                    && clean_list(q.returningList, d)
            }
            T::T_RangeTblEntry => {
                let r = &*(node as *mut pg_sys::RangeTblEntry);
                r.rtekind == pg_sys::RTEKind::RTE_RELATION
                    && r.tablesample.is_null()
                    && r.securityQuals.is_null()
            }
            T::T_FromExpr => {
                let f = &*(node as *mut pg_sys::FromExpr);
                clean_list(f.fromlist, d) && clean(f.quals, d)
            }
            T::T_JoinExpr => {
                let j = &*(node as *mut pg_sys::JoinExpr);
                clean(j.larg, d) && clean(j.rarg, d) && clean(j.quals, d)
            }
            T::T_List => clean_list(node.cast(), d),
            T::T_IntList | T::T_OidList => true,
            T::T_TargetEntry => clean((*(node as *mut pg_sys::TargetEntry)).expr.cast(), d),
            T::T_RangeTblRef | T::T_Var | T::T_Const | T::T_Param | T::T_SortGroupClause => true,
            T::T_FuncExpr => {
                let f = &*(node as *mut pg_sys::FuncExpr);
                plain(f.funcid) && clean_list(f.args, d)
            }
            T::T_OpExpr | T::T_DistinctExpr | T::T_NullIfExpr => {
                let o = &*(node as *mut pg_sys::OpExpr);
                plain(o.opfuncid) && clean_list(o.args, d)
            }
            T::T_ScalarArrayOpExpr => {
                let o = &*(node as *mut pg_sys::ScalarArrayOpExpr);
                plain(o.opfuncid) && clean_list(o.args, d)
            }
            T::T_BoolExpr => clean_list((*(node as *mut pg_sys::BoolExpr)).args, d),
            T::T_RelabelType => clean((*(node as *mut pg_sys::RelabelType)).arg.cast(), d),
            T::T_CoerceViaIO => clean((*(node as *mut pg_sys::CoerceViaIO)).arg.cast(), d),
            T::T_NullTest => clean((*(node as *mut pg_sys::NullTest)).arg.cast(), d),
            T::T_BooleanTest => clean((*(node as *mut pg_sys::BooleanTest)).arg.cast(), d),
            T::T_CoalesceExpr => clean_list((*(node as *mut pg_sys::CoalesceExpr)).args, d),
            T::T_MinMaxExpr => clean_list((*(node as *mut pg_sys::MinMaxExpr)).args, d),
            T::T_ArrayExpr => clean_list((*(node as *mut pg_sys::ArrayExpr)).elements, d),
            T::T_CaseExpr => {
                let c = &*(node as *mut pg_sys::CaseExpr);
                clean(c.arg.cast(), d) && clean_list(c.args, d) && clean(c.defresult.cast(), d)
            }
            T::T_CaseWhen => {
                let w = &*(node as *mut pg_sys::CaseWhen);
                clean(w.expr.cast(), d) && clean(w.result.cast(), d)
            }
            _ => false,
        }
    }
}

/// [`clean`] of every element of a list of nodes (`NIL`: true).
///
/// # Safety
/// `list` is a valid list of nodes, or null.
unsafe fn clean_list(list: *mut pg_sys::List, depth: u32) -> bool {
    if list.is_null() {
        return true;
    }
    // SAFETY: the list's own elements.
    unsafe {
        let n = (*list).length as usize;
        let cells = (*list).elements;
        for i in 0..n {
            if !clean((*cells.add(i)).ptr_value.cast(), depth) {
                return false;
            }
        }
    }
    true
}

/// A built-in function that is none of the four: its defaults are
/// PostgreSQL's, and it draws from no sequence itself ([`clean`]).
#[inline]
fn plain(f: pg_sys::Oid) -> bool {
    let f = f.to_u32();
    f != 0
        && f < pg_sys::FirstNormalObjectId
        && !matches!(
            f,
            pg_sys::F_NEXTVAL
                | pg_sys::F_CURRVAL
                | pg_sys::F_SETVAL_REGCLASS_INT8
                | pg_sys::F_SETVAL_REGCLASS_INT8_BOOL
                | pg_sys::F_LASTVAL
        )
}
