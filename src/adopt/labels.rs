//! Adoption that travels with the schema (issue 63, part 3): each adopted
//! sequence carries the security label `snowflake_id` = `adopted`
//! (`SECURITY LABEL FOR snowflake_id ON SEQUENCE … IS 'adopted'`), which
//! `pg_dump` writes with the sequence's definition, schema-only dumps and
//! `pg_restore --section=pre-data` included. Restoring the label adopts
//! the sequence again ([`relabel`]); schema tools never read
//! `pg_seclabel`. The list (`snowflake_adopted`) stays what every backend
//! reads; the label is what a dump of the schema carries.
//!
//! Who may set it: a superuser (restoring a dump, or by hand: the same
//! rights as `snowflake_adopt_sequence()`), and the adoption itself
//! ([`adopt_label`]). Removing the label adopts nothing back (there is no
//! way to give an adopted sequence back). `DROP EXTENSION` removes the
//! labels of the database ([`forget`]): a later `CREATE EXTENSION` starts
//! with nothing adopted. In a binary upgrade (`pg_upgrade`) the label is
//! taken as it comes: the list's own files come with the upgrade.

use super::errors;
use crate::catalog;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::Cell;

/// The provider's name, and the one label it takes.
const PROVIDER: &std::ffi::CStr = c"snowflake_id";
const ADOPTED: &str = "adopted";

thread_local! {
    /// Set while [`adopt_label`] labels a sequence the adoption just
    /// listed: [`relabel`] then checks nothing and adopts nothing.
    static OURS: Cell<bool> = const { Cell::new(false) };
}

/// Register the label provider: in the postmaster, at preload (a label of
/// a provider that is not loaded cannot be set, or restored).
pub(super) fn init() {
    // SAFETY: registered once, in _PG_init of the postmaster.
    unsafe { pg_sys::register_label_provider(PROVIDER.as_ptr(), Some(relabel)) };
}

/// The provider's hook: PostgreSQL calls it for `SECURITY LABEL FOR
/// snowflake_id`, after the object's ownership was checked, before the
/// label is stored.
#[pg_guard]
unsafe extern "C-unwind" fn relabel(
    object: *const pg_sys::ObjectAddress,
    label: *const std::ffi::c_char,
) {
    // SAFETY: PostgreSQL's arguments; catalog look-ups in a transaction.
    unsafe {
        if OURS.with(|o| o.get()) || pg_sys::IsBinaryUpgrade {
            return;
        }
        let obj = &*object;
        let is_sequence = obj.classId == pg_sys::RelationRelationId
            && obj.objectSubId == 0
            && pg_sys::get_rel_relkind(obj.objectId)
                == pg_sys::RELKIND_SEQUENCE as std::ffi::c_char;
        if !is_sequence {
            errors::label_not_a_sequence();
        }
        if label.is_null() {
            // Removed: nothing adopted back; but a dump of the schema
            // would no longer carry the adoption, so only a superuser may
            // remove it where it is set (the third red-team review).
            if !pg_sys::superuser()
                && !pg_sys::GetSecurityLabel(object, PROVIDER.as_ptr()).is_null()
            {
                errors::label_needs_superuser();
            }
            return;
        }
        let text = std::ffi::CStr::from_ptr(label).to_string_lossy();
        if text != ADOPTED {
            errors::label_unknown(&text);
        }
        if !pg_sys::superuser() {
            errors::label_needs_superuser();
        }
        // Adopt it by snowflake_adopt_sequence() (its checks included; an
        // adopted sequence stays as it is); without the extension in this
        // database the label adopts nothing.
        if catalog::own_relation(c"snowflake_adopted").is_none() {
            return;
        }
        // A sequence narrowed since its dump was taken cannot be adopted:
        // a WARNING, not an error that would abort a restore in one
        // transaction (the third red-team review, F2).
        if !is_bigint_sequence(obj.objectId) {
            pgrx::warning!(
                "sequence \"{}\" is not bigint: its snowflake_id label adopts nothing",
                crate::convert::as_owner::relation_name(obj.objectId)
            );
            return;
        }
        let ext_schema = Spi::get_one::<String>(
            "SELECT e.extnamespace::pg_catalog.regnamespace::pg_catalog.text FROM pg_catalog.pg_extension e \
             WHERE e.extname OPERATOR(pg_catalog.=) 'snowflake_id'",
        )
        .ok()
        .flatten();
        let Some(ext_schema) = ext_schema else { return };
        Spi::run_with_args(
            &format!("SELECT {ext_schema}.snowflake_adopt_sequence($1::pg_catalog.oid::pg_catalog.regclass)"),
            &[obj.objectId.into()],
        )
        .unwrap_or_else(|e| errors::adopt_convert_failed(&e.to_string()));
    }
}

/// Whether `seq`'s type (`pg_sequence.seqtypid`) is `bigint`.
fn is_bigint_sequence(seq: pg_sys::Oid) -> bool {
    Spi::get_one_with_args::<bool>(
        "SELECT q.seqtypid OPERATOR(pg_catalog.=) 'pg_catalog.int8'::pg_catalog.regtype FROM pg_catalog.pg_sequence q \
         WHERE q.seqrelid OPERATOR(pg_catalog.=) $1",
        &[seq.into()],
    )
    .ok()
    .flatten()
    .unwrap_or(false)
}

/// `snowflake_id_internal.adopt_label(seq)`: the label of a sequence the
/// adoption has just listed (`adopt_record`), so that `pg_dump` of the
/// schema carries it. Not for direct use (revoked from PUBLIC).
#[pg_extern(sql = false)]
pub fn adopt_label(seq: pg_sys::Oid) {
    // Without the library preloaded there is no provider to label with
    // (and nothing adopted draws Snowflake IDs): the adoption goes on.
    if crate::mint::shmem::state().is_none() {
        return;
    }
    // SAFETY: building an object address; `SetSecurityLabel` stores the
    // label as `SECURITY LABEL` does, with our hook told it is ours.
    unsafe {
        let addr = pg_sys::ObjectAddress {
            classId: pg_sys::RelationRelationId,
            objectId: seq,
            objectSubId: 0,
        };
        OURS.with(|o| o.set(true));
        let label = std::ffi::CString::new(ADOPTED).expect("no NUL");
        pgrx::PgTryBuilder::new(|| {
            pg_sys::SetSecurityLabel(&addr, PROVIDER.as_ptr(), label.as_ptr())
        })
        .finally(|| OURS.with(|o| o.set(false)))
        .execute();
    }
}

/// `DROP EXTENSION` (`super::shared`'s drop hook): the labels of this
/// database go with it, so that a later `CREATE EXTENSION`, and a dump,
/// find nothing adopted.
pub(super) fn forget() {
    // SAFETY: a scan of pg_seclabel (this database's labels) deleting our
    // provider's rows, as DeleteSecurityLabel does for one object.
    unsafe {
        let rel = pg_sys::table_open(pg_sys::SecLabelRelationId, pg_sys::RowExclusiveLock as _);
        let scan = pg_sys::systable_beginscan(
            rel,
            pg_sys::InvalidOid,
            false,
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
        );
        loop {
            let tup = pg_sys::systable_getnext(scan);
            if tup.is_null() {
                break;
            }
            let mut isnull = false;
            let provider = pg_sys::heap_getattr(
                tup,
                pg_sys::Anum_pg_seclabel_provider as _,
                (*rel).rd_att,
                &mut isnull,
            );
            if isnull {
                continue;
            }
            let p = pg_sys::text_to_cstring(provider.cast_mut_ptr());
            let ours = std::ffi::CStr::from_ptr(p) == PROVIDER;
            pg_sys::pfree(p.cast());
            if ours {
                pg_sys::CatalogTupleDelete(rel, &mut (*tup).t_self);
            }
        }
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(rel, pg_sys::RowExclusiveLock as _);
    }
}
