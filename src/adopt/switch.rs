//! The switch in a schema-only dump (issue 63, part 3). The switch is a
//! row of a configuration table, which `pg_dump -s` leaves out. So while
//! it is on, the database also holds its carrier: the event trigger
//! `snowflake_id_switch`, disabled, which runs `pg_catalog.snowflake_id_switch()`
//! (a function that does nothing) and is no member of the extension.
//! `pg_dump` writes it, and event triggers last of all (`pg_restore`
//! restores them after the ACLs): restored, [`created`] turns the switch
//! on after the restore made its tables and sequences, so the restore
//! adopts exactly what the labels carry ([`super::labels`]), and every
//! new table after it.
//!
//! The switch row's trigger makes and drops the carrier (so a restore's
//! row keeps it in step too), and a restored carrier whose name exists
//! already is taken as done ([`made_already`]). The carrier depends on the
//! extension (`DEPENDENCY_AUTO_EXTENSION`): `DROP EXTENSION` drops it
//! too. A binary upgrade (`pg_upgrade`) restores it as it comes, with that
//! dependency, and the switch's row with the database's files.
//! Only a superuser creates an event trigger, and only a superuser
//! creates a function in `pg_catalog`: a restore whose `CREATE EXTENSION`
//! failed (a schema of that name made by another role) finds no
//! function to run, and makes no trigger (the review of c642bda, F2).

use pgrx::pg_sys;
use pgrx::prelude::*;

/// Before a `CREATE EVENT TRIGGER`: whether it makes a carrier of the
/// switch under the name of one that exists already (a restore into a
/// database whose switch is on, from a template or an earlier restore).
/// The statement is then skipped, as done, rather than fail ("already
/// exists", the red-team review of 3462e24, F2); [`created`] still runs.
///
/// # Safety
/// `stmt` is a `CreateEventTrigStmt` about to run.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn made_already(
    stmt: *mut pg_sys::CreateEventTrigStmt,
) -> bool {
    // SAFETY: look-ups by name and OID in the statement's transaction;
    // the function named as CREATE EVENT TRIGGER itself resolves it.
    unsafe {
        // Only a superuser's: anyone else's gets PostgreSQL's 42501 (the
        // red-team review of 9f88041, F5).
        let carrier = carrier_function();
        if carrier == pg_sys::Oid::INVALID || !pg_sys::superuser() {
            return false;
        }
        let trigger = pg_sys::get_event_trigger_oid((*stmt).trigname, true);
        trigger != pg_sys::Oid::INVALID
            && runs(trigger) == carrier
            && pg_sys::LookupFuncName((*stmt).funcname, 0, std::ptr::null(), true) == carrier
    }
}

/// After a `CREATE EVENT TRIGGER` (so by a superuser): if the trigger
/// runs `pg_catalog.snowflake_id_switch()`, it is the switch's carrier:
/// it goes with the extension, and the switch is on.
///
/// # Safety
/// `stmt` is the `CreateEventTrigStmt` that just ran (or was skipped by
/// [`made_already`]).
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn created(stmt: *mut pg_sys::CreateEventTrigStmt) {
    // SAFETY: syscache look-ups by name and OID in the statement's
    // transaction; the extension's own function called by OID.
    unsafe {
        let trigger = pg_sys::get_event_trigger_oid((*stmt).trigname, true);
        let carrier = carrier_function();
        if trigger == pg_sys::Oid::INVALID
            || carrier == pg_sys::Oid::INVALID
            || runs(trigger) != carrier
            || pg_sys::creating_extension
            || !pg_sys::superuser()
            || !depend_on_extension(trigger)
        {
            return;
        }
        // The switch's own carrier (its row's trigger made it), or a
        // binary upgrade's: nothing more to do.
        pg_sys::CommandCounterIncrement();
        if pg_sys::IsBinaryUpgrade || switch_on() {
            return;
        }
        let Some((ns, _)) = crate::catalog::own_relation(c"snowflake_adopt_switch") else {
            return;
        };
        let turn = crate::catalog::own_function(ns, c"adopt_switch", &[pg_sys::BOOLOID]);
        if turn != pg_sys::Oid::INVALID {
            pg_sys::OidFunctionCall1Coll(turn, pg_sys::Oid::INVALID, pg_sys::Datum::from(true));
        }
    }
}

/// `snowflake_id_internal.adopt_carrier_depends()`, from the switch row's
/// trigger while it is on: every carrier goes with the extension. One
/// restored where the library was not preloaded (no hook saw it) gets its
/// dependency here (the red-team review of 3462e24, F3: `DROP EXTENSION`
/// then failed).
#[pg_extern(sql = false)]
pub fn adopt_carrier_depends() {
    let carrier = carrier_function();
    if carrier == pg_sys::Oid::INVALID {
        return;
    }
    // SAFETY: a scan of pg_event_trigger (a few rows), in the trigger's
    // transaction; each carrier's dependency recorded as PostgreSQL
    // records its own.
    unsafe {
        let rel = pg_sys::table_open(pg_sys::EventTriggerRelationId, pg_sys::AccessShareLock as _);
        let scan = pg_sys::systable_beginscan(
            rel,
            pg_sys::Oid::INVALID,
            false,
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
        );
        let mut carriers = Vec::new();
        loop {
            let tup = pg_sys::systable_getnext(scan);
            if tup.is_null() {
                break;
            }
            let form = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_event_trigger>(tup);
            if (*form).evtfoid == carrier {
                carriers.push((*form).oid);
            }
        }
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(rel, pg_sys::AccessShareLock as _);
        for trigger in carriers {
            depend_on_extension(trigger);
        }
    }
}

/// Record that the event trigger `trigger` goes with the extension
/// (`DEPENDENCY_AUTO_EXTENSION`, as `ALTER … DEPENDS ON EXTENSION`
/// records it: no member, so `pg_dump` writes it), unless it does
/// already. False where the extension does not exist.
///
/// # Safety
/// In a transaction.
unsafe fn depend_on_extension(trigger: pg_sys::Oid) -> bool {
    // SAFETY: catalog look-ups and a dependency recorded as PostgreSQL
    // records its own.
    unsafe {
        let extension = pg_sys::get_extension_oid(c"snowflake_id".as_ptr(), true);
        if extension == pg_sys::Oid::INVALID {
            return false;
        }
        let known = pgrx::PgList::<std::ffi::c_void>::from_pg(pg_sys::getAutoExtensionsOfObject(
            pg_sys::EventTriggerRelationId,
            trigger,
        ));
        if known.iter_oid().any(|e| e == extension) {
            return true;
        }
        let depender = pg_sys::ObjectAddress {
            classId: pg_sys::EventTriggerRelationId,
            objectId: trigger,
            objectSubId: 0,
        };
        let referenced = pg_sys::ObjectAddress {
            classId: pg_sys::ExtensionRelationId,
            objectId: extension,
            objectSubId: 0,
        };
        pg_sys::recordDependencyOn(
            &depender,
            &referenced,
            pg_sys::DependencyType::DEPENDENCY_AUTO_EXTENSION,
        );
        true
    }
}

/// `pg_catalog.snowflake_id_switch()`, or `InvalidOid`.
fn carrier_function() -> pg_sys::Oid {
    crate::catalog::own_function(
        pg_sys::PG_CATALOG_NAMESPACE.into(),
        c"snowflake_id_switch",
        &[],
    )
}

/// The function the event trigger `trigger` runs.
///
/// # Safety
/// In a transaction.
unsafe fn runs(trigger: pg_sys::Oid) -> pg_sys::Oid {
    // SAFETY: a syscache look-up by OID, released at once.
    unsafe {
        let tup = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::EVENTTRIGGEROID as _,
            pg_sys::Datum::from(trigger),
        );
        if tup.is_null() {
            return pg_sys::Oid::INVALID;
        }
        let f = (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_event_trigger>(tup)).evtfoid;
        pg_sys::ReleaseSysCache(tup);
        f
    }
}

/// Whether the switch of this database is on: its row in the extension's
/// table, read as the switch's event trigger reads it during the same
/// statement (no SQL, no privilege check).
///
/// # Safety
/// In a transaction; in a guarded function.
pub(super) unsafe fn switch_on() -> bool {
    let Some((_, table)) = crate::catalog::own_relation(c"snowflake_adopt_switch") else {
        return false;
    };
    // SAFETY: a heap scan of the extension's one-row table under its
    // reader's lock, with a registered snapshot; its second column is
    // `enabled boolean NOT NULL`.
    unsafe {
        let rel = pg_sys::table_open(table, pg_sys::AccessShareLock as _);
        let snap = pg_sys::RegisterSnapshot(pg_sys::GetLatestSnapshot());
        let scan = pg_sys::systable_beginscan(
            rel,
            pg_sys::Oid::INVALID,
            false,
            snap,
            0,
            std::ptr::null_mut(),
        );
        let mut on = false;
        loop {
            let tup = pg_sys::systable_getnext(scan);
            if tup.is_null() {
                break;
            }
            let mut values = [pg_sys::Datum::from(0usize); 3];
            let mut nulls = [true; 3];
            if (*(*rel).rd_att).natts as usize >= 2 {
                pg_sys::heap_deform_tuple(
                    tup,
                    (*rel).rd_att,
                    values.as_mut_ptr(),
                    nulls.as_mut_ptr(),
                );
                on |= !nulls[1] && values[1].value() != 0;
            }
        }
        pg_sys::systable_endscan(scan);
        pg_sys::UnregisterSnapshot(snap);
        pg_sys::table_close(rel, pg_sys::NoLock as _);
        on
    }
}
