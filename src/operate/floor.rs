//! Raising the floor by hand: for IDs minted elsewhere under this
//! server's worker id (merged in from another server or a restore), which
//! the high-water mark (`crate::mint::high_water`) cannot know. Nothing here
//! runs on its own: no `snowflake_nextval()`, acceptance or conversion
//! reads user tables. Keys a role stores are hers to choose and never
//! move the server by themselves (docs/security.md).
//!
//! ## `snowflake_raise_floor(id bigint) → timestamptz`
//!
//! Superuser only. Every later ID of this server is above `id` (it carries
//! a later millisecond). Returns that millisecond.
//!
//! ```sql
//! SELECT snowflake_raise_floor(7400000000000000000);
//! ```
//!
//! ## `snowflake_raise_floor_from_data(apply boolean DEFAULT false) → TABLE(relation text, column_name text, owner text, largest_id bigint, beyond_limit boolean, error text)`
//!
//! Superuser only. Reads the largest key of every column of this database
//! whose default is `snowflake_nextval()` and that leads an index, one row
//! per column: its owner, its largest value up to [`APPLY_LIMIT_MS`]
//! (10 minutes) ahead of this server's clock, whether it holds values
//! beyond that, and the error that kept it from being read. Each table is
//! read **as its owner**, in a security-restricted operation with
//! `search_path` pinned (as ANALYZE and REINDEX run an owner's code), in a
//! subtransaction of its own with a 1 s `lock_timeout`; other sessions'
//! temporary tables are left out. Applies nothing unless `apply`; then it
//! raises the floor above the largest value read (never beyond the
//! limit: a larger key needs `snowflake_raise_floor(id)` by name, so that
//! a superuser sees whose data would move the server).
//!
//! ```sql
//! SELECT * FROM snowflake_raise_floor_from_data();
//! SELECT * FROM snowflake_raise_floor_from_data(apply => true);
//! ```

use crate::convert::as_owner;
use crate::mint::shmem;
use crate::read::decode;
use crate::{errors, gucs};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use snowflake_id_core::{format_epoch, Clock, GeneratorState, Layout, SystemClock};

/// `apply` raises the floor at most this far ahead of the clock.
pub const APPLY_LIMIT_MS: i64 = 600_000;

const COLUMNS_SQL: &str = include_str!("sql/floor_columns.sql");
const CITUS_TABLES_SQL: &str = include_str!("sql/floor_citus_tables.sql");

/// One key column's findings.
struct Found {
    relation: String,
    column: String,
    owner: String,
    largest: Option<i64>,
    beyond_limit: bool,
    error: Option<String>,
}

/// A key column to read, from `floor_columns.sql`.
struct Column {
    relation: String,
    column: String,
    owner: pg_sys::Oid,
    owner_name: String,
    max_q: String,
    beyond_q: String,
}

/// The key columns of this database (catalog reads only, as the caller).
fn columns() -> Vec<Column> {
    Spi::connect(|client| {
        let mut citus_tables = vec![];
        // SAFETY: a catalog lookup by name; missing_ok.
        if unsafe { pg_sys::get_extension_oid(c"citus".as_ptr(), true) } != pg_sys::InvalidOid {
            for row in client.select(CITUS_TABLES_SQL, None, &[])? {
                citus_tables.extend(row.get::<pg_sys::Oid>(1)?);
            }
        }
        let mut out = vec![];
        for row in client.select(COLUMNS_SQL, None, &[])? {
            let relid: Option<pg_sys::Oid> = row.get(5)?;
            if relid.is_some_and(|r| citus_tables.contains(&r)) {
                continue;
            }
            out.push(Column {
                relation: row.get(1)?.unwrap_or_default(),
                column: row.get(2)?.unwrap_or_default(),
                max_q: row.get(3)?.unwrap_or_default(),
                beyond_q: row.get(4)?.unwrap_or_default(),
                owner: row.get(6)?.unwrap_or(pg_sys::InvalidOid),
                owner_name: row.get(7)?.unwrap_or_default(),
            });
        }
        Ok::<_, pgrx::spi::Error>(out)
    })
    .unwrap_or_else(|e| errors::spi_failed("snowflake_raise_floor_from_data", e))
}

/// Read one column as its owner, in a subtransaction: its largest value
/// up to `limit_id`, and whether it holds values beyond, or the error.
fn read_as_owner(col: &Column, limit_id: i64) -> Result<(Option<i64>, bool), String> {
    // SAFETY: the subtransaction pattern of PL/pgSQL's exception blocks:
    // begin, run, release or roll back, restoring the memory context and
    // resource owner either way. An ERROR inside is caught here; the
    // abort restores the user id, security context and GUC nest level
    // that `as_owner::with_role` set.
    unsafe {
        let context = pg_sys::CurrentMemoryContext;
        let owner = pg_sys::CurrentResourceOwner;
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        pg_sys::MemoryContextSwitchTo(context);
        PgTryBuilder::new(|| {
            let r = as_owner::with_role(col.owner, || {
                let nest = gucs::push_setting(c"lock_timeout", c"1s", false);
                let r = Spi::connect(|client| {
                    let largest = client
                        .select(&col.max_q, None, &[limit_id.into()])?
                        .first()
                        .get_one::<i64>()?;
                    let beyond = client
                        .select(&col.beyond_q, None, &[limit_id.into()])?
                        .first()
                        .get_one::<bool>()?
                        .unwrap_or(false);
                    Ok::<_, pgrx::spi::Error>((largest, beyond))
                });
                gucs::pop_settings(nest);
                r
            });
            pg_sys::ReleaseCurrentSubTransaction();
            pg_sys::MemoryContextSwitchTo(context);
            pg_sys::CurrentResourceOwner = owner;
            r.map_err(|e| e.to_string())
        })
        .catch_others(|e| {
            pg_sys::MemoryContextSwitchTo(context);
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
            pg_sys::MemoryContextSwitchTo(context);
            pg_sys::CurrentResourceOwner = owner;
            Err(match e {
                pgrx::pg_sys::panic::CaughtError::PostgresError(r)
                | pgrx::pg_sys::panic::CaughtError::ErrorReport(r) => r.message().to_string(),
                pgrx::pg_sys::panic::CaughtError::RustPanic { ereport, .. } => {
                    ereport.message().to_string()
                }
            })
        })
        .execute()
    }
}

/// Read every key column as its owner; see the module documentation.
fn scan(layout: &Layout) -> Vec<Found> {
    let now_ms = SystemClock.wall_ns().div_euclid(1_000_000);
    let limit_ms = now_ms
        .saturating_add(APPLY_LIMIT_MS)
        .min(layout.last_unix_ms());
    let limit_id = layout.max_id(limit_ms).unwrap_or(i64::MAX);
    columns()
        .into_iter()
        .map(|col| {
            let (largest, beyond_limit, error) = match read_as_owner(&col, limit_id) {
                Ok((l, b)) => (l, b, None),
                Err(e) => (None, false, Some(e)),
            };
            Found {
                relation: col.relation,
                column: col.column,
                owner: col.owner_name,
                largest,
                beyond_limit,
                error,
            }
        })
        .collect()
}

/// Raise the generator above the largest key found. Returns the Unix ms
/// raised above, if any.
fn raise(state: &GeneratorState, layout: &Layout, found: &[Found]) -> Option<i64> {
    let largest = found.iter().filter_map(|f| f.largest).max()?;
    let ms = layout.epoch_ms() + layout.timestamp_of(largest as u64) as i64;
    state.raise_above(ms, layout, SystemClock.mono_ns());
    errors::report(
        PgLogLevel::LOG,
        PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
        format!(
            "snowflake_id: floor raised above {largest} ({}) from this database's keys by a superuser",
            format_epoch(ms)
        ),
        None,
        None,
    );
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

/// Read (and with `apply`, raise the floor above) this database's keys:
/// see the module documentation.
#[pg_extern(volatile, parallel_unsafe)]
#[allow(clippy::type_complexity)]
pub fn snowflake_raise_floor_from_data(
    apply: default!(bool, false),
) -> TableIterator<
    'static,
    (
        name!(relation, String),
        name!(column_name, String),
        name!(owner, String),
        name!(largest_id, Option<i64>),
        name!(beyond_limit, bool),
        name!(error, Option<String>),
    ),
> {
    let (st, layout) = superuser_generator();
    let found = scan(&layout);
    if apply {
        raise(st, &layout, &found);
    }
    TableIterator::new(found.into_iter().map(|f| {
        (
            f.relation,
            f.column,
            f.owner,
            f.largest,
            f.beyond_limit,
            f.error,
        )
    }))
}
