//! Decoding IDs minted elsewhere (Twitter, Discord, Instagram, pgEdge, or
//! any layout given explicitly), and range bounds for an explicit layout.
//!
//! The variants that take the layout as explicit arguments depend on
//! nothing but their arguments, so they are IMMUTABLE: postgres_fdw ships
//! them to remote servers (when `snowflake_id` is listed in the foreign
//! server's `extensions` option), and they may appear in index expressions
//! and generated columns. The preset-name variant is STABLE, because the
//! `default` preset is this server's configured layout.

use crate::decode::{self, finite_unix_ms, from_unix_ms, to_unix_ms};
use crate::errors;
use pgrx::prelude::*;
use snowflake_id_core::{FieldOrder, Format};

type Decoded = TableIterator<
    'static,
    (
        name!(ts, TimestampWithTimeZone),
        name!(worker_id, i32),
        name!(sequence, i32),
    ),
>;

fn decoded(format: Format, id: i64) -> Decoded {
    let p = format.decode(id).unwrap_or_else(|e| errors::id_error(e));
    TableIterator::once((from_unix_ms(p.unix_ms), p.worker as i32, p.sequence as i32))
}

fn explicit(
    epoch: TimestampWithTimeZone,
    timestamp_bits: i32,
    worker_bits: i32,
    sequence_bits: i32,
) -> Format {
    Format::new(
        finite_unix_ms(epoch, "epoch"),
        timestamp_bits.into(),
        worker_bits.into(),
        sequence_bits.into(),
        FieldOrder::WorkerThenSequence,
    )
    .unwrap_or_else(|e| errors::invalid_format(&e))
}

/// Decodes an ID minted by another system, named by a preset:
///
/// | layout | epoch | bits (time/worker/sequence) |
/// |---|---|---|
/// | `twitter` | 2010-11-04 01:42:54.657 UTC | 41 / 5+5 / 12 |
/// | `discord` | 2015-01-01 UTC | 42 / 5+5 / 12 |
/// | `instagram` | 2011-08-24 21:07:01.721 UTC | 41 / 13 / 10 |
/// | `pgedge` | 2023-01-01 UTC | 41 / 10 / 12, node in the low bits |
/// | `default` | this server's `snowflake_id.*` layout | |
///
/// `worker_id` is the whole worker field: for Twitter and Discord,
/// `worker_id >> 5` is the datacenter (Discord: worker) and `worker_id & 31`
/// the machine (Discord: process); for Instagram it is the logical shard;
/// for pgEdge the node, and `sequence` its counter. STABLE, because
/// `default` follows the server's configuration.
///
/// ```sql
/// SELECT * FROM snowflake_decode(175928847299117063, 'discord');
/// --             ts              | worker_id | sequence
/// -- 2016-04-30 11:18:25.796+00  |        32 |        7
/// ```
#[pg_extern(stable, strict, parallel_safe, name = "snowflake_decode")]
pub fn snowflake_decode_layout(
    id: i64,
    layout: &str,
) -> TableIterator<
    'static,
    (
        name!(ts, TimestampWithTimeZone),
        name!(worker_id, i32),
        name!(sequence, i32),
    ),
> {
    let format = if layout.trim().eq_ignore_ascii_case("default") {
        Format::from(decode::layout())
    } else {
        Format::preset(layout).unwrap_or_else(|e| errors::invalid_format(&e))
    };
    decoded(format, id)
}

/// Decodes an ID of any time|worker|sequence layout given explicitly:
/// the epoch and the widths of the three fields (at most 64 bits in all;
/// with all 64 in use, a negative `bigint` is read as its unsigned bit
/// pattern). The worker and sequence fields come back as `integer`, so
/// each may be at most 31 bits wide; a wider one is an error (22023).
/// IMMUTABLE.
///
/// ```sql
/// -- Twitter's layout, spelled out:
/// SELECT * FROM snowflake_decode(1763287703813013644,
///                                to_timestamp(1288834974.657), 41, 10, 12);
/// ```
#[pg_extern(immutable, strict, parallel_safe, name = "snowflake_decode")]
pub fn snowflake_decode_explicit(
    id: i64,
    epoch: TimestampWithTimeZone,
    timestamp_bits: i32,
    worker_bits: i32,
    sequence_bits: i32,
) -> TableIterator<
    'static,
    (
        name!(ts, TimestampWithTimeZone),
        name!(worker_id, i32),
        name!(sequence, i32),
    ),
> {
    let format = explicit(epoch, timestamp_bits, worker_bits, sequence_bits);
    format
        .check_fields_fit_integer()
        .unwrap_or_else(|e| errors::invalid_format(&e));
    decoded(format, id)
}

/// The smallest ID of any worker in the millisecond of `ts`, for a layout
/// given explicitly. IMMUTABLE, so postgres_fdw can push
/// `id >= snowflake_min_id(...)` down to the shards.
///
/// ```sql
/// SELECT count(*) FROM all_orders
///  WHERE id >= snowflake_min_id('2026-11-21 10:00+00', '2024-01-01+00', 41, 10, 12)
///    AND id <= snowflake_max_id('2026-11-21 10:59:59.999+00', '2024-01-01+00', 41, 10, 12);
/// ```
#[pg_extern(immutable, strict, parallel_safe, name = "snowflake_min_id")]
pub fn snowflake_min_id_explicit(
    ts: TimestampWithTimeZone,
    epoch: TimestampWithTimeZone,
    timestamp_bits: i32,
    worker_bits: i32,
    sequence_bits: i32,
) -> i64 {
    explicit(epoch, timestamp_bits, worker_bits, sequence_bits)
        .min_id(to_unix_ms(ts))
        .unwrap_or_else(|e| errors::id_error(e))
}

/// The largest ID of any worker in the millisecond of `ts`, for a layout
/// given explicitly. IMMUTABLE.
///
/// ```sql
/// SELECT snowflake_max_id('2026-11-21 10:59:59.999+00', '2024-01-01+00', 41, 10, 12);
/// ```
#[pg_extern(immutable, strict, parallel_safe, name = "snowflake_max_id")]
pub fn snowflake_max_id_explicit(
    ts: TimestampWithTimeZone,
    epoch: TimestampWithTimeZone,
    timestamp_bits: i32,
    worker_bits: i32,
    sequence_bits: i32,
) -> i64 {
    explicit(epoch, timestamp_bits, worker_bits, sequence_bits)
        .max_id(to_unix_ms(ts))
        .unwrap_or_else(|e| errors::id_error(e))
}
