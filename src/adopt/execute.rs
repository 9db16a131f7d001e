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
//! it runs. Its parameters are analysed, as `EvaluateParams` will analyse
//! them, to find the calls of the four built-ins, nested ones too. Outermost
//! first, a call that may touch an adopted sequence ([`must_evaluate`]:
//! its sequence is adopted, a constant or evaluated here; `lastval()`
//! where the session's last value is an adopted sequence's) is evaluated
//! here with the planner's swaps ([`super::walk::swap`], so `nextval()`
//! mints as in a planned statement: see [`super::calls`]), the calls
//! inside it with it, and its raw `FuncCall` becomes
//! `pg_catalog.int8(<its value>)`, which PostgreSQL then analyses and
//! runs. (Not the replacement's name: a role need not have USAGE on the
//! extension's internal schema.) Such a call is evaluated even where the
//! parameter's `CASE` would not reach it, and before PostgreSQL checks
//! the other parameters. Any other call is PostgreSQL's, as on a stock
//! server. A call that must be evaluated but is reached some other way
//! (an operator over `nextval`) is refused (0A000), with a HINT; and the
//! parameters are analysed again afterwards: a call of the four that was
//! not there before (evaluating one parameter changed what a name
//! resolves to) is refused too.

use super::list::{self, Fns};
use super::walk;
use pgrx::pg_sys;
use std::collections::HashMap;

/// The `EXECUTE` a utility statement runs, if any: the statement itself,
/// or the one an `EXPLAIN` or a `CREATE TABLE … AS` wraps, at any depth
/// (`EXPLAIN CREATE TABLE … AS EXECUTE`: the red-team review of 930c88a,
/// F2).
///
/// # Safety
/// `stmt` is a utility statement (or null).
pub(super) unsafe fn execute_of(stmt: *mut pg_sys::Node) -> *mut pg_sys::ExecuteStmt {
    // SAFETY: each node read as the type its tag names.
    unsafe {
        let mut stmt = stmt;
        loop {
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
            stmt = (*(inner as *mut pg_sys::Query)).utilityStmt;
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
        // A function call, an operator, or attribute notation
        // (`('s'::regclass).nextval`: the red-team review of 7d48b49, F4).
        if matches!(
            (*node).type_,
            pg_sys::NodeTag::T_FuncCall
                | pg_sys::NodeTag::T_A_Expr
                | pg_sys::NodeTag::T_A_Indirection
                | pg_sys::NodeTag::T_ColumnRef
        ) {
            return true;
        }
        walk::raw_walk(node, Some(may_call), ctx)
    }
}

/// A call of one of the four built-ins in an analysed parameter.
struct Found {
    /// The built-in's OID.
    func: pg_sys::Oid,
    /// Its `FuncExpr`'s location (that of the raw `FuncCall` it was
    /// analysed from, if it was written by name), or -1 for an operator.
    location: i32,
    /// Its first argument (the sequence), or null for `lastval()`.
    seq_arg: *mut pg_sys::Node,
    /// The analysed call.
    expr: *mut pg_sys::Node,
    /// The innermost call of the four that this one is an argument of.
    parent: Option<usize>,
}

/// [`collect`]'s state: the calls found, in pre-order, and the one being
/// walked.
struct Collected {
    found: Vec<Found>,
    current: Option<usize>,
}

/// The walker that collects every [`Found`] call, nested ones too (`ctx`
/// is a [`Collected`]). Unguarded, as [`walk::swap`].
unsafe extern "C-unwind" fn collect(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: nodes of an analysed expression; `ctx` is a `Collected`.
    unsafe {
        let c = &mut *(ctx as *mut Collected);
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
        // A call that leaves out arguments whose defaults call one of the
        // four: PostgreSQL completes them without a plan (P1); refused.
        if (*node).type_ == pg_sys::NodeTag::T_FuncExpr
            && walk::defaults_call_the_four_from_walk(func)
        {
            refuse_left_out_defaults(func, if args.is_null() { 0 } else { (*args).length });
        }
        if !walk::is_builtin(func) {
            return walk::expression_walk(node, Some(collect), ctx);
        }
        let seq_arg = if args.is_null() || (*args).length == 0 {
            std::ptr::null_mut()
        } else {
            (*(*args).elements).ptr_value as *mut pg_sys::Node
        };
        let parent = c.current;
        c.found.push(Found {
            func,
            location,
            seq_arg,
            expr: node,
            parent,
        });
        c.current = Some(c.found.len() - 1);
        let r = walk::expression_walk(node, Some(collect), ctx);
        (*(ctx as *mut Collected)).current = parent;
        r
    }
}

/// Analyse copies of `params` as `EvaluateParams` will: the calls of the
/// four in them.
///
/// # Safety
/// `params` is a list of raw expressions; called guarded.
unsafe fn analyse(
    params: *mut pg_sys::List,
    source: *const std::ffi::c_char,
    env: *mut pg_sys::QueryEnvironment,
) -> Vec<Found> {
    // SAFETY: copies of the raw parameters, analysed in a parse state of
    // their own.
    unsafe {
        let pstate = pg_sys::make_parsestate(std::ptr::null_mut());
        (*pstate).p_sourcetext = source;
        (*pstate).p_queryEnv = env;
        let mut c = Collected {
            found: Vec::new(),
            current: None,
        };
        for i in 0..(*params).length as usize {
            let copy = pg_sys::copyObjectImpl((*(*params).elements.add(i)).ptr_value);
            let analysed = pg_sys::transformExpr(
                pstate,
                copy.cast(),
                pg_sys::ParseExprKind::EXPR_KIND_EXECUTE_PARAMETER,
            );
            collect(analysed, (&raw mut c).cast());
        }
        pg_sys::free_parsestate(pstate);
        c.found
    }
}

/// The walker that counts a raw tree's `FuncCall`s by location (`ctx`
/// is a `HashMap<i32, usize>`). Unguarded, as [`walk::swap`].
unsafe extern "C-unwind" fn calls_at(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: nodes of a raw expression tree; `ctx` as above.
    unsafe {
        if (*node).type_ == pg_sys::NodeTag::T_FuncCall {
            let at = (*(node as *mut pg_sys::FuncCall)).location;
            *(*(ctx as *mut HashMap<i32, usize>)).entry(at).or_default() += 1;
        }
        walk::raw_walk(node, Some(calls_at), ctx)
    }
}

/// The walker that finds the raw `FuncCall`s to replace (`ctx` is a
/// `(&HashMap<i32, Option<i64>>, Vec<*mut FuncCall>)`): those at one of
/// the locations. It calls nothing of PostgreSQL's but its walker
/// (unguarded, as [`walk::swap`]); [`put_value`] changes them after.
unsafe extern "C-unwind" fn to_replace(
    node: *mut pg_sys::Node,
    ctx: *mut std::ffi::c_void,
) -> bool {
    if node.is_null() {
        return false;
    }
    // SAFETY: nodes of a raw expression tree; `ctx` as above.
    unsafe {
        let c = &mut *(ctx as *mut (&HashMap<i32, Option<i64>>, Vec<*mut pg_sys::FuncCall>));
        if (*node).type_ == pg_sys::NodeTag::T_FuncCall {
            let call = node as *mut pg_sys::FuncCall;
            if c.0.contains_key(&(*call).location) {
                c.1.push(call);
                return false;
            }
        }
        walk::raw_walk(node, Some(to_replace), ctx)
    }
}

/// A raw `FuncCall` made `pg_catalog.int8(<v>)` (or of a null), in the
/// current memory context, the statement's.
///
/// # Safety
/// `call` is a raw `FuncCall` the caller may change; called guarded.
unsafe fn put_value(call: *mut pg_sys::FuncCall, v: Option<i64>) {
    // SAFETY: node constructors of PostgreSQL.
    unsafe {
        let c = pg_sys::palloc0(std::mem::size_of::<pg_sys::A_Const>()) as *mut pg_sys::A_Const;
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
    }
}

/// Evaluate an analysed expression with the planner's swaps: its
/// value, or `None` for a null.
///
/// # Safety
/// `expr` is an analysed expression that may be changed, of a type passed
/// by value; called guarded.
unsafe fn evaluate(expr: *mut pg_sys::Node, f: &Fns) -> Option<pg_sys::Datum> {
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
        pg_sys::FreeExecutorState(estate);
        (!isnull).then_some(d)
    }
}

/// Whether a call must be evaluated here (see the module): `lastval()`
/// where the session's last value is an adopted sequence's; any other of
/// the four on an adopted sequence named by a constant, or on one named
/// by an expression. Otherwise it is PostgreSQL's own, where and whether
/// it runs as on a stock server (the red-team review of 930c88a, F4).
///
/// # Safety
/// `c` is of an analysed tree; called guarded.
unsafe fn must_evaluate(c: &Found) -> bool {
    // SAFETY: the analysed argument, read as its tag says.
    unsafe {
        if c.func.to_u32() == pg_sys::F_LASTVAL {
            return super::session::with(|s| s.last.is_some());
        }
        let arg = c.seq_arg;
        if arg.is_null() {
            return false;
        }
        if (*arg).type_ == pg_sys::NodeTag::T_Const {
            let k = arg as *mut pg_sys::Const;
            return !(*k).constisnull
                && list::is_adopted(pg_sys::Oid::from((*k).constvalue.value() as u32));
        }
        // Named by an expression: it may be adopted, and is evaluated with
        // the call, once (evaluating the name first to ask ran it twice:
        // the red-team review of 7d48b49, F6a).
        true
    }
}

/// A call of `func`, whose defaults call one of the four, with `given`
/// arguments: refused if it leaves any out (0A000). Guarded (see
/// [`walk::defaults_call_the_four`]): the walker calls it.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn refuse_left_out_defaults(func: pg_sys::Oid, given: i32) {
    // SAFETY: a syscache look-up of PostgreSQL's.
    if given < unsafe { pg_sys::get_func_nargs(func) } {
        super::errors::adopt_execute_default(&name_of_function(func));
    }
}

/// A function's name, for messages.
fn name_of_function(f: pg_sys::Oid) -> String {
    // SAFETY: a syscache look-up; NULL when the function is gone.
    unsafe {
        let p = pg_sys::get_func_name(f);
        if p.is_null() {
            f.to_u32().to_string()
        } else {
            std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
        }
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
        let found = analyse(params, source, env);
        if found.is_empty() {
            return;
        }
        if unreadable {
            list::refuse_unreadable();
        }
        // A call written by name: the raw `FuncCall` at its location (one
        // only: two calls at one place would be no parse of ours).
        let mut raw_calls: HashMap<i32, usize> = HashMap::new();
        calls_at(params.cast(), (&raw mut raw_calls).cast());
        let by_name = |l: i32| l >= 0 && raw_calls.get(&l) == Some(&1);
        // Outermost first: a call evaluated here takes the calls inside it
        // with it (swapped); one left to PostgreSQL leaves those inside it
        // to be looked at on their own (F1).
        let mut values: HashMap<i32, Option<i64>> = HashMap::new();
        let mut done = vec![false; found.len()];
        let mut kept: HashMap<(i32, u32), usize> = HashMap::new();
        for (i, c) in found.iter().enumerate() {
            pgrx::check_for_interrupts!();
            if c.parent.is_some_and(|p| done[p]) {
                done[i] = true;
                continue;
            }
            if !must_evaluate(c) {
                *kept.entry((c.location, c.func.to_u32())).or_default() += 1;
                continue;
            }
            if !by_name(c.location) {
                let seq = if !c.seq_arg.is_null() && (*c.seq_arg).type_ == pg_sys::NodeTag::T_Const
                {
                    let k = c.seq_arg as *mut pg_sys::Const;
                    Some(crate::convert::as_owner::relation_name(pg_sys::Oid::from(
                        (*k).constvalue.value() as u32,
                    )))
                } else {
                    None
                };
                super::errors::adopt_execute_operator(name_of(c.func), seq.as_deref());
            }
            let v = evaluate(c.expr, &f).map(|d| d.value() as i64);
            values.insert(c.location, v);
            done[i] = true;
        }
        if !values.is_empty() {
            if *read_only_tree {
                *pstmt = pg_sys::copyObjectImpl((*pstmt).cast()).cast();
                *read_only_tree = false;
            }
            let params = (*execute_of((**pstmt).utilityStmt)).params;
            let mut found: (&HashMap<i32, Option<i64>>, Vec<*mut pg_sys::FuncCall>) =
                (&values, Vec::new());
            to_replace(params.cast(), (&raw mut found).cast());
            for call in found.1 {
                put_value(call, values[&(*call).location]);
            }
        }
        // What PostgreSQL will analyse next: the same calls of the four
        // left to it, no other. The code just run may have changed what a
        // name resolves to (search_path, a function made or dropped: the
        // red-team review of 930c88a, F3).
        let params = (*execute_of((**pstmt).utilityStmt)).params;
        for c in analyse(params, source, env) {
            pgrx::check_for_interrupts!();
            match kept.get_mut(&(c.location, c.func.to_u32())) {
                Some(n) if *n > 0 => *n -= 1,
                _ => super::errors::adopt_execute_changed(name_of(c.func)),
            }
        }
    }
}
