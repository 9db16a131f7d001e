//! A function's `pg_proc` row, as the walks read it: its language and
//! the texts of its body and default arguments, copied out of the
//! syscache (one look-up, released at once).

use pgrx::pg_sys;
use std::ffi::CString;

/// What [`super::walk`] and [`super::planner`] read of a function.
pub(super) struct Proc {
    /// `prolang`.
    pub(super) language: pg_sys::Oid,
    /// A set-returning function that is not `VOLATILE`: one the planner
    /// may inline into the `FROM` clause of a caller.
    pub(super) inlinable_set: bool,
    /// `prosqlbody`: a `BEGIN ATOMIC` body's node tree, as text.
    pub(super) sql_body: Option<CString>,
    /// `prosrc`: the body as written.
    pub(super) source: Option<CString>,
    /// `proargdefaults`: the default arguments' node tree, as text (none
    /// where `pronargdefaults` is 0).
    pub(super) defaults: Option<CString>,
}

/// Function `f`'s row, or `None` if it does not exist.
pub(super) fn read(f: pg_sys::Oid) -> Option<Proc> {
    // SAFETY: a syscache look-up and release; the tuple is a pg_proc row,
    // its attributes copied out while it is held.
    unsafe {
        let tup = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::PROCOID as _,
            pg_sys::Datum::from(f),
        );
        if tup.is_null() {
            return None;
        }
        let form = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_proc>(tup);
        let text = |attnum: u32| -> Option<CString> {
            let mut isnull = false;
            let d = pg_sys::SysCacheGetAttr(
                pg_sys::SysCacheIdentifier::PROCOID as _,
                tup,
                attnum as _,
                &mut isnull,
            );
            if isnull {
                return None;
            }
            let c = pg_sys::text_to_cstring(d.cast_mut_ptr());
            let s = std::ffi::CStr::from_ptr(c).to_owned();
            pg_sys::pfree(c.cast());
            Some(s)
        };
        let p = Proc {
            language: (*form).prolang,
            inlinable_set: (*form).proretset
                && (*form).provolatile as u8 != pg_sys::PROVOLATILE_VOLATILE,
            sql_body: text(pg_sys::Anum_pg_proc_prosqlbody),
            source: text(pg_sys::Anum_pg_proc_prosrc),
            defaults: if (*form).pronargdefaults > 0 {
                text(pg_sys::Anum_pg_proc_proargdefaults)
            } else {
                None
            },
        };
        pg_sys::ReleaseSysCache(tup);
        Some(p)
    }
}
