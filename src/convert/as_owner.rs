//! Running a table owner's code as the owner, never as the caller.
//!
//! The conversions act on tables whose owner may not be the caller (a
//! superuser, or a member of the owning role). Some of their statements
//! run code the owner wrote: index expressions and predicates, CHECK
//! constraints, generated columns, triggers, row-level security policies.
//! Run as the caller, that code would run with the caller's privileges:
//! a superuser's dry run would run the owner's index expression as a
//! superuser. [`snowflake_convert_as_owner`] runs such a statement the way
//! PostgreSQL runs VACUUM or CREATE INDEX: as the table's owner, in a
//! security-restricted operation (no SET ROLE, no temporary objects), with
//! `search_path` pinned to `pg_catalog, pg_temp` for its duration.
//!
//! ## `snowflake_convert_as_owner(rel regclass, stmt text) → bigint`
//!
//! Runs `stmt` as the owner of `rel`. Returns the first column of the
//! first row a statement that returns rows returned (which must be a
//! `bigint`; NULL when it returned none), or else the number of rows the
//! statement processed. The caller must have the privileges of that owner (be it, be
//! a member of it that inherits its privileges, or be a superuser), so it
//! gives no privilege the caller lacks; it only takes the caller's own
//! away from the owner's code. Used by the conversion functions, and
//! callable by anyone for the same purpose.
//!
//! ```sql
//! SELECT snowflake_convert_as_owner('app.orders'::regclass,
//!            'UPDATE app.orders SET id_new = id WHERE id_new IS DISTINCT FROM id');
//! SELECT snowflake_convert_as_owner('app.orders'::regclass, 'SELECT max(id)::bigint FROM app.orders');
//! ```

use crate::{errors, gucs};
use pgrx::prelude::*;

/// The owner of relation `rel`, or an ERROR (42P01) if there is none.
pub fn owner_of(rel: pg_sys::Oid) -> pg_sys::Oid {
    // SAFETY: a syscache lookup and release in this backend; the tuple's
    // struct is a pg_class row while the tuple is held.
    unsafe {
        let tup = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::RELOID as _,
            pg_sys::Datum::from(rel),
        );
        if tup.is_null() {
            errors::undefined_table(rel.to_u32());
        }
        let owner = (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_class>(tup)).relowner;
        pg_sys::ReleaseSysCache(tup);
        owner
    }
}

/// Whether the current user has the privileges of `role`.
fn has_privileges_of(role: pg_sys::Oid) -> bool {
    // SAFETY: a catalog check of this backend's current user.
    unsafe { pg_sys::has_privs_of_role(pg_sys::GetUserId(), role) }
}

/// Run `f` as the owner of `rel`, in a security-restricted operation with
/// `search_path = pg_catalog, pg_temp`; then restore the caller's identity
/// and settings. An ERROR inside `f` aborts the (sub)transaction, which
/// restores them as well.
pub fn with_owner_of<R>(rel: pg_sys::Oid, f: impl FnOnce() -> R) -> R {
    let owner = owner_of(rel);
    if !has_privileges_of(owner) {
        errors::not_owner(&relation_name(rel));
    }
    with_role(owner, f)
}

/// A relation's name for messages (its OID if it is gone).
pub fn relation_name(rel: pg_sys::Oid) -> String {
    // SAFETY: a catalog look-up; NULL when the relation is gone.
    unsafe {
        let p = pg_sys::get_rel_name(rel);
        if p.is_null() {
            rel.to_u32().to_string()
        } else {
            std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    }
}

/// A relation's schema-qualified, quoted name, for SQL text.
pub fn qualified_name(rel: pg_sys::Oid) -> String {
    // SAFETY: catalog look-ups of an existing relation; the quoting
    // function copies its arguments.
    unsafe {
        let ns = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(rel));
        let name = pg_sys::get_rel_name(rel);
        if ns.is_null() || name.is_null() {
            errors::undefined_table(rel.to_u32());
        }
        let q = pg_sys::quote_qualified_identifier(ns, name);
        std::ffi::CStr::from_ptr(q).to_string_lossy().into_owned()
    }
}

/// Run `f` as `role`, in a security-restricted operation with
/// `search_path = pg_catalog, pg_temp`; then restore the caller's identity
/// and settings. The caller checks that it may act as `role`.
pub fn with_role<R>(role: pg_sys::Oid, f: impl FnOnce() -> R) -> R {
    let mut save_user = pg_sys::Oid::INVALID;
    let mut save_ctx = 0;
    // SAFETY: the sequence PostgreSQL's own maintenance commands use
    // (vacuum.c, indexcmds.c): switch to the owner, restricted, then pin
    // search_path at a new GUC nest level.
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut save_user, &mut save_ctx);
        pg_sys::SetUserIdAndSecContext(
            role,
            save_ctx
                | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32
                | pg_sys::SECURITY_RESTRICTED_OPERATION as i32,
        );
    }
    let nest = gucs::push_setting(c"search_path", c"pg_catalog, pg_temp", false);
    let r = f();
    gucs::pop_settings(nest);
    // SAFETY: undoing the switch, on the normal path.
    unsafe { pg_sys::SetUserIdAndSecContext(save_user, save_ctx) };
    r
}

/// Run `stmt` as the owner of `rel`; see the module documentation.
#[pg_extern(volatile, strict, parallel_unsafe)]
pub fn snowflake_convert_as_owner(rel: pg_sys::Oid, stmt: &str) -> Option<i64> {
    with_owner_of(rel, || {
        Spi::connect_mut(|client| {
            let t = client.update(stmt, None, &[])?;
            if t.columns().is_err() {
                // No result set: an UPDATE, a DDL statement.
                return Ok::<_, pgrx::spi::Error>(Some(t.len() as i64));
            }
            if t.is_empty() {
                return Ok(None);
            }
            t.first().get_one::<i64>()
        })
        .unwrap_or_else(|e| errors::as_owner_failed(stmt, e))
    })
}
