//! The extension's own objects, found through the syscache alone (which
//! planning reads anyway), never through `pg_extension` or `pg_depend`:
//! a lock request queued on one of those (`CREATE RULE` takes its lock
//! before it checks any right) must hold up no statement (issue 63).
//!
//! An object counts as the extension's where it sits in the schema
//! `snowflake_id_internal` and a superuser owns both: the extension is
//! not trusted, so only a superuser's `CREATE EXTENSION` makes that
//! schema. Anything else of those names (any role with CREATE on a
//! database can make a schema) is ignored. Besides superusers, a trusted
//! extension that a database's owner installs into that schema creates
//! objects there, owned by the bootstrap superuser (the red-team review of
//! issue 63, F4); none of PostgreSQL's has objects of the names looked up
//! here, and only the server's administrator installs extensions' files.

use pgrx::pg_sys;
use std::ffi::CStr;

/// Whether `role` is a superuser (the syscache of pg_authid).
fn superuser(role: pg_sys::Oid) -> bool {
    // SAFETY: a syscache look-up; false for a role that does not exist.
    role != pg_sys::Oid::INVALID && unsafe { pg_sys::superuser_arg(role) }
}

/// The owner of the schema or relation `oid` (`cache` says which), or
/// `InvalidOid`.
fn owner_of(cache: pg_sys::SysCacheIdentifier::Type, oid: pg_sys::Oid) -> pg_sys::Oid {
    // SAFETY: a syscache look-up by OID, released at once.
    unsafe {
        let tup = pg_sys::SearchSysCache1(cache as _, pg_sys::Datum::from(oid));
        if tup.is_null() {
            return pg_sys::Oid::INVALID;
        }
        let owner = if cache == pg_sys::SysCacheIdentifier::NAMESPACEOID {
            (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_namespace>(tup)).nspowner
        } else {
            (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_class>(tup)).relowner
        };
        pg_sys::ReleaseSysCache(tup);
        owner
    }
}

/// The extension's schema and its relation `name` in it, or `None`.
/// In a transaction.
pub fn own_relation(name: &CStr) -> Option<(pg_sys::Oid, pg_sys::Oid)> {
    // SAFETY: syscache look-ups by name, in a transaction.
    unsafe {
        let ns = pg_sys::get_namespace_oid(c"snowflake_id_internal".as_ptr(), true);
        if ns == pg_sys::Oid::INVALID
            || !superuser(owner_of(pg_sys::SysCacheIdentifier::NAMESPACEOID, ns))
        {
            return None;
        }
        let rel = pg_sys::get_relname_relid(name.as_ptr(), ns);
        if rel == pg_sys::Oid::INVALID
            || !superuser(owner_of(pg_sys::SysCacheIdentifier::RELOID, rel))
        {
            return None;
        }
        Some((ns, rel))
    }
}

/// The function `name(args)` of the extension's schema `ns` (from
/// [`own_relation`]) if a superuser owns it, else `InvalidOid`. No search
/// path, no defaults, no privilege check. In a transaction.
pub fn own_function(ns: pg_sys::Oid, name: &CStr, args: &[pg_sys::Oid]) -> pg_sys::Oid {
    // SAFETY: a syscache look-up by name, exact argument types and schema,
    // released at once.
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
        let form = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_proc>(tup);
        let (f, owner) = ((*form).oid, (*form).proowner);
        pg_sys::ReleaseSysCache(tup);
        if superuser(owner) {
            f
        } else {
            pg_sys::Oid::INVALID
        }
    }
}

/// The relation a statement's name resolves to now, as PostgreSQL's own
/// look-up resolves it (search path, temporary schema), without a lock
/// and without a privilege check; `None` where there is none. The
/// statement takes its own lock and raises its own errors. In a
/// transaction, from a guarded function (an ERROR of the look-up itself,
/// a cancel, reaches PostgreSQL as an ERROR).
///
/// # Safety
/// `rv` is a valid `RangeVar`.
pub unsafe fn relation_named(rv: *mut pg_sys::RangeVar) -> Option<pg_sys::Oid> {
    // SAFETY: a name look-up of the caller's RangeVar.
    let rel = unsafe {
        pg_sys::RangeVarGetRelidExtended(
            rv,
            pg_sys::NoLock as _,
            pg_sys::RVROption::RVR_MISSING_OK as _,
            None,
            std::ptr::null_mut(),
        )
    };
    (rel != pg_sys::Oid::INVALID).then_some(rel)
}

/// `find_all_inheritors` (catalog/pg_inherits.h), which pgrx does not
/// bind.
mod ffi {
    use pgrx::pg_sys::{List, Oid, LOCKMODE};
    unsafe extern "C-unwind" {
        pub(super) fn find_all_inheritors(
            parent: Oid,
            lockmode: LOCKMODE,
            numparents: *mut *mut List,
        ) -> *mut List;
    }
}

/// Relation `parent` and its inheritance children and partitions, at
/// every level, without a lock (the caller holds or takes its own). In a
/// transaction.
pub fn inheritors(parent: pg_sys::Oid) -> Vec<pg_sys::Oid> {
    // SAFETY: a catalog scan of PostgreSQL's inside pgrx's guard of an
    // FFI boundary (its ERROR becomes a Rust panic there); a list of OIDs.
    unsafe {
        let list = pgrx::pg_sys::ffi::pg_guard_ffi_boundary(|| {
            ffi::find_all_inheritors(parent, pg_sys::NoLock as _, std::ptr::null_mut())
        });
        if list.is_null() {
            return Vec::new();
        }
        (0..(*list).length as usize)
            .map(|i| (*(*list).elements.add(i)).oid_value)
            .collect()
    }
}
