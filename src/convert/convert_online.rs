//! The online conversion: `CALL snowflake_convert_online(tbl, col)`, for
//! tables too big to rewrite under an ACCESS EXCLUSIVE lock.
//!
//! It reaches the result of `snowflake_convert_column()` (a `bigint` key
//! that keeps its identity or `nextval()` default over its own sequence,
//! adopted, its foreign-key columns widened)
//! while the application keeps reading and writing. No lock stronger than
//! SHARE UPDATE EXCLUSIVE is held for longer than a catalog change; every
//! such lock is requested with `lock_timeout = lock_wait` (1 s) and retried,
//! so a long transaction delays the conversion, never the application for
//! longer than that.
//!
//! Steps, each in its own transaction (the procedure commits after each,
//! so it must be CALLed outside a transaction block), recorded in
//! `snowflake_convert_progress` (shown by the `snowflake_convert_status`
//! view):
//! 1. **prepare:** the offline conversion's checks, plus what an online
//!    swap cannot carry (views, partitioned tables, multi-column or
//!    second-level references, other objects on the column); a new `bigint`
//!    column next to each column to widen, and a trigger that keeps it equal
//!    to the old one on every INSERT and UPDATE;
//! 2. **back-fill:** batches of `batch_pages` pages (by `ctid` range), each
//!    its own transaction, resting `throttle` times as long as the batch
//!    took;
//! 3. **indexes:** every index on an old column again on the new one,
//!    built `CONCURRENTLY` by the caller at the top level (a function
//!    cannot): `SELECT snowflake_convert_online_indexes(tbl, col) \gexec`;
//! 4. **constraints:** NOT NULL as a CHECK and every foreign key again on
//!    the new columns, each added `NOT VALID` (a short lock) and then
//!    validated (SHARE UPDATE EXCLUSIVE);
//! 5. **swap:** one short transaction: drop the triggers and the old
//!    columns, rename the new ones, attach the primary key and unique
//!    constraints to the new indexes, give constraints and indexes their
//!    old names, copy column comments and grants, give the key its
//!    generator as the application made it, over its own sequence,
//!    adopted (issues 57 and 63): a serial's `DEFAULT nextval(seq)`, or
//!    an identity of the old one's name, kind, bounds and counter
//!    (without a sequence of its own, `DEFAULT snowflake_nextval()`), and
//!    check that existing values are below the next ID.
//!
//! A cancel, a crash or a killed session loses at most the batch in
//! flight; `CALL` again resumes from the recorded step.
//!
//! ## `snowflake_convert_online(tbl regclass, col name, batch_pages integer DEFAULT 1000, throttle real DEFAULT 0.25, lock_wait interval DEFAULT '1s', max_retries integer DEFAULT 100)`
//!
//! ```sql
//! CALL snowflake_convert_online('orders', 'id');                  -- prepare, back-fill
//! SELECT snowflake_convert_online_indexes('orders', 'id') \gexec  -- CREATE INDEX CONCURRENTLY
//! CALL snowflake_convert_online('orders', 'id');                  -- constraints, swap
//! SELECT * FROM snowflake_convert_status;                          -- progress, at any time
//! ```
//!
//! ## `snowflake_convert_online_indexes(tbl regclass, col name)`
//!
//! The `CREATE INDEX CONCURRENTLY` statements the conversion still needs
//! (with a `DROP INDEX CONCURRENTLY` first for a build that failed), one
//! per row, for psql's `\gexec`. STABLE.
//!
//! ```sql
//! SELECT snowflake_convert_online_indexes('orders', 'id') \gexec
//! ```

//!
//! ## Who writes the progress
//!
//! `snowflake_convert_progress` tells the conversion what to do next, so
//! only the conversion may write it: a row written by hand could make
//! another role's `CALL` act on objects the row names. The steps run as
//! the caller (nothing here is SECURITY DEFINER), so the table cannot be
//! closed by privileges alone; instead a trigger refuses every write
//! unless [`snowflake_convert_progress_writable`] says it comes from one
//! of the two entry points below, [`snowflake_convert_online_run_step`]
//! and [`snowflake_convert_online_run_abandon`], by the role that called
//! them, and not from the table owner's code they run (which runs as the
//! owner in a security-restricted operation, `crate::convert::as_owner`). Each
//! step also checks that the recorded columns are the ones the catalog
//! says it converts, under the names it gives them.

use crate::errors;
use pgrx::datum::Interval;
use pgrx::prelude::*;
use std::cell::Cell;

extension_sql_file!(
    "sql/convert_online_progress.sql",
    name = "convert_online_progress",
    requires = ["convert_column"]
);

extension_sql_file!(
    "sql/convert_online.sql",
    name = "convert_online",
    requires = [
        "convert_column",
        "convert_online_progress",
        snowflake_convert_progress_writable,
        snowflake_convert_online_run_step,
        snowflake_convert_online_run_abandon
    ]
);

/// The online-conversion bodies the entry points run, as
/// `@extschema@`-qualified SQL.
const STEP_SQL: &str = include_str!("sql/convert_online_run_step.sql");
const ABANDON_SQL: &str = include_str!("sql/convert_online_run_abandon.sql");
const EXTENSION_SCHEMA_SQL: &str = include_str!("sql/extension_schema.sql");

thread_local! {
    /// The role that entered the running entry point, if any.
    static WRITER: Cell<Option<pg_sys::Oid>> = const { Cell::new(None) };
}

/// While alive, the progress table may be written by the role that
/// created it; restores the previous state when dropped, also when an
/// ERROR unwinds through it.
struct Writer(Option<pg_sys::Oid>);

impl Writer {
    fn enter() -> Self {
        // SAFETY: reading this backend's current user.
        let me = unsafe { pg_sys::GetUserId() };
        Writer(WRITER.with(|w| w.replace(Some(me))))
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        WRITER.with(|w| w.set(self.0));
    }
}

/// Whether a write to `snowflake_convert_progress` now comes from the
/// online conversion itself: inside one of its entry points, by the role
/// that called it, outside a security-restricted operation (where table
/// owners' code runs). A superuser outside such an operation may write it
/// too (restoring a dump of a database with a conversion under way: the
/// rows are checked against the catalog at every step anyway). Called by
/// the table's guard trigger.
///
/// ```sql
/// SELECT snowflake_convert_progress_writable();  -- false outside the conversion
/// ```
#[pg_extern(volatile, parallel_restricted)]
pub fn snowflake_convert_progress_writable() -> bool {
    // SAFETY: reading this backend's user and security context.
    let (me, restricted) =
        unsafe { (pg_sys::GetUserId(), pg_sys::InSecurityRestrictedOperation()) };
    // SAFETY: a catalog check of the current user.
    !restricted && (WRITER.with(|w| w.get()) == Some(me) || unsafe { pg_sys::superuser() })
}

/// `@extschema@` of `sql`, replaced by this extension's schema, quoted.
fn qualified(sql: &str) -> String {
    let schema = Spi::get_one::<String>(EXTENSION_SCHEMA_SQL)
        .ok()
        .flatten()
        .unwrap_or_else(|| errors::not_installed());
    sql.replace("@extschema@", &schema)
}

/// One unit of work of the online conversion (the body in
/// `snowflake_convert_online_step_body`), allowed to write its progress.
/// Called by `snowflake_convert_online_step()`, which the procedure calls.
///
/// ```sql
/// SELECT snowflake_convert_online_run_step('orders', 'id', 1000, '1s');
/// ```
#[pg_extern(volatile, strict, parallel_unsafe)]
pub fn snowflake_convert_online_run_step(
    tbl: pg_sys::Oid,
    col: &str,
    batch_pages: i32,
    lock_wait: Interval,
) -> Option<String> {
    let _w = Writer::enter();
    Spi::get_one_with_args::<String>(
        &qualified(STEP_SQL),
        &[tbl.into(), col.into(), batch_pages.into(), lock_wait.into()],
    )
    .unwrap_or_else(|e| errors::spi_failed("snowflake_convert_online_step", e))
}

/// Backing out of an online conversion (the body in
/// `snowflake_convert_online_abandon_body`), allowed to write its
/// progress. Called by `snowflake_convert_online_abandon()`.
///
/// ```sql
/// SELECT * FROM snowflake_convert_online_run_abandon('orders', 'id');
/// ```
#[pg_extern(volatile, strict, parallel_unsafe)]
pub fn snowflake_convert_online_run_abandon(
    tbl: pg_sys::Oid,
    col: &str,
) -> TableIterator<'static, (name!(action, String), name!(object, String))> {
    let _w = Writer::enter();
    let rows: Vec<(String, String)> = Spi::connect_mut(|client| {
        let t = client.update(&qualified(ABANDON_SQL), None, &[tbl.into(), col.into()])?;
        t.map(|row| {
            Ok((
                row.get::<String>(1)?.unwrap_or_default(),
                row.get::<String>(2)?.unwrap_or_default(),
            ))
        })
        .collect::<Result<Vec<_>, pgrx::spi::Error>>()
    })
    .unwrap_or_else(|e| errors::spi_failed("snowflake_convert_online_abandon", e));
    TableIterator::new(rows)
}
