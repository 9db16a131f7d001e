//! Decoding, composing and range-bound functions for this server's layout.
//!
//! All of them are STABLE, STRICT and PARALLEL SAFE. They read the layout
//! parameters (`snowflake_id.epoch`, `worker_bits`, `sequence_bits`), which
//! are fixed while the server runs but may be changed across a restart, so
//! they are deliberately *not* IMMUTABLE: an IMMUTABLE marking would let an
//! expression index, a generated column or a cached plan keep answers
//! computed under an old layout. STABLE is enough for
//! `WHERE id BETWEEN snowflake_min_id(t1) AND snowflake_max_id(t2)` to be an
//! index range scan: the bounds are computed once when the scan starts.
//!
//! None of them needs shared memory: they work on servers that do not
//! preload the library, such as reporting replicas.

use crate::{errors, gucs};
use pgrx::prelude::*;
use snowflake_id_core::{Layout, Parts};

/// 2000-01-01 00:00:00 UTC (PostgreSQL's timestamp origin) in Unix ms.
const PG_EPOCH_UNIX_MS: i64 = 946_684_800_000;

/// A timestamptz as Unix milliseconds, rounding down to the millisecond.
/// `-infinity` and `infinity` become `i64::MIN` and `i64::MAX`: before and
/// after every layout, so that they fail with the layout's range.
pub(crate) fn to_unix_ms(ts: TimestampWithTimeZone) -> i64 {
    if !ts.is_finite() {
        return if ts.is_neg_infinity() {
            i64::MIN
        } else {
            i64::MAX
        };
    }
    let micros: i64 = ts.into();
    micros.div_euclid(1000) + PG_EPOCH_UNIX_MS
}

/// A finite timestamptz as Unix milliseconds, or the ERROR naming `what`.
pub(crate) fn finite_unix_ms(ts: TimestampWithTimeZone, what: &str) -> i64 {
    if !ts.is_finite() {
        errors::timestamp_out_of_range(what);
    }
    to_unix_ms(ts)
}

/// Unix milliseconds as a finite timestamptz, if PostgreSQL can hold it.
pub(crate) fn unix_ms_to_timestamptz(ms: i64) -> Option<TimestampWithTimeZone> {
    (ms - PG_EPOCH_UNIX_MS)
        .checked_mul(1000)
        .and_then(|us| TimestampWithTimeZone::try_from(us).ok())
        .filter(|ts| ts.is_finite())
}

pub(crate) fn from_unix_ms(ms: i64) -> TimestampWithTimeZone {
    unix_ms_to_timestamptz(ms)
        .unwrap_or_else(|| errors::timestamp_out_of_range("snowflake timestamp"))
}

fn parts(id: i64) -> Parts {
    layout().decode(id).unwrap_or_else(|e| errors::id_error(e))
}

/// This server's layout, or the ERROR (22023) that says what is wrong with
/// its settings. The one way the SQL functions get the layout; on a
/// preloading server it is one load (the hot path of `snowflake_nextval()`).
#[inline(always)]
pub(crate) fn layout() -> Layout {
    gucs::layout_or(errors::invalid_layout)
}

/// Splits an ID into its timestamp, worker id and sequence number.
///
/// ```sql
/// SELECT * FROM snowflake_decode(snowflake_nextval());
/// SELECT o.id, d.ts, d.worker_id FROM orders o, snowflake_decode(o.id) d;
/// ```
#[pg_extern(stable, strict, parallel_safe)]
pub fn snowflake_decode(
    id: i64,
) -> TableIterator<
    'static,
    (
        name!(ts, TimestampWithTimeZone),
        name!(worker_id, i32),
        name!(sequence, i32),
    ),
> {
    let p = parts(id);
    TableIterator::once((from_unix_ms(p.unix_ms), p.worker as i32, p.sequence as i32))
}

/// The time an ID was minted, to the millisecond.
///
/// ```sql
/// SELECT snowflake_timestamp(id) FROM orders ORDER BY id DESC LIMIT 10;
/// ```
#[pg_extern(stable, strict, parallel_safe)]
pub fn snowflake_timestamp(id: i64) -> TimestampWithTimeZone {
    from_unix_ms(parts(id).unix_ms)
}

/// The worker id (server) that minted an ID.
///
/// ```sql
/// SELECT snowflake_worker_id(id) AS worker, count(*) FROM orders GROUP BY 1;
/// ```
#[pg_extern(stable, strict, parallel_safe)]
pub fn snowflake_worker_id(id: i64) -> i32 {
    parts(id).worker as i32
}

/// The sequence number of an ID within its millisecond.
///
/// ```sql
/// SELECT snowflake_sequence(id) FROM orders LIMIT 5;
/// ```
#[pg_extern(stable, strict, parallel_safe)]
pub fn snowflake_sequence(id: i64) -> i32 {
    parts(id).sequence as i32
}

/// Builds an ID from its parts; the inverse of `snowflake_decode`. The
/// timestamp is truncated to the millisecond. Useful for back-fills and
/// for tests.
///
/// ```sql
/// SELECT snowflake_compose('2025-01-01 12:00:00+00', 7, 0);
/// SELECT snowflake_compose(d.ts, d.worker_id, d.sequence) = 123456789
///   FROM snowflake_decode(123456789) d;
/// ```
#[pg_extern(stable, strict, parallel_safe)]
pub fn snowflake_compose(ts: TimestampWithTimeZone, worker_id: i32, sequence: i32) -> i64 {
    layout()
        .compose(to_unix_ms(ts), worker_id as i64, sequence as i64)
        .unwrap_or_else(|e| errors::id_error(e))
}

/// The smallest ID any worker could mint in the millisecond of `ts`.
///
/// ```sql
/// SELECT * FROM orders
///  WHERE id BETWEEN snowflake_min_id('2025-01-01 00:00+00')
///               AND snowflake_max_id('2025-01-01 23:59:59.999+00');
/// ```
#[pg_extern(stable, strict, parallel_safe)]
pub fn snowflake_min_id(ts: TimestampWithTimeZone) -> i64 {
    layout()
        .min_id(to_unix_ms(ts))
        .unwrap_or_else(|e| errors::id_error(e))
}

/// The largest ID any worker could mint in the millisecond of `ts`.
///
/// ```sql
/// SELECT count(*) FROM orders
///  WHERE id >= snowflake_min_id(now() - interval '1 hour')
///    AND id <= snowflake_max_id(now());
/// ```
#[pg_extern(stable, strict, parallel_safe)]
pub fn snowflake_max_id(ts: TimestampWithTimeZone) -> i64 {
    layout()
        .max_id(to_unix_ms(ts))
        .unwrap_or_else(|e| errors::id_error(e))
}
