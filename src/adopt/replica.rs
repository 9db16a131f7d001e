//! What a logical-replication worker changes where no hook of ours runs.
//! A replicated `TRUNCATE … RESTART IDENTITY` restarts the subscriber's
//! own sequences of those tables (the apply worker calls
//! `ExecuteTruncateGuts` itself, not the utility hook), which took an
//! adopted sequence's counter off its fence (the red-team review of
//! 2337972, F3). In a replication worker, every relation whose relcache
//! entry this transaction invalidated is noted; before the transaction
//! commits, each of them that is an adopted sequence, and that this
//! transaction may have restarted ([`restarted_here`]), has its counter
//! put back at the fence ([`super::calls::refence`]), in the same
//! transaction.

use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::{Cell, RefCell};

thread_local! {
    /// Whether this process is a replication worker, once asked.
    static REPLICA: Cell<Option<bool>> = const { Cell::new(None) };
    /// The relations whose relcache entries this transaction invalidated.
    static SEEN: RefCell<Vec<pg_sys::Oid>> = const { RefCell::new(Vec::new()) };
}

/// Register the callbacks: in the postmaster, at preload.
pub(super) fn init() {
    super::list::also_on_relcache(relcache_changed);
    // SAFETY: callbacks registered once, in _PG_init of the postmaster,
    // before any backend exists.
    unsafe {
        pg_sys::RegisterXactCallback(Some(on_xact), std::ptr::null_mut());
    }
}

fn replica() -> bool {
    REPLICA.with(|r| match r.get() {
        Some(v) => v,
        None => {
            let v = super::adopt_from_replication();
            r.set(Some(v));
            v
        }
    })
}

/// A relation's relcache entry was invalidated (called from
/// [`super::list`]'s one relcache callback).
fn relcache_changed(relid: pg_sys::Oid) {
    if relid == pg_sys::Oid::INVALID || !replica() {
        return;
    }
    SEEN.with(|s| {
        let mut s = s.borrow_mut();
        if !s.contains(&relid) {
            s.push(relid);
        }
    });
}

/// Whether this transaction may have restarted adopted sequence `seq`,
/// and may put it back: its lock, conflicting with `setval()`'s only
/// where another transaction holds one that a restart here would have
/// conflicted with, is taken only if it is free at once (this
/// transaction's own `TRUNCATE` holds it already). The relcache entries
/// noted include other sessions' invalidations: a sequence that another
/// role holds locked was not restarted here, and waiting for it would
/// stall the subscription (the red-team review of a09a81d). A sequence
/// whose owner, and this worker's role, may not update it stays
/// restarted, with a WARNING: an error here would stop the
/// subscription for good.
///
/// # Safety
/// In a transaction.
unsafe fn restarted_here(seq: pg_sys::Oid) -> bool {
    // SAFETY: lock and privilege calls by OID, in a transaction.
    unsafe {
        if !pg_sys::ConditionalLockRelationOid(seq, pg_sys::RowExclusiveLock as _) {
            return false;
        }
        let update = pg_sys::ACL_UPDATE as pg_sys::AclMode;
        let owner = crate::convert::as_owner::owner_of(seq);
        let may = pg_sys::pg_class_aclcheck(seq, owner, update) == pg_sys::AclResult::ACLCHECK_OK
            || pg_sys::pg_class_aclcheck(seq, pg_sys::GetUserId(), update)
                == pg_sys::AclResult::ACLCHECK_OK;
        if !may {
            super::errors::replica_counter_restarted(&crate::convert::as_owner::relation_name(seq));
        }
        may
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn on_xact(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    if SEEN.with(|s| s.borrow().is_empty()) {
        return;
    }
    match event {
        XACT_EVENT_PRE_COMMIT | XACT_EVENT_PARALLEL_PRE_COMMIT => {
            let seen = SEEN.with(|s| std::mem::take(&mut *s.borrow_mut()));
            // SAFETY: syscache look-ups, privilege checks and a lock that is
            // taken only if it is free at once, in the committing
            // transaction.
            let seqs: Vec<pg_sys::Oid> = seen
                .into_iter()
                .filter(|&r| unsafe { pg_sys::get_rel_relkind(r) } == pg_sys::RELKIND_SEQUENCE as std::ffi::c_char)
                .filter(|&r| super::list::is_adopted(r))
                .filter(|&r| unsafe { restarted_here(r) })
                .collect();
            super::calls::refence(&seqs);
        }
        XACT_EVENT_COMMIT
        | XACT_EVENT_PARALLEL_COMMIT
        | XACT_EVENT_ABORT
        | XACT_EVENT_PARALLEL_ABORT
        | XACT_EVENT_PREPARE => SEEN.with(|s| s.borrow_mut().clear()),
        _ => {}
    }
}

/// `snowflake_id_internal.adopt_skip_replicated()`, the `ENABLE ALWAYS`
/// trigger of the list, the switch and the online conversion's progress
/// rows (issue 63, part 3): a `FOR ALL TABLES` publication carries them,
/// and their rows name the publisher's OIDs and conversions. A row
/// applied by a logical-replication worker is skipped, its `TRUNCATE`
/// refused (0A000); any other is written as it comes. A C function, bound
/// by OID when the trigger was made: it looks no name up when it fires,
/// so a plain role's conversion, with no USAGE on the extension's
/// internal schema, writes its progress rows through it (on a0da805 a
/// PL/pgSQL body calling into that schema refused them, 42501).
#[pg_trigger(sql = false)]
fn adopt_skip_replicated<'a>(
    trigger: &'a PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, AllocatedByPostgres>>, PgHeapTupleError> {
    let op = trigger.op();
    if !super::adopt_from_replication() {
        return Ok(match op {
            Ok(PgTriggerOperation::Delete) => trigger.old(),
            Ok(PgTriggerOperation::Truncate) => None,
            _ => trigger.new(),
        });
    }
    if let Ok(PgTriggerOperation::Truncate) = op {
        super::errors::replicated_truncate(
            &trigger.table_schema().unwrap_or_default(),
            &trigger.table_name().unwrap_or_default(),
        );
    }
    Ok(None)
}

/// The extension's triggers that fire `ALWAYS` (`session_replication_role`
/// must not turn them off: the replicas' skip, the high-water guard).
const ALWAYS: &[&str] = &[
    "snowflake_adopted_from_replica",
    "snowflake_adopted_truncate_from_replica",
    "snowflake_adopt_switch_from_replica",
    "snowflake_adopt_switch_truncate_from_replica",
    "snowflake_convert_progress_from_replica",
    "snowflake_convert_progress_truncate_from_replica",
    "written_by_snowflake_id",
    "truncated_by_nobody",
];

/// After `ALTER TABLE … ENABLE TRIGGER ALL | USER | name`: PostgreSQL sets
/// the triggers it names to fire on origin only, and `pg_restore
/// --disable-triggers` ends each table's data so. On the extension's own
/// tables, those of them that are its `ALWAYS` triggers (of [`ALWAYS`],
/// whose function is the extension's) fire `ALWAYS` again, as the caller
/// (the table's owner, who may): a replication worker, in replica mode,
/// skipped them after such a restore (the red-team review of 3462e24,
/// F5). A disabled one stays disabled.
///
/// # Safety
/// `stmt` is the `AlterTableStmt` that just ran.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn keep_always(stmt: *mut pg_sys::AlterTableStmt) {
    use pg_sys::AlterTableType as At;
    // SAFETY: the statement's own list and relation; the relation's cache
    // entry (locked by the statement), released at once; catalog
    // look-ups; our own statement through SPI.
    unsafe {
        let cmds = pgrx::PgList::<pg_sys::AlterTableCmd>::from_pg((*stmt).cmds);
        // The triggers the statement enabled: all of them, or by name.
        let mut all = false;
        let mut named: Vec<&std::ffi::CStr> = Vec::new();
        for c in cmds.iter_ptr().filter(|c| !c.is_null()) {
            if [At::AT_EnableTrigAll, At::AT_EnableTrigUser].contains(&(*c).subtype) {
                all = true;
            } else if (*c).subtype == At::AT_EnableTrig && !(*c).name.is_null() {
                named.push(std::ffi::CStr::from_ptr((*c).name));
            }
        }
        if (!all && named.is_empty()) || (*stmt).relation.is_null() {
            return;
        }
        let Some(relid) = crate::catalog::relation_named((*stmt).relation) else {
            return;
        };
        // Only the extension's own tables (the review of e6ba3bc, F2 and
        // F3: a table of a plain role's with triggers of those names).
        let extension = pg_sys::get_extension_oid(c"snowflake_id".as_ptr(), true);
        if extension == pg_sys::Oid::INVALID
            || pg_sys::getExtensionOfObject(pg_sys::RelationRelationId, relid) != extension
        {
            return;
        }
        let rel = pg_sys::RelationIdGetRelation(relid);
        if rel.is_null() {
            return;
        }
        let mut names = Vec::new();
        let td = (*rel).trigdesc;
        if !td.is_null() {
            for i in 0..(*td).numtriggers as usize {
                let t = &*(*td).triggers.add(i);
                let name = std::ffi::CStr::from_ptr(t.tgname);
                // Those the statement just set to fire on origin (never a
                // disabled one).
                if t.tgenabled == pg_sys::TRIGGER_FIRES_ON_ORIGIN as std::ffi::c_char
                    && (all || named.contains(&name))
                    && ALWAYS.iter().any(|a| a.as_bytes() == name.to_bytes())
                    && pg_sys::getExtensionOfObject(pg_sys::ProcedureRelationId, t.tgfoid)
                        == extension
                {
                    names.push(
                        std::ffi::CStr::from_ptr(pg_sys::quote_identifier(t.tgname)).to_owned(),
                    );
                }
            }
        }
        pg_sys::RelationClose(rel);
        if names.is_empty() {
            return;
        }
        let table = crate::convert::as_owner::qualified_name(relid);
        for name in names {
            // A PostgreSQL ERROR here is the statement's; an SPI failure
            // leaves the trigger as the statement made it, and says so.
            if let Err(e) = Spi::run(&format!(
                "ALTER TABLE {table} ENABLE ALWAYS TRIGGER {}",
                name.to_string_lossy()
            )) {
                pgrx::warning!("could not make trigger {name:?} of {table} fire ALWAYS again: {e}");
            }
        }
    }
}
