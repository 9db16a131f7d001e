//! The floor from the data: the generator never mints a key that a table
//! of this database already holds.
//!
//! The state file and the WAL make the generator continue above every ID
//! this server reserved. Some standard operations carry the keys but not
//! the state: `pg_upgrade` (a new data directory), a dump restored into a
//! new server that keeps the old one's worker id, a state file lost or put
//! back stale. So each database's first call to `snowflake_nextval()`
//! since start-up (or a crash restart) also raises the generator above the
//! largest key in this database's columns whose default is
//! `snowflake_nextval()` and that lead an index: an index probe per
//! column, once. IDs more than [`FUTURE_LIMIT_MS`] ahead of this server's
//! clock are not trusted as a floor (a row anyone can write must not be
//! able to use up the ID space); the largest key up to that limit is.
//!
//! ## `snowflake_raise_floor(id bigint) → timestamptz`
//!
//! Superuser only. Every later ID of this server is above `id` (it carries
//! a later millisecond). Returns that millisecond. For keys minted
//! elsewhere under this server's worker id, or anything the automatic
//! check cannot see.
//!
//! ```sql
//! SELECT snowflake_raise_floor(7400000000000000000);
//! ```
//!
//! ## `snowflake_raise_floor_from_data() → TABLE(relation text, column_name text, largest_id bigint, beyond_limit boolean)`
//!
//! Superuser only. What each database's first call does, now, for this
//! database: one row per key column, with its largest value up to the
//! limit and whether it holds values beyond it; the generator is raised
//! above the largest. Part of the restore and merge procedures
//! (docs/operations.md).
//!
//! ```sql
//! SELECT * FROM snowflake_raise_floor_from_data();
//! ```

use crate::{as_owner, decode, errors, shmem};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use snowflake_id_core::{format_epoch, Clock, GeneratorState, Layout, SystemClock};
use std::sync::atomic::{AtomicBool, Ordering};

/// IDs further ahead of this server's clock than this are not a floor.
pub const FUTURE_LIMIT_MS: i64 = 86_400_000;

const COLUMNS_SQL: &str = include_str!("sql/floor_columns.sql");
const CITUS_TABLES_SQL: &str = include_str!("sql/floor_citus_tables.sql");

/// Set once this backend's database raised the floor (or was found to
/// have): the hot path checks one process-local flag.
static CHECKED: AtomicBool = AtomicBool::new(false);

/// Before this backend's first ID: make sure its database's keys raised
/// the floor since start-up.
#[inline(always)]
pub fn ensure_checked(state: &GeneratorState, layout: &Layout) {
    if !CHECKED.load(Ordering::Relaxed) {
        first_use(state, layout);
    }
}

#[cold]
#[inline(never)]
fn first_use(state: &GeneratorState, layout: &Layout) {
    // SAFETY: reading this backend's globals.
    let (db, parallel) = unsafe { (pg_sys::MyDatabaseId, pg_sys::ParallelWorkerNumber >= 0) };
    if parallel {
        // A parallel worker cannot run queries of its own; its leader
        // checks when it mints.
        return;
    }
    let Some(t) = shmem::tracking() else { return };
    let db = db.to_u32();
    if t.floored.iter().any(|s| s.load(Ordering::Acquire) == db) {
        CHECKED.store(true, Ordering::Relaxed);
        return;
    }
    let found = scan(layout);
    raise(state, layout, &found);
    remember(t, db);
    CHECKED.store(true, Ordering::Relaxed);
}

/// Mark `db` as floored in a free slot (none left: every backend of it
/// checks once; correct, just slower).
fn remember(t: &shmem::Tracking, db: u32) {
    for slot in &t.floored {
        match slot.compare_exchange(0, db, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(v) if v == db => return,
            Err(_) => {}
        }
    }
}

/// One key column's findings.
struct Found {
    relation: String,
    column: String,
    largest: Option<i64>,
    beyond_limit: bool,
}

/// The key columns of this database, read as the bootstrap superuser in a
/// security-restricted operation (the caller may not read other roles'
/// tables; no user code runs in `max()` over a bigint index).
fn scan(layout: &Layout) -> Vec<Found> {
    let now_ms = SystemClock.wall_ns().div_euclid(1_000_000);
    let limit_ms = now_ms
        .saturating_add(FUTURE_LIMIT_MS)
        .min(layout.last_unix_ms());
    let limit_id = layout.max_id(limit_ms).unwrap_or(i64::MAX);
    as_owner::with_role(pg_sys::BOOTSTRAP_SUPERUSERID.into(), || {
        Spi::connect(|client| {
            let mut citus_tables = vec![];
            // SAFETY: a catalog lookup by name; missing_ok.
            if unsafe { pg_sys::get_extension_oid(c"citus".as_ptr(), true) } != pg_sys::InvalidOid {
                for row in client.select(CITUS_TABLES_SQL, None, &[])? {
                    citus_tables.extend(row.get::<pg_sys::Oid>(1)?);
                }
            }
            let cols = client.select(COLUMNS_SQL, None, &[])?;
            let mut out = vec![];
            for row in cols {
                let relid: Option<pg_sys::Oid> = row.get(5)?;
                if relid.is_some_and(|r| citus_tables.contains(&r)) {
                    continue;
                }
                let relation: String = row.get(1)?.unwrap_or_default();
                let column: String = row.get(2)?.unwrap_or_default();
                let max_q: String = row.get(3)?.unwrap_or_default();
                let beyond_q: String = row.get(4)?.unwrap_or_default();
                let largest = client
                    .select(&max_q, None, &[limit_id.into()])?
                    .first()
                    .get_one::<i64>()?;
                let beyond_limit = client
                    .select(&beyond_q, None, &[limit_id.into()])?
                    .first()
                    .get_one::<bool>()?
                    .unwrap_or(false);
                out.push(Found {
                    relation,
                    column,
                    largest,
                    beyond_limit,
                });
            }
            Ok::<_, pgrx::spi::Error>(out)
        })
        .unwrap_or_else(|e| errors::spi_failed("snowflake_id's floor check", e))
    })
}

/// Raise the generator above the largest key found; log what was found
/// beyond the limit. Returns the Unix ms raised above, if any.
fn raise(state: &GeneratorState, layout: &Layout, found: &[Found]) -> Option<i64> {
    for f in found.iter().filter(|f| f.beyond_limit) {
        errors::report(
            PgLogLevel::WARNING,
            PgSqlErrorCode::ERRCODE_WARNING,
            format!(
                "snowflake_id: column {} of {} holds IDs more than a day ahead of this server's clock",
                f.column, f.relation
            ),
            Some("They were not taken as a floor for new IDs: the largest ID up to a day ahead was.".into()),
            Some("If this server minted them, raise the floor with SELECT snowflake_raise_floor(id) as a superuser."),
        );
    }
    let largest = found.iter().filter_map(|f| f.largest).max()?;
    let ms = layout.epoch_ms() + layout.timestamp_of(largest as u64) as i64;
    state.raise_above(ms, layout, SystemClock.mono_ns());
    Some(ms)
}

fn superuser_generator() -> (&'static GeneratorState, Layout) {
    // SAFETY: plain catalog check of the current user.
    if !unsafe { pg_sys::superuser() } {
        errors::not_superuser();
    }
    let Some(st) = shmem::state() else {
        errors::not_preloaded();
    };
    if shmem::in_recovery() {
        errors::in_recovery();
    }
    (st, decode::layout())
}

/// Raise the floor above `id`: see the module documentation.
#[pg_extern(volatile, strict, parallel_unsafe)]
pub fn snowflake_raise_floor(id: i64) -> TimestampWithTimeZone {
    let (st, layout) = superuser_generator();
    if id < 0 {
        errors::id_error(snowflake_id_core::IdError::NegativeId(id));
    }
    let ms = layout.epoch_ms() + layout.timestamp_of(id as u64) as i64;
    st.raise_above(ms, &layout, SystemClock.mono_ns());
    errors::report(
        PgLogLevel::LOG,
        PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
        format!(
            "snowflake_id: floor raised above {id} ({}) by a superuser",
            format_epoch(ms)
        ),
        None,
        None,
    );
    decode::from_unix_ms(ms)
}

/// Raise the floor above this database's keys: see the module
/// documentation.
#[pg_extern(volatile, parallel_unsafe)]
pub fn snowflake_raise_floor_from_data() -> TableIterator<
    'static,
    (
        name!(relation, String),
        name!(column_name, String),
        name!(largest_id, Option<i64>),
        name!(beyond_limit, bool),
    ),
> {
    let (st, layout) = superuser_generator();
    let (found, _) = raise_found_here(st, &layout);
    TableIterator::new(
        found
            .into_iter()
            .map(|f| (f.relation, f.column, f.largest, f.beyond_limit)),
    )
}

/// Raise the floor above this database's keys now, and remember that it
/// did. Returns the Unix ms raised above, if any key was found. Used by
/// `snowflake_accept_configuration()`.
pub fn raise_here(state: &GeneratorState, layout: &Layout) -> Option<i64> {
    raise_found_here(state, layout).1
}

fn raise_found_here(state: &GeneratorState, layout: &Layout) -> (Vec<Found>, Option<i64>) {
    let found = scan(layout);
    let ms = raise(state, layout, &found);
    if let Some(t) = shmem::tracking() {
        // SAFETY: reading this backend's database.
        remember(t, unsafe { pg_sys::MyDatabaseId }.to_u32());
    }
    (found, ms)
}
