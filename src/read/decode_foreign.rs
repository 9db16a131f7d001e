//! Decoding IDs minted elsewhere (Twitter, Discord, Instagram, pgEdge,
//! Sonyflake, Baidu's uid-generator, Mastodon, Seata, or any layout
//! described explicitly), with range bounds and composition for the same
//! layouts.
//!
//! An explicit description is the epoch and the widths of the three
//! fields, and optionally (the seven-argument forms) the time unit, an
//! `interval` of whole milliseconds, and the field order from the high
//! bits: `'time,worker,sequence'`, `'time,sequence,worker'` or
//! `'worker,time,sequence'`. Those variants depend on nothing but their
//! arguments, so they are IMMUTABLE: postgres_fdw ships them to remote
//! servers (when `snowflake_id` is listed in the foreign server's
//! `extensions` option), and they may appear in index expressions and
//! generated columns. The preset-name variants are STABLE, because the
//! `default` preset is this server's configured layout.

use crate::errors;
use crate::read::decode::{self, finite_unix_ms, from_unix_ms, to_unix_ms};
use pgrx::prelude::*;
use snowflake_id_core::{FieldOrder, Format, FormatError, MAX_UNIT_MS};

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

/// The explicit description of the seven-argument forms.
fn described(
    epoch: TimestampWithTimeZone,
    timestamp_bits: i32,
    worker_bits: i32,
    sequence_bits: i32,
    time_unit: Interval,
    field_order: &str,
) -> Format {
    let order = FieldOrder::parse(field_order).unwrap_or_else(|e| errors::invalid_format(&e));
    Format::with_unit(
        finite_unix_ms(epoch, "epoch"),
        unit_ms(time_unit),
        timestamp_bits.into(),
        worker_bits.into(),
        sequence_bits.into(),
        order,
    )
    .unwrap_or_else(|e| errors::invalid_format(&e))
}

/// A time unit as whole milliseconds: no months (whose length varies), a
/// day counts 24 hours, and nothing below a millisecond.
fn unit_ms(unit: Interval) -> i64 {
    let micros = i128::from(unit.days()) * 86_400_000_000 + i128::from(unit.micros());
    if unit.months() != 0
        || micros <= 0
        || micros % 1000 != 0
        || micros / 1000 > MAX_UNIT_MS as i128
    {
        // SAFETY: interval_out on a valid interval datum.
        let text = unsafe {
            pgrx::direct_function_call::<&std::ffi::CStr>(
                pgrx::pg_sys::interval_out,
                &[unit.into_datum()],
            )
        }
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default();
        errors::invalid_format(&FormatError::TimeUnit(format!("\"{text}\"")));
    }
    (micros / 1000) as i64
}

/// A preset by name, `default` being this server's layout.
fn named(layout: &str) -> Format {
    if layout.trim().eq_ignore_ascii_case("default") {
        Format::from(decode::layout())
    } else {
        Format::preset(layout).unwrap_or_else(|e| errors::invalid_format(&e))
    }
}

/// Decodes an ID minted by another system, named by a preset:
///
/// | layout | epoch | unit | fields, high to low (bits) |
/// |---|---|---|---|
/// | `twitter` | 2010-11-04 01:42:54.657 UTC | 1 ms | time 41, worker 5+5, sequence 12 |
/// | `discord` | 2015-01-01 UTC | 1 ms | time 42, worker 5+5, sequence 12 |
/// | `instagram` | 2011-08-24 21:07:01.721 UTC | 1 ms | time 41, shard 13, sequence 10 |
/// | `pgedge` | 2023-01-01 UTC | 1 ms | time 41, sequence 12, node 10 |
/// | `sonyflake` | 2014-09-01 UTC | 10 ms | time 39, sequence 8, machine 16 |
/// | `baidu` | 2016-05-20 +08 | 1 s | time 28, worker 22, sequence 13 |
/// | `mastodon` | 1970-01-01 UTC | 1 ms | time 48, sequence 16 |
/// | `seata` | 2020-05-03 +08 | 1 ms | worker 10, time 41, sequence 12 |
/// | `default` | this server's `snowflake_id.*` layout | | |
///
/// `worker_id` is the whole worker field: for Twitter and Discord,
/// `worker_id >> 5` is the datacenter (Discord: worker) and `worker_id & 31`
/// the machine (Discord: process); for Instagram it is the logical shard;
/// for pgEdge the node, and `sequence` its counter; for Sonyflake the
/// machine; for Mastodon 0. `ts` is the start of the tick. Twitter IDs up
/// to 29700859247 are its sequential status IDs from before Snowflake, with
/// no timestamp: 22008. STABLE, because `default` follows the server's
/// configuration.
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
    decoded(named(layout), id)
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

/// Decodes an ID of any layout described explicitly: the epoch, the widths
/// of the three fields, the time unit (an interval of whole milliseconds,
/// from 1 ms to 1 day) and the field order from the high bits
/// (`'time,worker,sequence'`, `'time,sequence,worker'` or
/// `'worker,time,sequence'`). `ts` is the start of the tick. IMMUTABLE.
///
/// ```sql
/// -- Sonyflake, spelled out: 10 ms ticks since 2014-09-01, then the
/// -- sequence, then the machine.
/// SELECT * FROM snowflake_decode(647537407536736891, '2014-09-01+00', 39, 16, 8,
///                                '10 ms', 'time,sequence,worker');
/// --             ts              | worker_id | sequence
/// -- 2026-11-24 03:46:11.55+00   |     10875 |        1
/// ```
#[pg_extern(immutable, strict, parallel_safe, name = "snowflake_decode")]
pub fn snowflake_decode_described(
    id: i64,
    epoch: TimestampWithTimeZone,
    timestamp_bits: i32,
    worker_bits: i32,
    sequence_bits: i32,
    time_unit: Interval,
    field_order: &str,
) -> TableIterator<
    'static,
    (
        name!(ts, TimestampWithTimeZone),
        name!(worker_id, i32),
        name!(sequence, i32),
    ),
> {
    let format = described(
        epoch,
        timestamp_bits,
        worker_bits,
        sequence_bits,
        time_unit,
        field_order,
    );
    format
        .check_fields_fit_integer()
        .unwrap_or_else(|e| errors::invalid_format(&e));
    decoded(format, id)
}

/// The smallest ID of any worker in the tick of `ts`, for a layout named by
/// a preset. STABLE (as `snowflake_decode(id, layout)`), which is enough for
/// an index range scan. Refused for `seata`, whose IDs do not sort by time
/// (22023).
///
/// ```sql
/// SELECT count(*) FROM discord_messages
///  WHERE id BETWEEN snowflake_min_id('2026-11-21 10:00+00', 'discord')
///               AND snowflake_max_id('2026-11-21 10:59:59.999+00', 'discord');
/// ```
#[pg_extern(stable, strict, parallel_safe, name = "snowflake_min_id")]
pub fn snowflake_min_id_layout(ts: TimestampWithTimeZone, layout: &str) -> i64 {
    named(layout)
        .min_id(to_unix_ms(ts))
        .unwrap_or_else(|e| errors::id_error(e))
}

/// The largest ID of any worker in the tick of `ts`, for a layout named by
/// a preset. STABLE.
///
/// ```sql
/// SELECT snowflake_max_id('2026-11-21 10:59:59.999+00', 'sonyflake');
/// ```
#[pg_extern(stable, strict, parallel_safe, name = "snowflake_max_id")]
pub fn snowflake_max_id_layout(ts: TimestampWithTimeZone, layout: &str) -> i64 {
    named(layout)
        .max_id(to_unix_ms(ts))
        .unwrap_or_else(|e| errors::id_error(e))
}

/// The smallest ID of any worker in the tick of `ts`, for a layout
/// described explicitly with its time unit and field order. IMMUTABLE.
///
/// ```sql
/// SELECT snowflake_min_id('2026-11-21 10:00+00', '2014-09-01+00', 39, 16, 8,
///                         '10 ms', 'time,sequence,worker');
/// ```
#[pg_extern(immutable, strict, parallel_safe, name = "snowflake_min_id")]
pub fn snowflake_min_id_described(
    ts: TimestampWithTimeZone,
    epoch: TimestampWithTimeZone,
    timestamp_bits: i32,
    worker_bits: i32,
    sequence_bits: i32,
    time_unit: Interval,
    field_order: &str,
) -> i64 {
    described(
        epoch,
        timestamp_bits,
        worker_bits,
        sequence_bits,
        time_unit,
        field_order,
    )
    .min_id(to_unix_ms(ts))
    .unwrap_or_else(|e| errors::id_error(e))
}

/// The largest ID of any worker in the tick of `ts`, for a layout
/// described explicitly with its time unit and field order. IMMUTABLE.
///
/// ```sql
/// SELECT snowflake_max_id('2026-11-21 10:59:59.999+00', '2014-09-01+00', 39, 16, 8,
///                         '10 ms', 'time,sequence,worker');
/// ```
#[pg_extern(immutable, strict, parallel_safe, name = "snowflake_max_id")]
pub fn snowflake_max_id_described(
    ts: TimestampWithTimeZone,
    epoch: TimestampWithTimeZone,
    timestamp_bits: i32,
    worker_bits: i32,
    sequence_bits: i32,
    time_unit: Interval,
    field_order: &str,
) -> i64 {
    described(
        epoch,
        timestamp_bits,
        worker_bits,
        sequence_bits,
        time_unit,
        field_order,
    )
    .max_id(to_unix_ms(ts))
    .unwrap_or_else(|e| errors::id_error(e))
}

/// The ID a system using a preset layout would give these fields, in the
/// tick of `ts`: test data, or keys re-made from another system's
/// records. For a 64-bit layout an ID above 2^63 - 1 comes back as the
/// negative `bigint` with its bit pattern, which `snowflake_decode` reads
/// back. STABLE.
///
/// ```sql
/// SELECT snowflake_compose('2016-04-30 11:18:25.796+00', 32, 7, 'discord');
/// -- 175928847299117063
/// ```
#[pg_extern(stable, strict, parallel_safe, name = "snowflake_compose")]
pub fn snowflake_compose_layout(
    ts: TimestampWithTimeZone,
    worker_id: i32,
    sequence: i32,
    layout: &str,
) -> i64 {
    named(layout)
        .compose(to_unix_ms(ts), worker_id.into(), sequence.into())
        .unwrap_or_else(|e| errors::id_error(e))
}

/// The ID with these fields in a layout described explicitly (epoch, field
/// widths, time unit, field order), in the tick of `ts`. IMMUTABLE.
///
/// ```sql
/// SELECT snowflake_compose('2024-01-01 00:00+00', 7, 5,
///                          '2020-05-02 16:00+00', 41, 10, 12, '1 ms', 'worker,time,sequence');
/// -- 63524023455186949 (a Seata ID)
/// ```
#[pg_extern(immutable, strict, parallel_safe, name = "snowflake_compose")]
#[allow(clippy::too_many_arguments)]
pub fn snowflake_compose_described(
    ts: TimestampWithTimeZone,
    worker_id: i32,
    sequence: i32,
    epoch: TimestampWithTimeZone,
    timestamp_bits: i32,
    worker_bits: i32,
    sequence_bits: i32,
    time_unit: Interval,
    field_order: &str,
) -> i64 {
    described(
        epoch,
        timestamp_bits,
        worker_bits,
        sequence_bits,
        time_unit,
        field_order,
    )
    .compose(to_unix_ms(ts), worker_id.into(), sequence.into())
    .unwrap_or_else(|e| errors::id_error(e))
}
