//! The online conversion: `CALL snowflake_convert_online(tbl, col)`, for
//! tables too big to rewrite under an ACCESS EXCLUSIVE lock.
//!
//! It reaches the result of `snowflake_convert_column()` (a `bigint` key
//! with `DEFAULT snowflake_nextval()`, its foreign-key columns widened)
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
//!    old names, copy column comments and grants, `SET DEFAULT
//!    snowflake_nextval()`, and check that existing values are below the
//!    next ID.
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

use pgrx::prelude::*;

extension_sql_file!(
    "sql/convert_online.sql",
    name = "convert_online",
    requires = ["convert_column"]
);
