//! Adopted sequences (issue 57): `nextval('orders_id_seq')` returns a
//! Snowflake ID, on stock PostgreSQL, without a change to the
//! application.
//!
//! Uses [`crate::mint`] (the IDs), [`crate::convert`] (running an owner's
//! statements as the owner) and the ground; used by nothing
//! (`scripts/module_graph.py`).
//! - [`planner`]: the planner hook that puts the functions of [`calls`]
//!   in place of `nextval`, `currval`, `setval` and `lastval` in every
//!   statement of a database with adopted sequences;
//! - [`utility`]: the same for `CALL`'s arguments, `DISCARD`, and
//!   `lastval()` after a `COPY`;
//! - [`walk`]: the walks of a statement's tree both hooks make;
//! - [`list`]: which sequences of the database are adopted, as this
//!   backend knows them;
//! - [`shared`]: which sequences of every database are adopted, as the
//!   server knows them (shared memory), and the changes a transaction
//!   applies there at its commit;
//! - [`labels`]: the security label that carries an adoption in the
//!   schema (`pg_dump -s`);
//! - [`copy`]: `COPY … FROM`'s defaults, swapped in this backend's
//!   relation cache entry while it runs;
//! - [`aborts`]: what a failed statement left in the backend, put back
//!   at its (sub)transaction's abort;
//! - [`fill`]: `ALTER TABLE … ADD COLUMN` of a `bigserial` or `bigint`
//!   identity, whose rows get Snowflake IDs;
//! - [`session`]: the session's `currval`/`lastval` values;
//! - [`calls`]: those functions;
//! - `sql/adopt.sql`: the list of adopted sequences (a configuration
//!   table, carried by `pg_dump`), `snowflake_adopt_sequence()`, and the
//!   event trigger that forgets a dropped sequence.
//!
//! ## `snowflake_adopt_sequence(seq regclass) → void`
//!
//! Adopts a `bigint` sequence of this database: from the caller's commit
//! on, in every session of the database, `nextval(seq)` returns a
//! Snowflake ID of this server (with `INCREMENT BY n`, a `v` such that
//! `v - n .. v + n - 1` are all reserved for the caller: client-side
//! allocators number `n` keys down or up from it), `currval`
//! and `lastval` return it back, and `setval` changes nothing (WARNING).
//! The columns that take its values keep their defaults and identities
//! (issue 63: the catalog is the application's); their draws, `COPY`'s
//! included ([`copy`]), are Snowflake IDs, and `currval(seq)` and
//! `lastval()` return the last row's, as after an insert into a
//! `bigserial`. Superuser only (42501); needs the library preloaded
//! (55000); refuses a non-sequence (42809) and a sequence or column
//! narrower than `bigint` (42804). Adopting an adopted sequence changes
//! nothing.
//!
//! ```sql
//! SELECT snowflake_adopt_sequence('orders_id_seq');
//! SELECT nextval('orders_id_seq');          -- a Snowflake ID
//! SELECT snowflake_decode(currval('orders_id_seq'));
//! ```

mod aborts;
pub mod calls;
mod copy;
mod errors;
mod execute;
mod fence_hint;
mod fill;
mod labels;
mod list;
mod planner;
mod proc;
mod replica;
pub mod session;
mod shared;
mod switch;
mod utility;
mod walk;

#[allow(unused_imports)] // named in `requires` below
use crate::convert::as_owner::snowflake_convert_as_owner;
use crate::{convert::as_owner, mint::shmem};
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Install the hooks and callbacks of adopted sequences: in the
/// postmaster, at preload (every backend inherits them).
pub fn init() {
    shared::init();
    list::init();
    aborts::init();
    copy::init();
    fill::init();
    fence_hint::init();
    labels::init();
    planner::init();
    replica::init();
    utility::init();
}

extension_sql_file!(
    "sql/adopt.sql",
    name = "adopt",
    requires = [
        "high_water",
        "convert_online_progress",
        snowflake_convert_as_owner
    ]
);

/// Every backend of this database reads the list of adopted sequences
/// again, and plans its statements again, once the caller commits (a
/// relcache invalidation of the list). With `require_preload`, first
/// refuses (55000) where the library is not preloaded.
#[pg_extern(sql = false)]
pub fn adopt_changed(require_preload: bool) {
    if require_preload && shmem::state().is_none() {
        errors::adopt_not_preloaded();
    }
    let table = list_table();
    if table != pg_sys::Oid::INVALID {
        // SAFETY: an invalidation of an existing relation, sent at commit.
        unsafe { pg_sys::CacheInvalidateRelcacheByRelid(table) };
    }
}

/// Run `stmt` as the owner of `rel`, in a security-restricted operation
/// (`snowflake_convert_as_owner`): the adoption's own door to it, in the
/// extension's internal schema, where no role but a superuser can create
/// an overload that a call by name would pick instead.
#[pg_extern(sql = false)]
pub fn adopt_as_owner(rel: pg_sys::Oid, stmt: &str) {
    as_owner::snowflake_convert_as_owner(rel, stmt);
}

/// Adopts the sequence of a column that `snowflake_convert_column()`
/// just converted: the sequence is the identity of a `bigint` column, or
/// owned by a `bigint` column whose default is exactly `nextval()` of it
/// (or, converted by an earlier version, the extension's `snowflake_nextval()` or
/// `snowflake_nextval_for()`), and the caller has the privileges of its
/// owner (42501 otherwise; 55000 where the column is none of these).
/// The conversion keeps the column's identity or `nextval()` default as
/// the application made it (issue 63), so schema tools see the table
/// they wrote, and `currval()` and `lastval()` follow its inserts.
/// Called by the conversion, which keeps the sequence for
/// `pg_get_serial_sequence()` and code that calls `nextval()` of it; the
/// entry in the list is written as the list's owner, the fence as the
/// sequence's. Needs the library preloaded. VOLATILE, STRICT, PARALLEL
/// UNSAFE.
///
/// ```sql
/// SELECT * FROM snowflake_convert_column('orders', 'id');
/// -- ... | adopt sequence | public.orders_id_seq | ...
/// SELECT snowflake_worker_id(nextval('orders_id_seq'));
/// ```
#[pg_extern(
    volatile,
    strict,
    parallel_unsafe,
    sql = "CREATE FUNCTION snowflake_convert_adopt_sequence(seq regclass) RETURNS void\nSTRICT VOLATILE PARALLEL UNSAFE\nLANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_convert_adopt_sequence_wrapper';"
)]
pub fn snowflake_convert_adopt_sequence(seq: pg_sys::Oid) {
    if shmem::state().is_none() {
        errors::adopt_not_preloaded();
    }
    // As the caller: the catalog rows (only pg_catalog objects, every
    // name and operator qualified: nothing a role wrote runs).
    let row = Spi::connect(|c| {
        let t = c.select(
            "SELECT c.relowner, c.relpersistence OPERATOR(pg_catalog.=) 't' AS temp,
                    q.seqtypid OPERATOR(pg_catalog.=) 'pg_catalog.int8'::pg_catalog.regtype AS wide,
                    EXISTS (SELECT FROM pg_catalog.pg_depend d
                              JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) d.refobjid
                                                             AND a.attnum OPERATOR(pg_catalog.=) d.refobjsubid
                              LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid OPERATOR(pg_catalog.=) a.attrelid
                                                                AND ad.adnum OPERATOR(pg_catalog.=) a.attnum
                             WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                               AND d.objid OPERATOR(pg_catalog.=) c.oid
                               AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                               AND a.atttypid OPERATOR(pg_catalog.=) 'pg_catalog.int8'::pg_catalog.regtype
                               AND NOT a.attisdropped
                               AND ((d.deptype OPERATOR(pg_catalog.=) 'i' AND a.attidentity OPERATOR(pg_catalog.<>) '')
                                    OR (d.deptype OPERATOR(pg_catalog.=) 'a'
                                        AND pg_catalog.pg_get_expr(ad.adbin, ad.adrelid)
                                            OPERATOR(pg_catalog.=) ('nextval(''' OPERATOR(pg_catalog.||) pg_catalog.replace(
                                                CASE WHEN pg_catalog.current_setting('standard_conforming_strings') OPERATOR(pg_catalog.=) 'off'
                                                     THEN pg_catalog.replace(c.oid::pg_catalog.regclass::pg_catalog.text, pg_catalog.chr(92),
                                                                             pg_catalog.chr(92) OPERATOR(pg_catalog.||) pg_catalog.chr(92))
                                                     ELSE c.oid::pg_catalog.regclass::pg_catalog.text END,
                                                '''', '''''') OPERATOR(pg_catalog.||) '''::regclass)'))
                                    OR (d.deptype OPERATOR(pg_catalog.=) 'a'
                                        AND EXISTS (SELECT FROM pg_catalog.pg_depend fd
                              JOIN pg_catalog.pg_depend ed
                                ON ed.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                               AND ed.objid OPERATOR(pg_catalog.=) fd.refobjid
                               AND ed.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                               AND ed.deptype OPERATOR(pg_catalog.=) 'e'
                              JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) ed.refobjid
                                                           AND e.extname OPERATOR(pg_catalog.=) 'snowflake_id'
                              JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) fd.refobjid
                                                       AND p.proname OPERATOR(pg_catalog.=) ANY (ARRAY['snowflake_nextval', 'snowflake_nextval_for']::pg_catalog.name[])
                             WHERE fd.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
                               AND fd.objid OPERATOR(pg_catalog.=) ad.oid
                               AND fd.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                               AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend od
                                                WHERE od.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
                                                  AND od.objid OPERATOR(pg_catalog.=) ad.oid
                                                  AND od.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                                                  AND od.refobjid OPERATOR(pg_catalog.<>) fd.refobjid))))) AS converted
               FROM pg_catalog.pg_class c
               JOIN pg_catalog.pg_sequence q ON q.seqrelid OPERATOR(pg_catalog.=) c.oid
              WHERE c.oid OPERATOR(pg_catalog.=) $1",
            None,
            &[seq.into()],
        )?;
        if t.is_empty() {
            return Ok::<_, pgrx::spi::Error>(None);
        }
        let r = t.first();
        Ok(Some((
            r.get::<pg_sys::Oid>(1)?.unwrap_or_default(),
            r.get::<bool>(2)?.unwrap_or(true),
            r.get::<bool>(3)?.unwrap_or(false),
            r.get::<bool>(4)?.unwrap_or(false),
        )))
    })
    .unwrap_or_else(|e| errors::adopt_convert_failed(&e.to_string()));
    let name = || as_owner::relation_name(seq);
    let Some((owner, temp, wide, converted)) = row else {
        errors::not_a_sequence(&name());
    };
    // SAFETY: a catalog check of this backend's current user.
    if !unsafe { pg_sys::has_privs_of_role(pg_sys::GetUserId(), owner) } {
        errors::not_owner(&name());
    }
    if temp || !wide || !converted {
        errors::adopt_not_converted(&name());
    }
    // The list and the fence: as the list's owner (the extension's), in a
    // security-restricted operation; the fence itself then runs as the
    // sequence's owner.
    as_owner::with_role(as_owner::owner_of(list_table()), || {
        Spi::connect_mut(|c| {
            c.update(
                "SELECT snowflake_id_internal.adopt_record($1::pg_catalog.oid::pg_catalog.regclass, 'convert')",
                None,
                &[seq.into()],
            )?;
            Ok::<_, pgrx::spi::Error>(())
        })
        .unwrap_or_else(|e| errors::adopt_convert_failed(&e.to_string()))
    });
}

/// Whether any of `oids` is in the list of adopted sequences as of now (a
/// fresh snapshot): the event trigger that forgets dropped sequences asks
/// it after its DELETE, which in REPEATABLE READ cannot see an adoption
/// committed after the transaction's snapshot; then the DROP fails
/// (40001) rather than leave an OID that another relation may take.
#[pg_extern(sql = false)]
pub fn adopt_listed_now(oids: Vec<pg_sys::Oid>) -> bool {
    let table = list_table();
    if table == pg_sys::Oid::INVALID {
        return false;
    }
    // SAFETY: the list read as `list::read_list` reads it, in the
    // event trigger's transaction.
    unsafe {
        list::read_list(table, false)
            .unwrap_or_default()
            .iter()
            .any(|o| oids.contains(o))
    }
}

/// Whether the event trigger that forgets dropped sequences must take any
/// of `oids` off the list. Where the list's lock is free at once, it is
/// taken (the `DELETE` then waits for nothing) and the answer is yes: the
/// `DELETE` and the fresh read after it decide, as before. Where a lock is
/// held or queued on it (a database owner's `VACUUM FULL` behind an open
/// transaction), the server's table in shared memory answers: no, when
/// none of them is adopted, so the `DROP` of a sequence that is not
/// adopted waits for nothing (`attack_adopt_lock_queue.sh`: on 3462e24
/// every `DROP TABLE` of a `serial` waited); yes otherwise, or where the
/// table does not hold the database.
#[pg_extern(sql = false)]
pub fn adopt_may_list(oids: Vec<pg_sys::Oid>) -> bool {
    let table = list_table();
    if table == pg_sys::Oid::INVALID {
        return false;
    }
    // SAFETY: a lock request that does not wait, in the trigger's
    // transaction (held to its end, as the DELETE's own would be).
    if unsafe { pg_sys::ConditionalLockRelationOid(table, pg_sys::RowExclusiveLock as _) } {
        return true;
    }
    shared::may_list(&oids)
}

/// Whether this process is a logical-replication worker (apply, parallel
/// apply, table sync), which applies another server's rows. A `FOR ALL
/// TABLES` publication carries the extension's tables; their rows name
/// the publisher's OIDs, so the extension's replica triggers skip them
/// (issue 63, part 3; `replica::adopt_skip_replicated`).
pub fn adopt_from_replication() -> bool {
    // SAFETY: the background worker entry of this process, if any, with
    // its NUL-terminated names (postmaster-made, never changed).
    unsafe {
        let w = pg_sys::MyBgworkerEntry;
        if w.is_null() {
            return false;
        }
        let lib = std::ffi::CStr::from_ptr((*w).bgw_library_name.as_ptr());
        let f = std::ffi::CStr::from_ptr((*w).bgw_function_name.as_ptr());
        lib == c"postgres"
            && matches!(
                f.to_bytes(),
                b"ApplyWorkerMain" | b"ParallelApplyWorkerMain" | b"TablesyncWorkerMain"
            )
    }
}

/// The list of adopted sequences of this database, called from the
/// extension's own functions (its schema exists): `InvalidOid` where the
/// table does not (an older version's objects).
fn list_table() -> pg_sys::Oid {
    // SAFETY: catalog look-ups by name in the extension's schema.
    unsafe {
        let ns = pg_sys::get_namespace_oid(c"snowflake_id_internal".as_ptr(), false);
        pg_sys::get_relname_relid(c"snowflake_adopted".as_ptr(), ns)
    }
}
