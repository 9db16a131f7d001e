//! `EXECUTE p(nextval('s'))`: PostgreSQL evaluates an `EXECUTE`'s
//! parameters without a plan (`EvaluateParams`: parse analysis, then the
//! executor), so no planner hook sees their calls, and the built-ins ran
//! on the sequence's own counter: `nextval()` met the fence (2200H), and
//! `setval(s, 1, false)` moved the counter back past it, after which
//! `nextval()` there handed out the sequence's own values again (the
//! red-team review of 21bfa7b). Issue 63 asks that every draw be a
//! Snowflake ID or an error.
//!
//! The utility hook ([`super::utility`]) hands the statement here before
//! it runs. Its parameters are analysed once, as `EvaluateParams` will
//! analyse them, to learn which calls reach the four built-ins. Each call
//! written by name that may touch an adopted sequence (its argument is
//! one, or is no constant) is evaluated here with the planner's swaps
//! ([`super::walk::swap`], so `nextval()` mints as it does in a planned
//! statement: see [`super::calls`]), outermost calls first, and its raw
//! `FuncCall` becomes `pg_catalog.int8(<its value>)`, which PostgreSQL
//! then analyses and runs. (Not the replacement's name: a role need not
//! have USAGE on the extension's internal schema.) So such a call is
//! evaluated even where the parameter's `CASE` would not reach it. A
//! call that reaches a built-in some other way (an operator over
//! `nextval`) and may touch an adopted sequence is refused (0A000), with
//! a HINT.

use super::list::{self, Fns};
use super::walk;
use pgrx::pg_sys;

mod raw {
    use pgrx::pg_sys::Node;
    use std::ffi::c_void;
    unsafe extern "C-unwind" {
        #[cfg_attr(not(feature = "pg15"), link_name = "raw_expression_tree_walker_impl")]
        pub fn raw_expression_tree_walker(
            node: *mut Node,
            walker: super::walk::Walker,
            context: *mut c_void,
        ) -> bool;
    }
}

/// The `EXECUTE` a utility statement runs, if any: the statement itself,
/// or the one an `EXPLAIN` or a `CREATE TABLE … AS` wraps.
///
/// # Safety
/// `stmt` is a utility statement (or null).
pub(super) unsafe fn execute_of(stmt: *mut pg_sys::Node) -> *mut pg_sys::ExecuteStmt {
    // SAFETY: each node read as the type its tag names.
    unsafe {
        if stmt.is_null() {
            return std::ptr::null_mut();
        }
        let inner = match (*stmt).type_ {
            pg_sys::NodeTag::T_ExecuteStmt => return stmt.cast(),
            pg_sys::NodeTag::T_ExplainStmt => (*(stmt as *mut pg_sys::ExplainStmt)).query,
            pg_sys::NodeTag::T_CreateTableAsStmt => {
                (*(stmt as *mut pg_sys::CreateTableAsStmt)).query
            }
            _ => return std::ptr::null_mut(),
        };
        if inner.is_null() || (*inner).type_ != pg_sys::NodeTag::T_Query {
            return std::ptr::null_mut();
        }
        let u = (*(inner as *mut pg_sys::Query)).utilityStmt;
        if !u.is_null() && (*u).type_ == pg_sys::NodeTag::T_ExecuteStmt {
            u.cast()
        } else {
            std::ptr::null_mut()
        }
    }
}

/// Whether a raw parameter may call a function: a function call, or an
/// operator. Parameters of constants only (the common case) are not
/// analysed twice.
unsafe extern "C-unwind" fn may_call(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: nodes of a raw expression tree.
    unsafe {
        if matches!(
            (*node).type_,
            pg_sys::NodeTag::T_FuncCall | pg_sys::NodeTag::T_A_Expr
        ) {
            return true;
        }
        raw::raw_expression_tree_walker(node, Some(may_call), ctx)
    }
}

/// A call of one of the four built-ins in an analysed parameter.
struct Found {
    /// The built-in's OID.
    func: pg_sys::Oid,
    /// Its `FuncExpr`'s location (that of the raw `FuncCall` it was
    /// analysed from, if it was written by name), or -1 for an operator.
    location: i32,
    /// The sequence it names, where its first argument is a constant.
    seq: Option<pg_sys::Oid>,
    /// The analysed call.
    expr: *mut pg_sys::Node,
}

/// The walker that collects [`Found`] calls (`ctx` is a `Vec<Found>`).
/// Unguarded, as [`walk::swap`].
unsafe extern "C-unwind" fn collect(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: nodes of an analysed expression; `ctx` is a `Vec<Found>`.
    unsafe {
        let out = &mut *(ctx as *mut Vec<Found>);
        let (func, location, args) = match (*node).type_ {
            pg_sys::NodeTag::T_FuncExpr => {
                let f = node as *mut pg_sys::FuncExpr;
                ((*f).funcid, (*f).location, (*f).args)
            }
            pg_sys::NodeTag::T_OpExpr
            | pg_sys::NodeTag::T_DistinctExpr
            | pg_sys::NodeTag::T_NullIfExpr => {
                let o = node as *mut pg_sys::OpExpr;
                (
                    if (*o).opfuncid == pg_sys::InvalidOid {
                        pg_sys::get_opcode((*o).opno)
                    } else {
                        (*o).opfuncid
                    },
                    -1,
                    (*o).args,
                )
            }
            _ => (pg_sys::InvalidOid, -1, std::ptr::null_mut()),
        };
        if walk::is_builtin(func) {
            let first = if args.is_null() || (*args).length == 0 {
                std::ptr::null_mut()
            } else {
                (*(*args).elements).ptr_value as *mut pg_sys::Node
            };
            let seq = (!first.is_null()
                && (*first).type_ == pg_sys::NodeTag::T_Const
                && !(*(first as *mut pg_sys::Const)).constisnull)
                .then(|| {
                    pg_sys::Oid::from((*(first as *mut pg_sys::Const)).constvalue.value() as u32)
                });
            out.push(Found {
                func,
                location,
                seq,
                expr: node,
            });
            // Its arguments are evaluated with it, swapped.
            return false;
        }
        walk::expression_walk(node, Some(collect), ctx)
    }
}

/// The walker that collects the locations of a raw tree's `FuncCall`s
/// (`ctx` is a `Vec<i32>`). Unguarded, as [`walk::swap`].
unsafe extern "C-unwind" fn calls_at(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: nodes of a raw expression tree; `ctx` is a `Vec<i32>`.
    unsafe {
        if (*node).type_ == pg_sys::NodeTag::T_FuncCall {
            (*(ctx as *mut Vec<i32>)).push((*(node as *mut pg_sys::FuncCall)).location);
        }
        raw::raw_expression_tree_walker(node, Some(calls_at), ctx)
    }
}

/// The walker that puts values in place of calls (`ctx` is a
/// `Vec<(i32, Option<i64>)>`): each raw `FuncCall` at one of the
/// locations becomes `pg_catalog.int8(<value>)` (or of a null).
/// Unguarded, as [`walk::swap`].
unsafe extern "C-unwind" fn replace(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: nodes of a raw expression tree; `ctx` as above; the new
    // nodes allocated in the current memory context, the statement's.
    unsafe {
        let values = &*(ctx as *const Vec<(i32, Option<i64>)>);
        if (*node).type_ == pg_sys::NodeTag::T_FuncCall {
            let call = node as *mut pg_sys::FuncCall;
            if let Some((_, v)) = values.iter().find(|(l, _)| *l == (*call).location) {
                let c =
                    pg_sys::palloc0(std::mem::size_of::<pg_sys::A_Const>()) as *mut pg_sys::A_Const;
                (*c).type_ = pg_sys::NodeTag::T_A_Const;
                (*c).location = -1;
                match v {
                    Some(v) => {
                        let text = std::ffi::CString::new(v.to_string()).expect("digits");
                        (*c).val.fval = pg_sys::Float {
                            type_: pg_sys::NodeTag::T_Float,
                            fval: pg_sys::pstrdup(text.as_ptr()),
                        };
                    }
                    None => (*c).isnull = true,
                }
                let schema = pg_sys::makeString(pg_sys::pstrdup(c"pg_catalog".as_ptr()));
                let int8 = pg_sys::makeString(pg_sys::pstrdup(c"int8".as_ptr()));
                (*call).funcname = pg_sys::lappend(
                    pg_sys::lappend(std::ptr::null_mut(), schema.cast()),
                    int8.cast(),
                );
                (*call).args = pg_sys::lappend(std::ptr::null_mut(), c.cast());
                (*call).func_variadic = false;
                return false;
            }
        }
        raw::raw_expression_tree_walker(node, Some(replace), ctx)
    }
}

/// Evaluate an analysed call of the four with the planner's swaps: its
/// value (an `int8`), or `None` for a null.
///
/// # Safety
/// `expr` is an analysed expression that may be changed; called guarded.
unsafe fn evaluate(expr: *mut pg_sys::Node, f: &Fns) -> Option<i64> {
    // SAFETY: PostgreSQL's executor over an analysed expression, in an
    // executor state of its own.
    unsafe {
        let mut fns = *f;
        walk::swap(expr, (&raw mut fns).cast());
        let estate = pg_sys::CreateExecutorState();
        let state = pg_sys::ExecPrepareExpr(expr.cast(), estate);
        let econtext = pg_sys::MakePerTupleExprContext(estate);
        let mut isnull = false;
        let d = pg_sys::ExecEvalExprSwitchContext(state, econtext, &mut isnull);
        let v = (!isnull).then(|| d.value() as i64);
        pg_sys::FreeExecutorState(estate);
        v
    }
}

/// A built-in's name, for messages.
fn name_of(func: pg_sys::Oid) -> &'static str {
    match func.to_u32() {
        pg_sys::F_NEXTVAL => "nextval",
        pg_sys::F_CURRVAL => "currval",
        pg_sys::F_LASTVAL => "lastval",
        _ => "setval",
    }
}

/// Swap the calls of the parameters of the `EXECUTE` that `*pstmt` runs
/// (see the module; a read-only statement copied first, as utility.c
/// itself does), in a database with adopted sequences; or, where this
/// backend could not read the list, refuse a statement whose parameters
/// call one of the four (as a `CALL`'s arguments are refused). A
/// statement PostgreSQL will refuse before it evaluates its parameters
/// (no such prepared statement, a wrong number of parameters) is left to
/// it.
///
/// # Safety
/// `*pstmt` is the utility statement PostgreSQL passes; `source` its
/// text (or null).
#[pgrx::pg_guard]
pub(super) unsafe extern "C-unwind" fn swap_parameters(
    pstmt: *mut *mut pg_sys::PlannedStmt,
    read_only_tree: *mut bool,
    source: *const std::ffi::c_char,
    env: *mut pg_sys::QueryEnvironment,
) {
    // SAFETY: the statement's raw parameters, analysed in copies as
    // `EvaluateParams` analyses them; names looked up in the syscache.
    unsafe {
        let stmt = execute_of((**pstmt).utilityStmt);
        if stmt.is_null() {
            return;
        }
        let params = (*stmt).params;
        if params.is_null() || (*params).length == 0 {
            return;
        }
        let f = list::active().unwrap_or(Fns::NONE);
        let unreadable = f.nextval == pg_sys::Oid::INVALID;
        if unreadable && !list::unreadable() {
            return;
        }
        if !may_call(params.cast(), std::ptr::null_mut()) {
            return;
        }
        let entry = pg_sys::FetchPreparedStatement((*stmt).name, false);
        if entry.is_null() || (*(*entry).plansource).num_params != (*params).length {
            return;
        }
        let pstate = pg_sys::make_parsestate(std::ptr::null_mut());
        (*pstate).p_sourcetext = source;
        (*pstate).p_queryEnv = env;
        let mut found: Vec<Found> = Vec::new();
        for i in 0..(*params).length as usize {
            let copy = pg_sys::copyObjectImpl((*(*params).elements.add(i)).ptr_value);
            let analysed = pg_sys::transformExpr(
                pstate,
                copy.cast(),
                pg_sys::ParseExprKind::EXPR_KIND_EXECUTE_PARAMETER,
            );
            collect(analysed, (&raw mut found).cast());
        }
        pg_sys::free_parsestate(pstate);
        if found.is_empty() {
            return;
        }
        if unreadable {
            list::refuse_unreadable();
        }
        // A call written by name: the raw `FuncCall` at its location (one
        // only: two calls at one place would be no parse of ours).
        let mut raw_calls: Vec<i32> = Vec::new();
        calls_at(params.cast(), (&raw mut raw_calls).cast());
        let by_name = |l: i32| l >= 0 && raw_calls.iter().filter(|&&r| r == l).count() == 1;
        let mut values: Vec<(i32, Option<i64>)> = Vec::new();
        for c in &found {
            // A constant sequence that is not adopted: PostgreSQL's own.
            if c.seq.is_some_and(|s| !list::is_adopted(s)) {
                continue;
            }
            if !by_name(c.location) {
                let seq = c.seq.map(crate::convert::as_owner::relation_name);
                crate::errors::adopt_execute_operator(name_of(c.func), seq.as_deref());
            }
            values.push((c.location, evaluate(c.expr, &f)));
        }
        if values.is_empty() {
            return;
        }
        if *read_only_tree {
            *pstmt = pg_sys::copyObjectImpl((*pstmt).cast()).cast();
            *read_only_tree = false;
        }
        let params = (*execute_of((**pstmt).utilityStmt)).params;
        replace(params.cast(), (&raw mut values).cast());
    }
}
