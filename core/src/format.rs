//! Decoding IDs minted elsewhere: a general Snowflake-family format
//! (epoch, three field widths, field order) and the published presets.
//!
//! Unlike [`crate::Layout`], which describes what *this* generator mints (63
//! bits, sign bit 0), a [`Format`] may use all 64 bits: Discord's and
//! Instagram's IDs do. A `bigint` holding such an ID is read as its unsigned
//! two's-complement bit pattern, so nothing is lost.
//!
//! | preset      | epoch (Unix ms)  | time | worker | sequence | order                   | source |
//! |-------------|------------------|------|--------|----------|-------------------------|--------|
//! | `twitter`   | 1288834974657    | 41   | 10     | 12       | time, worker, sequence  | twitter-archive/snowflake `IdWorker.scala` |
//! | `discord`   | 1420070400000    | 42   | 10     | 12       | time, worker, sequence  | discord.com/developers/docs/reference#snowflakes |
//! | `instagram` | 1314220021721    | 41   | 13     | 10       | time, shard, sequence   | "Sharding & IDs at Instagram" (2012) |
//! | `pgedge`    | 1672531200000    | 41   | 10     | 12       | time, sequence, node    | pgEdge/snowflake README |
//!
//! Twitter's and Discord's 10-bit worker field is itself 5 bits of
//! datacenter (Discord: worker) and 5 bits of machine (Discord: process);
//! the decoder returns the combined value, so `worker >> 5` is the
//! datacenter and `worker & 31` the machine.

use crate::layout::{IdError, Layout, Parts};
use std::fmt;

/// Where the worker field sits relative to the sequence field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldOrder {
    /// time | worker | sequence (Twitter, Discord, Instagram, snowflake_id).
    WorkerThenSequence,
    /// time | sequence | worker (pgEdge snowflake).
    SequenceThenWorker,
}

/// A validated foreign (or local) ID format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    epoch_ms: i64,
    timestamp_bits: u32,
    worker_bits: u32,
    sequence_bits: u32,
    order: FieldOrder,
}

/// Why a format was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormatError {
    FieldWidth {
        field: &'static str,
        bits: i64,
    },
    TooWide {
        total: i64,
    },
    EpochOutOfRange(i64),
    UnknownPreset(String),
    /// A worker or sequence field wider than an SQL `integer` can hold
    /// (see [`Format::check_fields_fit_integer`]).
    FieldTooWideForInteger {
        field: &'static str,
        bits: u32,
    },
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::FieldWidth { field, bits } => {
                let min = if *field == "timestamp_bits" { 1 } else { 0 };
                write!(f, "{field} must be between {min} and 63, got {bits}")
            }
            FormatError::TooWide { total } => write!(
                f,
                "timestamp_bits + worker_bits + sequence_bits must be at most 64, got {total}"
            ),
            FormatError::EpochOutOfRange(ms) => write!(
                f,
                "epoch {ms} ms is outside the supported range 1970-01-01 to 9999-12-31"
            ),
            FormatError::UnknownPreset(name) => write!(f, "unknown snowflake layout \"{name}\""),
            FormatError::FieldTooWideForInteger { field, bits } => write!(
                f,
                "{field} must be at most {MAX_INTEGER_FIELD_BITS} to decode the field as integer, got {bits}"
            ),
        }
    }
}

/// The widest worker or sequence field that fits a (signed, 32-bit) SQL
/// `integer`.
pub const MAX_INTEGER_FIELD_BITS: u32 = 31;

/// The preset names [`Format::preset`] knows, for messages.
pub const PRESET_NAMES: &str = "twitter, discord, instagram, pgedge, default";

const fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

impl Format {
    pub fn new(
        epoch_ms: i64,
        timestamp_bits: i64,
        worker_bits: i64,
        sequence_bits: i64,
        order: FieldOrder,
    ) -> Result<Self, FormatError> {
        for (field, bits, min) in [
            ("timestamp_bits", timestamp_bits, 1),
            ("worker_bits", worker_bits, 0),
            ("sequence_bits", sequence_bits, 0),
        ] {
            if !(min..=63).contains(&bits) {
                return Err(FormatError::FieldWidth { field, bits });
            }
        }
        let total = timestamp_bits + worker_bits + sequence_bits;
        if total > 64 {
            return Err(FormatError::TooWide { total });
        }
        if !(crate::layout::MIN_EPOCH_MS..=crate::layout::MAX_EPOCH_MS).contains(&epoch_ms) {
            return Err(FormatError::EpochOutOfRange(epoch_ms));
        }
        Ok(Format {
            epoch_ms,
            timestamp_bits: timestamp_bits as u32,
            worker_bits: worker_bits as u32,
            sequence_bits: sequence_bits as u32,
            order,
        })
    }

    /// A named preset. `default` is not handled here: it is the server's
    /// configured layout, which the caller converts with `From<Layout>`.
    pub fn preset(name: &str) -> Result<Self, FormatError> {
        let (epoch, t, w, s, order) = match name.trim().to_ascii_lowercase().as_str() {
            "twitter" => (
                1_288_834_974_657,
                41,
                10,
                12,
                FieldOrder::WorkerThenSequence,
            ),
            "discord" => (
                1_420_070_400_000,
                42,
                10,
                12,
                FieldOrder::WorkerThenSequence,
            ),
            "instagram" => (
                1_314_220_021_721,
                41,
                13,
                10,
                FieldOrder::WorkerThenSequence,
            ),
            "pgedge" => (
                1_672_531_200_000,
                41,
                10,
                12,
                FieldOrder::SequenceThenWorker,
            ),
            _ => return Err(FormatError::UnknownPreset(name.to_string())),
        };
        Format::new(epoch, t, w, s, order)
    }

    /// Whether the worker and sequence fields fit an SQL `integer` (at most
    /// [`MAX_INTEGER_FIELD_BITS`] each), as decoding into integer columns
    /// needs. Every local layout and every preset does.
    pub fn check_fields_fit_integer(&self) -> Result<(), FormatError> {
        for (field, bits) in [
            ("worker_bits", self.worker_bits),
            ("sequence_bits", self.sequence_bits),
        ] {
            if bits > MAX_INTEGER_FIELD_BITS {
                return Err(FormatError::FieldTooWideForInteger { field, bits });
            }
        }
        Ok(())
    }

    pub fn epoch_ms(&self) -> i64 {
        self.epoch_ms
    }
    pub fn timestamp_bits(&self) -> u32 {
        self.timestamp_bits
    }
    pub fn worker_bits(&self) -> u32 {
        self.worker_bits
    }
    pub fn sequence_bits(&self) -> u32 {
        self.sequence_bits
    }
    pub fn order(&self) -> FieldOrder {
        self.order
    }
    fn total_bits(&self) -> u32 {
        self.timestamp_bits + self.worker_bits + self.sequence_bits
    }
    fn low_bits(&self) -> u32 {
        self.worker_bits + self.sequence_bits
    }

    /// Split an ID. With 64 bits in use every `bigint` is a valid ID (its
    /// bit pattern read as unsigned); with fewer, negative IDs and IDs with
    /// bits set above the format are rejected.
    pub fn decode(&self, id: i64) -> Result<Parts, IdError> {
        let bits = id as u64;
        if self.total_bits() < 64 && (id < 0 || bits > mask(self.total_bits())) {
            return Err(if id < 0 {
                IdError::NegativeId(id)
            } else {
                IdError::OutsideFormat {
                    id,
                    bits: self.total_bits(),
                }
            });
        }
        let ts = bits >> self.low_bits();
        let low = bits & mask(self.low_bits());
        let (worker, sequence) = match self.order {
            FieldOrder::WorkerThenSequence => {
                (low >> self.sequence_bits, low & mask(self.sequence_bits))
            }
            FieldOrder::SequenceThenWorker => {
                (low & mask(self.worker_bits), low >> self.worker_bits)
            }
        };
        Ok(Parts {
            unix_ms: self.epoch_ms.saturating_add(ts.min(i64::MAX as u64) as i64),
            worker,
            sequence,
        })
    }

    /// Unix milliseconds as an in-range offset from the epoch.
    pub(crate) fn offset_of(&self, unix_ms: i64) -> Result<u64, IdError> {
        // The bound must also fit a signed bigint so that it compares the
        // way the IDs in a bigint column do.
        let max_ts = mask(self.timestamp_bits).min((i64::MAX as u64) >> self.low_bits());
        let last_unix_ms = self
            .epoch_ms
            .saturating_add(max_ts.min(i64::MAX as u64) as i64);
        if unix_ms < self.epoch_ms {
            return Err(IdError::BeforeEpoch {
                unix_ms,
                epoch_ms: self.epoch_ms,
                last_unix_ms,
            });
        }
        let off = (unix_ms as i128 - self.epoch_ms as i128) as u128;
        if off > max_ts as u128 {
            return Err(IdError::PastEnd {
                unix_ms,
                epoch_ms: self.epoch_ms,
                last_unix_ms,
            });
        }
        Ok(off as u64)
    }

    /// The smallest ID of any worker in the millisecond `unix_ms`.
    pub fn min_id(&self, unix_ms: i64) -> Result<i64, IdError> {
        Ok((self.offset_of(unix_ms)? << self.low_bits()) as i64)
    }

    /// The largest ID of any worker in the millisecond `unix_ms`.
    pub fn max_id(&self, unix_ms: i64) -> Result<i64, IdError> {
        Ok(((self.offset_of(unix_ms)? << self.low_bits()) | mask(self.low_bits())) as i64)
    }
}

/// Decoding and range bounds of this generator's own layout, written once
/// here for local and foreign layouts alike (`layout` stays free of any
/// dependency on this module).
impl Layout {
    /// The same layout as a general [`Format`].
    fn format(&self) -> Format {
        Format::from(*self)
    }

    /// Convert Unix milliseconds to an in-range offset from the epoch.
    pub fn offset_of(&self, unix_ms: i64) -> Result<u64, IdError> {
        self.format().offset_of(unix_ms)
    }

    /// Split an ID into its parts. Every non-negative `bigint` decodes.
    pub fn decode(&self, id: i64) -> Result<Parts, IdError> {
        self.format().decode(id)
    }

    /// The smallest ID any worker could mint in the millisecond `unix_ms`.
    pub fn min_id(&self, unix_ms: i64) -> Result<i64, IdError> {
        self.format().min_id(unix_ms)
    }

    /// The largest ID any worker could mint in the millisecond `unix_ms`.
    pub fn max_id(&self, unix_ms: i64) -> Result<i64, IdError> {
        self.format().max_id(unix_ms)
    }
}

impl From<Layout> for Format {
    fn from(l: Layout) -> Self {
        Format {
            epoch_ms: l.epoch_ms(),
            timestamp_bits: l.timestamp_bits(),
            worker_bits: l.worker_bits(),
            sequence_bits: l.sequence_bits(),
            order: FieldOrder::WorkerThenSequence,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(preset: &str, id: i64) -> Parts {
        Format::preset(preset).unwrap().decode(id).unwrap()
    }

    // Each expected value below is the published creation time of a real
    // ID; the sources are cited next to it.

    #[test]
    fn integer_fields_fit_up_to_31_bits() {
        let f = |w, s| Format::new(0, 63 - w - s, w, s, FieldOrder::WorkerThenSequence).unwrap();
        assert_eq!(f(31, 31).check_fields_fit_integer(), Ok(()));
        assert_eq!(
            f(41, 12).check_fields_fit_integer(),
            Err(FormatError::FieldTooWideForInteger {
                field: "worker_bits",
                bits: 41
            })
        );
        assert!(matches!(
            f(10, 32).check_fields_fit_integer(),
            Err(FormatError::FieldTooWideForInteger {
                field: "sequence_bits",
                ..
            })
        ));
        for name in ["twitter", "discord", "instagram", "pgedge"] {
            assert_eq!(
                Format::preset(name).unwrap().check_fields_fit_integer(),
                Ok(())
            );
        }
    }

    #[test]
    fn twitter_published_ids() {
        // Twitter epoch 1288834974657: twitter-archive/snowflake,
        // src/main/scala/com/twitter/service/snowflake/IdWorker.scala (twepoch).
        // Tweet 1763287703813013644 (https://twitter.com/pixequil/status/1763287703813013644),
        // dated 2024-02-29 in https://purring.fyi/log/snowflakes-and-timestamps/.
        let p = decode("twitter", 1_763_287_703_813_013_644);
        assert_eq!(p.unix_ms, 1_709_235_523_547); // 2024-02-29 19:38:43.547 UTC
        assert_eq!((p.worker >> 5, p.worker & 31, p.sequence), (11, 12, 140));
    }

    #[test]
    fn discord_published_ids() {
        // https://discord.com/developers/docs/reference#snowflakes: the
        // worked example 175928847299117063 is 2016-04-30 11:18:25.796 UTC,
        // internal worker 1, process 0, increment 7.
        let p = decode("discord", 175_928_847_299_117_063);
        assert_eq!(p.unix_ms, 1_462_015_105_796);
        assert_eq!((p.worker >> 5, p.worker & 31, p.sequence), (1, 0, 7));
        // docs.rs twilight-util, trait Snowflake: user 105484726235607040 was
        // created 2015-10-19T01:58:38.546+00:00.
        assert_eq!(
            decode("discord", 105_484_726_235_607_040).unix_ms,
            1_445_219_918_546
        );
        // npm discord-snowflake README: 90339695967350784 is
        // 2015-09-07T06:57:41.949Z, worker 0, process 3, increment 0.
        let p = decode("discord", 90_339_695_967_350_784);
        assert_eq!(p.unix_ms, 1_441_609_061_949);
        assert_eq!((p.worker >> 5, p.worker & 31, p.sequence), (0, 3, 0));
    }

    #[test]
    fn instagram_published_ids() {
        // Stack Overflow question 63683015 ("Instagram media ID to timestamp
        // conversion"): media 2384288897814875714 was posted
        // 2020-08-26T13:43:27Z and 2383568809444681765 2020-08-25T13:52:46Z
        // (second precision in the question).
        let p = decode("instagram", 2_384_288_897_814_875_714);
        assert_eq!(p.unix_ms / 1000, 1_598_449_407);
        assert!(p.worker < 8192 && p.sequence < 1024);
        assert_eq!(
            decode("instagram", 2_383_568_809_444_681_765).unix_ms / 1000,
            1_598_363_566
        );
    }

    #[test]
    fn pgedge_published_ids() {
        // pgEdge/snowflake docs/snowflake_functions.md: 136169504773242881
        // formats as {"id": 1, "ts": "2024-01-11 13:08:59.845-05", "count": 0}.
        let p = decode("pgedge", 136_169_504_773_242_881);
        assert_eq!(p.unix_ms, 1_704_996_539_845);
        assert_eq!((p.worker, p.sequence), (1, 0));
    }

    #[test]
    fn sixty_four_bit_formats_read_negative_bigints_as_unsigned() {
        let d = Format::preset("discord").unwrap();
        let p = d.decode(-1).unwrap();
        assert_eq!(p.unix_ms, d.epoch_ms() + (1i64 << 42) - 1);
        assert_eq!((p.worker, p.sequence), (1023, 4095));
        // Bounds past 2^63 would not sort like bigints: refused.
        assert!(matches!(
            d.min_id(d.epoch_ms() + (1i64 << 41)),
            Err(IdError::PastEnd { .. })
        ));
        assert_eq!(d.max_id(d.epoch_ms() + (1i64 << 41) - 1).unwrap(), i64::MAX);
    }

    #[test]
    fn narrower_formats_reject_foreign_bits() {
        let f = Format::new(0, 30, 4, 4, FieldOrder::WorkerThenSequence).unwrap();
        assert_eq!(f.decode(-5), Err(IdError::NegativeId(-5)));
        assert!(matches!(
            f.decode(1 << 38),
            Err(IdError::OutsideFormat { bits: 38, .. })
        ));
        assert_eq!(f.decode((1 << 38) - 1).unwrap().worker, 15);
    }

    #[test]
    fn validation() {
        let o = FieldOrder::WorkerThenSequence;
        assert!(matches!(
            Format::new(0, 0, 10, 12, o),
            Err(FormatError::FieldWidth {
                field: "timestamp_bits",
                ..
            })
        ));
        assert!(matches!(
            Format::new(0, 41, -1, 12, o),
            Err(FormatError::FieldWidth {
                field: "worker_bits",
                ..
            })
        ));
        assert_eq!(
            Format::new(0, 43, 10, 12, o),
            Err(FormatError::TooWide { total: 65 })
        );
        assert_eq!(
            Format::new(-1, 41, 10, 12, o),
            Err(FormatError::EpochOutOfRange(-1))
        );
        assert!(Format::new(0, 64 - 22, 10, 12, o).is_ok());
        assert!(Format::new(0, 63, 0, 0, o).is_ok());
        assert!(matches!(
            Format::preset("snowflake"),
            Err(FormatError::UnknownPreset(_))
        ));
        assert_eq!(
            Format::preset(" Twitter ").unwrap().epoch_ms(),
            1_288_834_974_657
        );
    }

    #[test]
    fn local_layout_agrees_with_its_format() {
        let l = Layout::new(1_600_000_000_000, 7, 9).unwrap();
        let f = Format::from(l);
        for id in [0i64, 1, 12_345_678_901, i64::MAX] {
            assert_eq!(f.decode(id).unwrap(), l.decode(id).unwrap());
        }
        let ms = 1_700_000_000_123;
        assert_eq!(f.min_id(ms).unwrap(), l.min_id(ms).unwrap());
        assert_eq!(f.max_id(ms).unwrap(), l.max_id(ms).unwrap());
        assert_eq!(f.decode(-1), Err(IdError::NegativeId(-1)));
    }

    #[test]
    fn pgedge_order_round_trips() {
        let f = Format::preset("pgedge").unwrap();
        let ms = f.epoch_ms() + 5_000;
        let id = ((5_000u64 << 22) | (77 << 10) | 513) as i64;
        let p = f.decode(id).unwrap();
        assert_eq!((p.unix_ms, p.worker, p.sequence), (ms, 513, 77));
        assert!(f.min_id(ms).unwrap() <= id && id <= f.max_id(ms).unwrap());
    }
}
