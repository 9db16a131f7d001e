//! `ALTER TABLE … ADD COLUMN` of a `bigserial` or `bigint` identity
//! column while the switch is on: the rows the table already holds get
//! Snowflake IDs, not the new sequence's own values (issue 63, part 2).
//!
//! PostgreSQL fills such a column with its sequence's values as it
//! rewrites the table, from an expression that no planner sees, and the
//! switch adopts the sequence only at the statement's end: stock, the
//! rows got 1, 2, 3 …. So the utility hook runs the statement in two
//! steps, as the caller, each through the whole chain of hooks:
//!
//! 1. the statement as written, except that each such column is added as
//!    `bigint NOT NULL DEFAULT pg_catalog.snowflake_id_fill()`, which
//!    mints a Snowflake ID for each row of the rewrite;
//! 2. then, for an identity, `ALTER TABLE [ONLY] t ALTER COLUMN c DROP
//!    DEFAULT, ALTER COLUMN c ADD GENERATED … AS IDENTITY (…)` with the
//!    statement's own identity clause; for a `bigserial`, what PostgreSQL
//!    itself makes of one: `CREATE SEQUENCE … AS bigint` (named as it
//!    names it, owned by the table's owner), `ALTER SEQUENCE … OWNED BY`
//!    and `SET DEFAULT nextval('…'::regclass)`. The switch adopts that
//!    sequence as any other.
//!
//! The catalog ends as PostgreSQL leaves it (the same column, default or
//! identity, sequence, names and dependencies): `pg_dump -s` cannot tell
//! (`adopt.sh` section 14). Only a permanent table (plain or partitioned,
//! with its partitions and inheritance children), owned by a role whose
//! rights the caller has, is rewritten, and only where no member has the
//! column yet; anything else runs as written (PostgreSQL raises its own
//! errors). An unlogged or temporary table (whose sequence is not
//! adopted), an identity on a partitioned table before PostgreSQL 17
//! (whose partitions do not share it) and one on an inheritance parent
//! (PostgreSQL's error) are left as they are.
//!
//! `snowflake_id_fill()` sits in `pg_catalog` because the caller names it
//! in the statement, and a migration's role may have no `USAGE` on the
//! extension's schemas; it mints only while a rewrite of this module is
//! running in the backend, and refuses (55000) anywhere else.

use super::errors;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::RefCell;
use std::ffi::{CStr, CString};

/// A column the rewrite added with a Snowflake fill.
struct Column {
    name: CString,
    /// The statement's identity clause (a `Constraint`, copied), or null
    /// for a `bigserial`.
    identity: *mut pg_sys::Constraint,
    /// A `bigserial`'s sequence, named as PostgreSQL names it before the
    /// statement runs.
    seq: CString,
}

/// The second step of the rewritten statement running in this backend.
struct Pending {
    /// The transaction nesting level of the statement.
    level: i32,
    rel: pg_sys::Oid,
    /// Whether the second step recurses to inheritance children and
    /// partitions, as the first did (never `ONLY` on a partitioned table,
    /// which PostgreSQL refuses for an identity: the red-team review of
    /// 7a439be, F1).
    recurse: bool,
    columns: Vec<Column>,
}

thread_local! {
    /// The rewritten statement running in this backend, from [`prepare`]
    /// to [`finish`] (one at a time: a statement run inside one is not
    /// rewritten). An abort of its (sub)transaction drops it ([`init`]),
    /// so no failed statement leaves `snowflake_id_fill()` minting (the
    /// red-team review of 3c0c0ef, F1 and F2), nor its memory behind
    /// (that of 7a439be, F3).
    static PENDING: RefCell<Option<Pending>> = const { RefCell::new(None) };
}

/// Have an abort drop a failed statement's fill: at preload.
pub(super) fn init() {
    super::aborts::on_abort(|level| {
        PENDING.with(|p| {
            let mut p = p.borrow_mut();
            if p.as_ref().is_some_and(|f| f.level >= level) {
                *p = None;
            }
        })
    });
}

/// Whether a rewritten statement is running in this backend.
fn filling() -> bool {
    PENDING.with(|p| p.borrow().is_some())
}

/// Mints the Snowflake ID of one row of a rewritten `ADD COLUMN`'s fill
/// (this module); refused (55000) anywhere else. Internal: `snowflake_id`
/// writes it into the statements it rewrites.
///
/// ```sql
/// SELECT snowflake_adopt_sequences();
/// ALTER TABLE orders ADD COLUMN id bigserial;  -- its rows: Snowflake IDs
/// ```
#[pg_extern(sql = false)]
pub fn snowflake_id_fill() -> i64 {
    if !filling() {
        errors::fill_outside();
    }
    crate::mint::nextval::snowflake_nextval()
}

/// The `ColumnDef` of an `ADD COLUMN` subcommand, or null.
///
/// # Safety
/// `cmd` is a valid `AlterTableCmd`.
unsafe fn added_column(cmd: *mut pg_sys::AlterTableCmd) -> *mut pg_sys::ColumnDef {
    // SAFETY: the node's tags read before its fields.
    unsafe {
        if cmd.is_null()
            || (*cmd).type_ != pg_sys::NodeTag::T_AlterTableCmd
            || (*cmd).subtype != pg_sys::AlterTableType::AT_AddColumn
            || (*cmd).def.is_null()
            || (*(*cmd).def).type_ != pg_sys::NodeTag::T_ColumnDef
        {
            return std::ptr::null_mut();
        }
        (*cmd).def.cast()
    }
}

/// The `i`th element of `list` (a list of nodes).
///
/// # Safety
/// `list` is a valid list of pointers with more than `i` elements.
unsafe fn nth<T>(list: *mut pg_sys::List, i: usize) -> *mut T {
    // SAFETY: as the caller says.
    unsafe { (*(*list).elements.add(i)).ptr_value.cast() }
}

/// The length of `list` (0 for `NIL`).
///
/// # Safety
/// `list` is a valid list or null.
unsafe fn len(list: *mut pg_sys::List) -> usize {
    // SAFETY: as the caller says.
    unsafe {
        if list.is_null() {
            0
        } else {
            (*list).length as usize
        }
    }
}

/// What `def` adds: `Some(false)` a `bigserial`, `Some(true)` an identity
/// (of a type still to be checked), `None` anything else, or a column
/// PostgreSQL will refuse (a second default, an array of `serial`).
///
/// # Safety
/// `def` is a valid raw `ColumnDef`.
unsafe fn kind(def: *mut pg_sys::ColumnDef) -> Option<bool> {
    // SAFETY: the raw node's fields, lists of nodes.
    unsafe {
        let typ = (*def).typeName;
        if typ.is_null() || !(*def).raw_default.is_null() || !(*def).cooked_default.is_null() {
            return None;
        }
        let mut identity = false;
        for i in 0..len((*def).constraints) {
            let c: *mut pg_sys::Constraint = nth((*def).constraints, i);
            if c.is_null() || (*c).type_ != pg_sys::NodeTag::T_Constraint {
                return None;
            }
            match (*c).contype {
                // A second identity clause is PostgreSQL's error.
                pg_sys::ConstrType::CONSTR_IDENTITY if identity => return None,
                pg_sys::ConstrType::CONSTR_IDENTITY => identity = true,
                pg_sys::ConstrType::CONSTR_NOTNULL if (*c).is_no_inherit => return None,
                pg_sys::ConstrType::CONSTR_DEFAULT
                | pg_sys::ConstrType::CONSTR_GENERATED
                | pg_sys::ConstrType::CONSTR_NULL => return None,
                _ => {}
            }
        }
        let names = (*typ).names;
        let serial = len(names) == 1 && !(*typ).pct_type && {
            let n: *mut pg_sys::String = nth(names, 0);
            !n.is_null()
                && (*n).type_ == pg_sys::NodeTag::T_String
                && matches!(
                    CStr::from_ptr((*n).sval).to_bytes(),
                    b"bigserial" | b"serial8"
                )
        };
        match (serial, identity) {
            (true, false) if (*typ).arrayBounds.is_null() => Some(false),
            (false, true) => Some(true),
            _ => None,
        }
    }
}

/// Whether raw type name `typ` is `bigint` (not a domain over it).
///
/// # Safety
/// `typ` is a valid `TypeName`; in a guarded function.
unsafe fn is_bigint(typ: *mut pg_sys::TypeName) -> bool {
    // SAFETY: a syscache look-up of the type, released at once.
    unsafe {
        let tup = pg_sys::LookupTypeName(std::ptr::null_mut(), typ, std::ptr::null_mut(), true);
        if tup.is_null() {
            return false;
        }
        let oid = pg_sys::typeTypeId(tup);
        pg_sys::ReleaseSysCache(tup);
        oid == pg_sys::INT8OID && (*typ).arrayBounds.is_null()
    }
}

/// The first statement of SQL text `sql`, raw.
///
/// # Safety
/// In a guarded function.
unsafe fn parse(sql: &str) -> *mut pg_sys::Node {
    let text = CString::new(sql).expect("no NUL in generated SQL");
    // SAFETY: the raw parser over our own text, one statement.
    unsafe {
        let list = pg_sys::raw_parser(text.as_ptr(), pg_sys::RawParseMode::RAW_PARSE_DEFAULT);
        let raw: *mut pg_sys::RawStmt = nth(list, 0);
        (*raw).stmt
    }
}

/// An `ALTER TABLE` about to run in a database whose switch is on: each
/// `ADD COLUMN` of a `bigserial` or `bigint` identity is rewritten to be
/// filled with Snowflake IDs (see the module), in the statement's own
/// copy; its second step waits in [`PENDING`] for [`finish`]. Whether it
/// rewrote anything.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn prepare(
    pstmt: *mut *mut pg_sys::PlannedStmt,
    read_only_tree: *mut bool,
) -> bool {
    // One at a time: a statement run inside a rewritten one (a default's
    // function) runs as written (the red-team review of 3c0c0ef, F1).
    if filling() {
        return false;
    }
    // SAFETY: the statement PostgreSQL passes, an `AlterTableStmt`, and
    // its raw subcommands; copied before any change where read-only.
    unsafe {
        let stmt = (**pstmt).utilityStmt as *mut pg_sys::AlterTableStmt;
        if (*stmt).objtype != pg_sys::ObjectType::OBJECT_TABLE || (*stmt).relation.is_null() {
            return false;
        }
        let cmds = (*stmt).cmds;
        // Only ADD COLUMN and ADD CONSTRAINT: any other subcommand (ALTER
        // COLUMN … SET GENERATED, SET UNLOGGED, OWNER TO) could act on the
        // column or its sequence between the two steps, or run where
        // PostgreSQL makes the sequence (F3, F4).
        let only_adds = (0..len(cmds)).all(|i| {
            let c: *mut pg_sys::AlterTableCmd = nth(cmds, i);
            !c.is_null()
                && (*c).type_ == pg_sys::NodeTag::T_AlterTableCmd
                && matches!(
                    (*c).subtype,
                    pg_sys::AlterTableType::AT_AddColumn | pg_sys::AlterTableType::AT_AddConstraint
                )
        });
        let added: Vec<CString> = (0..len(cmds))
            .filter_map(|i| {
                let def = added_column(nth(cmds, i));
                (!def.is_null() && !(*def).colname.is_null())
                    .then(|| CStr::from_ptr((*def).colname).to_owned())
            })
            .collect();
        // A column added twice (IF NOT EXISTS) is PostgreSQL's to sort
        // out (F3).
        let wanted: Vec<usize> = (0..len(cmds))
            .filter(|&i| {
                let def = added_column(nth(cmds, i));
                !def.is_null()
                    && !(*def).colname.is_null()
                    && kind(def).is_some()
                    && added
                        .iter()
                        .filter(|n| n.as_c_str() == CStr::from_ptr((*def).colname))
                        .count()
                        == 1
            })
            .collect();
        // A standby, or a read-only transaction: PostgreSQL's own error
        // (25006), before any lock (F6).
        if !only_adds || wanted.is_empty() || pg_sys::RecoveryInProgress() || pg_sys::XactReadOnly {
            return false;
        }
        let Some(rel) = crate::catalog::relation_named((*stmt).relation) else {
            return false;
        };
        // Only the owner's (or a member's) statement: any other gets
        // PostgreSQL's 42501 before it locks anything, and so here.
        let owner = crate::convert::as_owner::owner_of(rel);
        if !pg_sys::has_privs_of_role(pg_sys::GetUserId(), owner) || !super::switch::switch_on() {
            return false;
        }
        // The statement's own lock, taken now so that no child or column
        // appears before it runs; the name must still be that table.
        pg_sys::LockRelationOid(rel, pg_sys::AccessExclusiveLock as _);
        let relkind = pg_sys::get_rel_relkind(rel) as u8;
        if crate::catalog::relation_named((*stmt).relation) != Some(rel)
            || !(relkind == pg_sys::RELKIND_RELATION
                || relkind == pg_sys::RELKIND_PARTITIONED_TABLE)
            || pg_sys::get_rel_persistence(rel) as u8 != pg_sys::RELPERSISTENCE_PERMANENT
            || pg_sys::get_rel_relispartition(rel)
        {
            return false;
        }
        // Its inheritance children and partitions (pg_inherits itself:
        // `relhassubclass` outlives a dropped child, F7), which the
        // statement fills too (ONLY with children is PostgreSQL's error).
        // None can come or go while the table is locked.
        let family = crate::catalog::inheritors(rel);
        let children = family.len() > 1;
        if children && !(*(*stmt).relation).inh {
            return false;
        }
        let mut chosen = Vec::new();
        for i in wanted {
            let def = added_column(nth(cmds, i));
            let name = CStr::from_ptr((*def).colname).to_owned();
            let identity = kind(def) == Some(true);
            // A column some member has already (IF NOT EXISTS, or a child
            // whose own column PostgreSQL merges); an identity on
            // inheritance children (PostgreSQL's error), or on a
            // partitioned table before PostgreSQL 17 (whose partitions
            // do not share it).
            if family
                .iter()
                .any(|&m| pg_sys::get_attnum(m, name.as_ptr()) != pg_sys::InvalidAttrNumber as i16)
                || chosen.iter().any(|(_, n): &(usize, CString)| n == &name)
                || (identity
                    && (!is_bigint((*def).typeName)
                        || (children && relkind == pg_sys::RELKIND_RELATION)
                        || (relkind == pg_sys::RELKIND_PARTITIONED_TABLE
                            && pg_sys::PG_VERSION_NUM < 170000)))
            {
                continue;
            }
            chosen.push((i, name));
        }
        // A bigserial's sequence is named now, as PostgreSQL names it
        // before anything of the statement runs; two names alike (long
        // names cut to the same 63 bytes) are left to PostgreSQL.
        let ns = pg_sys::get_rel_namespace(rel);
        let relname = pg_sys::get_rel_name(rel);
        let mut seqs: Vec<CString> = Vec::new();
        for (i, name) in &chosen {
            let def = added_column(nth(cmds, *i));
            let seq = if kind(def) == Some(false) {
                let s =
                    pg_sys::ChooseRelationName(relname, name.as_ptr(), c"seq".as_ptr(), ns, false);
                CStr::from_ptr(s).to_owned()
            } else {
                CString::default()
            };
            if !seq.is_empty() && seqs.contains(&seq) {
                return false;
            }
            seqs.push(seq);
        }
        if chosen.is_empty() {
            return false;
        }
        if *read_only_tree {
            *pstmt = pg_sys::copyObjectImpl((*pstmt).cast()).cast();
            *read_only_tree = false;
        }
        let cmds = (*((**pstmt).utilityStmt as *mut pg_sys::AlterTableStmt)).cmds;
        let mut columns = Vec::new();
        for ((i, name), seq) in chosen.into_iter().zip(seqs) {
            let def = added_column(nth(cmds, i));
            // PostgreSQL's own nodes for the filled column, parsed.
            let model: *mut pg_sys::AlterTableStmt = parse(
                "ALTER TABLE t ADD COLUMN c pg_catalog.int8 NOT NULL DEFAULT pg_catalog.snowflake_id_fill()",
            )
            .cast();
            let model_def = added_column(nth((*model).cmds, 0));
            let mut identity: *mut pg_sys::Constraint = std::ptr::null_mut();
            let mut kept: *mut pg_sys::List = std::ptr::null_mut();
            let mut not_null = false;
            for j in 0..len((*def).constraints) {
                let c: *mut pg_sys::Constraint = nth((*def).constraints, j);
                match (*c).contype {
                    pg_sys::ConstrType::CONSTR_IDENTITY => {
                        identity = pg_sys::copyObjectImpl(c.cast()).cast();
                        continue;
                    }
                    pg_sys::ConstrType::CONSTR_NOTNULL => not_null = true,
                    _ => {}
                }
                kept = pg_sys::lappend(kept, c.cast());
            }
            let model_constraints = (*model_def).constraints;
            for j in 0..len(model_constraints) {
                let c: *mut pg_sys::Constraint = nth(model_constraints, j);
                if (*c).contype == pg_sys::ConstrType::CONSTR_NOTNULL && not_null {
                    continue;
                }
                kept = pg_sys::lappend(kept, c.cast());
            }
            (*def).constraints = kept;
            if identity.is_null() {
                (*def).typeName = (*model_def).typeName;
            }
            columns.push(Column {
                name,
                identity,
                seq,
            });
        }
        let level = pg_sys::GetCurrentTransactionNestLevel();
        let recurse = children || relkind == pg_sys::RELKIND_PARTITIONED_TABLE;
        PENDING.with(|p| {
            *p.borrow_mut() = Some(Pending {
                level,
                rel,
                recurse,
                columns,
            })
        });
        true
    }
}

/// After the rewritten statement ran: its second step (see the module),
/// each statement as the caller, through every hook.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn finish(query_string: *const std::ffi::c_char) {
    let Some(pending) = PENDING.with(|p| p.borrow_mut().take()) else {
        return;
    };
    // SAFETY: catalog look-ups of the table the statement altered (it
    // holds its lock); PostgreSQL's quoting; our own statements, parsed.
    unsafe {
        let rel = pending.rel;
        let relname = pg_sys::get_rel_name(rel);
        // The table and each column as the first step left them, or no
        // second step at all (a safety net: F1's statement inside the
        // first step dropped its table).
        if relname.is_null() || pending.columns.iter().any(|c| !filled(rel, &c.name)) {
            errors::fill_changed(&crate::convert::as_owner::relation_name(rel));
        }
        let ns = pg_sys::get_rel_namespace(rel);
        let nsname = pg_sys::get_namespace_name(ns);
        let quote = |s: *const std::ffi::c_char| {
            CStr::from_ptr(pg_sys::quote_identifier(s))
                .to_string_lossy()
                .into_owned()
        };
        let table = format!("{}.{}", quote(nsname), quote(relname));
        let only = if pending.recurse { "" } else { "ONLY " };
        for col in pending.columns {
            let column = quote(col.name.as_ptr());
            if !col.identity.is_null() {
                let stmt: *mut pg_sys::AlterTableStmt = parse(&format!(
                    "ALTER TABLE {only}{table} ALTER COLUMN {column} DROP DEFAULT, \
                     ALTER COLUMN {column} ADD GENERATED ALWAYS AS IDENTITY"
                ))
                .cast();
                let add: *mut pg_sys::AlterTableCmd = nth((*stmt).cmds, 1);
                (*add).def = col.identity.cast();
                run(stmt.cast(), query_string);
                continue;
            }
            let sequence = format!("{}.{}", quote(nsname), quote(col.seq.as_ptr()));
            let create: *mut pg_sys::CreateSeqStmt =
                parse(&format!("CREATE SEQUENCE {sequence} AS pg_catalog.int8")).cast();
            // As PostgreSQL makes a serial's: its table's owner owns it.
            (*create).ownerId = crate::convert::as_owner::owner_of(rel);
            run(create.cast(), query_string);
            run(
                parse(&format!(
                    "ALTER SEQUENCE {sequence} OWNED BY {table}.{column}"
                )),
                query_string,
            );
            let literal = CStr::from_ptr(pg_sys::quote_literal_cstr(
                CString::new(sequence.clone())
                    .expect("no NUL in a name")
                    .as_ptr(),
            ))
            .to_string_lossy()
            .into_owned();
            run(
                parse(&format!(
                    "ALTER TABLE {only}{table} ALTER COLUMN {column} SET DEFAULT \
                     pg_catalog.nextval({literal}::pg_catalog.regclass)"
                )),
                query_string,
            );
        }
        // Nothing made during the first step keeps its default: a table
        // made from the column meanwhile (INHERITS, LIKE … INCLUDING
        // DEFAULTS, by code the statement ran, or an event trigger) would
        // call `snowflake_id_fill()` for ever (the red-team review of
        // 7a439be, F2). Only this transaction's defaults are looked at: a
        // role's own call of it elsewhere stops no one else's statement.
        if fill_default_left() {
            errors::fill_changed(&crate::convert::as_owner::relation_name(rel));
        }
    }
}

/// Whether a column default that this transaction made still calls
/// `pg_catalog.snowflake_id_fill()`.
fn fill_default_left() -> bool {
    let xmins: Vec<i64> = Spi::connect(|client| {
        client
            .select(
                "SELECT d.xmin::pg_catalog.text::pg_catalog.int8 FROM pg_catalog.pg_depend d \
                  WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass \
                    AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass \
                    AND d.refobjid OPERATOR(pg_catalog.=) 'pg_catalog.snowflake_id_fill()'::pg_catalog.regprocedure",
                None,
                &[],
            )
            .map(|rows| {
                rows.filter_map(|r| r.get::<i64>(1).ok().flatten())
                    .collect()
            })
            .unwrap_or_default()
    });
    // SAFETY: a test of this backend's transaction state.
    xmins.into_iter().any(|x| unsafe {
        pg_sys::TransactionIdIsCurrentTransactionId(pg_sys::TransactionId::from(x as u32))
    })
}

/// Whether column `name` of `rel` is there with the first step's default,
/// `snowflake_id_fill()`.
///
/// # Safety
/// In a transaction; the relation exists and is locked; guarded.
unsafe fn filled(rel: pg_sys::Oid, name: &CStr) -> bool {
    // SAFETY: the relation opened under the statement's lock; its
    // default built as PostgreSQL builds it.
    unsafe {
        let attnum = pg_sys::get_attnum(rel, name.as_ptr());
        if attnum == pg_sys::InvalidAttrNumber as i16 {
            return false;
        }
        let r = pg_sys::relation_open(rel, pg_sys::NoLock as _);
        let expr = pg_sys::build_column_default(r, attnum as _);
        pg_sys::relation_close(r, pg_sys::NoLock as _);
        if expr.is_null() || (*expr).type_ != pg_sys::NodeTag::T_FuncExpr {
            return false;
        }
        let f = (*(expr as *mut pg_sys::FuncExpr)).funcid;
        let fname = pg_sys::get_func_name(f);
        pg_sys::get_func_namespace(f) == pg_sys::Oid::from(pg_sys::PG_CATALOG_NAMESPACE)
            && !fname.is_null()
            && CStr::from_ptr(fname) == c"snowflake_id_fill"
    }
}

/// Run utility statement `stmt` as a query of its own (its event triggers
/// fire, the switch's among them), after the changes before it.
///
/// # Safety
/// `stmt` is a raw utility statement; in a guarded function.
unsafe fn run(stmt: *mut pg_sys::Node, query_string: *const std::ffi::c_char) {
    // SAFETY: a PlannedStmt wrapper as ProcessUtilityForAlterTable makes.
    unsafe {
        pg_sys::CommandCounterIncrement();
        let wrapper: *mut pg_sys::PlannedStmt =
            pg_sys::palloc0(std::mem::size_of::<pg_sys::PlannedStmt>()).cast();
        (*wrapper).type_ = pg_sys::NodeTag::T_PlannedStmt;
        (*wrapper).commandType = pg_sys::CmdType::CMD_UTILITY;
        (*wrapper).canSetTag = false;
        (*wrapper).utilityStmt = stmt;
        (*wrapper).stmt_location = -1;
        pg_sys::ProcessUtility(
            wrapper,
            query_string,
            false,
            pg_sys::ProcessUtilityContext::PROCESS_UTILITY_QUERY,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            pg_sys::None_Receiver,
            std::ptr::null_mut(),
        );
        pg_sys::CommandCounterIncrement();
    }
}
