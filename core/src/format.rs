//! Decoding IDs minted elsewhere: a general Snowflake-family format
//! (epoch, time unit, three field widths, field order) and the published
//! presets.
//!
//! Unlike [`crate::Layout`], which describes what *this* generator mints (63
//! bits, sign bit 0, milliseconds, time | worker | sequence), a [`Format`]
//! may use all 64 bits (Discord's and Instagram's IDs do), count time in
//! ticks of any whole number of milliseconds (Sonyflake: 10 ms, Baidu's
//! uid-generator: 1 s), and order its fields in any of the three ways the
//! generators in the wild use. A `bigint` holding a 64-bit ID is read as its
//! unsigned two's-complement bit pattern, so nothing is lost.
//!
//! | preset      | epoch (Unix ms)  | unit  | fields, high to low (bits)             | source |
//! |-------------|------------------|-------|----------------------------------------|--------|
//! | `twitter`   | 1288834974657    | 1 ms  | time 41, worker 10, sequence 12        | twitter-archive/snowflake `IdWorker.scala` |
//! | `discord`   | 1420070400000    | 1 ms  | time 42, worker 10, sequence 12        | discord.com/developers/docs/reference#snowflakes |
//! | `instagram` | 1314220021721    | 1 ms  | time 41, shard 13, sequence 10         | "Sharding & IDs at Instagram" (2012) |
//! | `pgedge`    | 1672531200000    | 1 ms  | time 41, sequence 12, node 10          | pgEdge/snowflake README |
//! | `sonyflake` | 1409529600000    | 10 ms | time 39, sequence 8, machine 16        | sony/sonyflake `sonyflake.go` |
//! | `baidu`     | 1463673600000    | 1 s   | time 28, worker 22, sequence 13        | baidu/uid-generator `DefaultUidGenerator.java` |
//! | `mastodon`  | 0                | 1 ms  | time 48, sequence 16                   | mastodon/mastodon `lib/mastodon/snowflake.rb` |
//! | `seata`     | 1588435200000    | 1 ms  | worker 10, time 41, sequence 12        | apache/incubator-seata `IdWorker.java` |
//!
//! Twitter's and Discord's 10-bit worker field is itself 5 bits of
//! datacenter (Discord: worker) and 5 bits of machine (Discord: process);
//! the decoder returns the combined value, so `worker >> 5` is the
//! datacenter and `worker & 31` the machine. Baidu's and Seata's epochs
//! are midnight in China (UTC+8): 2016-05-20 and 2020-05-03. Mastodon's
//! low 16 bits are a hash-seeded counter, returned as the sequence.

use crate::layout::{IdError, Layout, Parts};
use std::fmt;

/// The order of the three fields, from the high bits to the low ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldOrder {
    /// time | worker | sequence (Twitter, Discord, Instagram, Baidu,
    /// snowflake_id).
    WorkerThenSequence,
    /// time | sequence | worker (pgEdge snowflake, Sonyflake).
    SequenceThenWorker,
    /// worker | time | sequence (Seata). Such IDs do not sort by time.
    WorkerFirst,
}

/// The field orders [`FieldOrder::parse`] accepts, for messages.
pub const FIELD_ORDERS: &str = "time,worker,sequence; time,sequence,worker; worker,time,sequence";

impl FieldOrder {
    /// Parse an order written as the three field names from the high bits
    /// to the low ones, separated by commas, `|` or spaces:
    /// `time,worker,sequence`, `time,sequence,worker` or
    /// `worker,time,sequence`. Case and surrounding spaces do not matter.
    pub fn parse(text: &str) -> Result<Self, FormatError> {
        let words: Vec<String> = text
            .split(|c: char| c == ',' || c == '|' || c.is_whitespace())
            .filter(|w| !w.is_empty())
            .map(|w| w.to_ascii_lowercase())
            .collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        match words.as_slice() {
            ["time", "worker", "sequence"] => Ok(FieldOrder::WorkerThenSequence),
            ["time", "sequence", "worker"] => Ok(FieldOrder::SequenceThenWorker),
            ["worker", "time", "sequence"] => Ok(FieldOrder::WorkerFirst),
            _ => Err(FormatError::UnknownFieldOrder(text.to_string())),
        }
    }

    /// The order as [`FieldOrder::parse`] reads it.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldOrder::WorkerThenSequence => "time,worker,sequence",
            FieldOrder::SequenceThenWorker => "time,sequence,worker",
            FieldOrder::WorkerFirst => "worker,time,sequence",
        }
    }
}

/// IDs below `first_id` predate a format: the system's earlier scheme
/// made them, and they carry no timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Predecessor {
    first_id: i64,
    detail: &'static str,
}

/// A validated foreign (or local) ID format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    epoch_ms: i64,
    unit_ms: i64,
    timestamp_bits: u32,
    worker_bits: u32,
    sequence_bits: u32,
    order: FieldOrder,
    predecessor: Option<Predecessor>,
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
    UnknownFieldOrder(String),
    /// A time unit that is not a whole number of milliseconds from 1 ms
    /// to [`MAX_UNIT_MS`]; the text says what was given.
    TimeUnit(String),
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
            FormatError::UnknownFieldOrder(text) => {
                write!(f, "unknown field order \"{text}\"")
            }
            FormatError::TimeUnit(given) => write!(
                f,
                "time unit must be a whole number of milliseconds from 1 ms to 1 day, got {given}"
            ),
        }
    }
}

/// The widest worker or sequence field that fits a (signed, 32-bit) SQL
/// `integer`.
pub const MAX_INTEGER_FIELD_BITS: u32 = 31;

/// The longest time unit: one day.
pub const MAX_UNIT_MS: i64 = 86_400_000;

/// The preset names [`Format::preset`] knows, for messages.
pub const PRESET_NAMES: &str =
    "twitter, discord, instagram, pgedge, sonyflake, baidu, mastodon, seata, default";

/// Twitter's status IDs were sequential until Snowflake took over on
/// 2010-11-04 at its epoch; the last sequential one was 29700859247
/// (TweetedAt, ws-dl.blogspot.com, 2019-08-03).
const TWITTER_FIRST_SNOWFLAKE: i64 = 29_700_859_248;

const fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

impl Format {
    /// A format counting milliseconds.
    pub fn new(
        epoch_ms: i64,
        timestamp_bits: i64,
        worker_bits: i64,
        sequence_bits: i64,
        order: FieldOrder,
    ) -> Result<Self, FormatError> {
        Format::with_unit(
            epoch_ms,
            1,
            timestamp_bits,
            worker_bits,
            sequence_bits,
            order,
        )
    }

    /// A format counting ticks of `unit_ms` milliseconds (1 to
    /// [`MAX_UNIT_MS`]).
    pub fn with_unit(
        epoch_ms: i64,
        unit_ms: i64,
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
        if !(1..=MAX_UNIT_MS).contains(&unit_ms) {
            return Err(FormatError::TimeUnit(format!("{unit_ms} ms")));
        }
        Ok(Format {
            epoch_ms,
            unit_ms,
            timestamp_bits: timestamp_bits as u32,
            worker_bits: worker_bits as u32,
            sequence_bits: sequence_bits as u32,
            order,
            predecessor: None,
        })
    }

    /// A named preset. `default` is not handled here: it is the server's
    /// configured layout, which the caller converts with `From<Layout>`.
    pub fn preset(name: &str) -> Result<Self, FormatError> {
        use FieldOrder::*;
        let (epoch, unit, t, w, s, order) = match name.trim().to_ascii_lowercase().as_str() {
            "twitter" => (1_288_834_974_657, 1, 41, 10, 12, WorkerThenSequence),
            "discord" => (1_420_070_400_000, 1, 42, 10, 12, WorkerThenSequence),
            "instagram" => (1_314_220_021_721, 1, 41, 13, 10, WorkerThenSequence),
            "pgedge" => (1_672_531_200_000, 1, 41, 10, 12, SequenceThenWorker),
            // 2014-09-01 00:00:00 UTC; 39 bits of 10 ms, then 8 of
            // sequence, then 16 of machine (63 bits).
            "sonyflake" => (1_409_529_600_000, 10, 39, 16, 8, SequenceThenWorker),
            // 2016-05-20 00:00:00 +08:00; the sign bit, 28 bits of seconds,
            // 22 of worker, 13 of sequence.
            "baidu" => (1_463_673_600_000, 1000, 28, 22, 13, WorkerThenSequence),
            // Unix time; 48 bits of ms, 16 low bits of sequence.
            "mastodon" => (0, 1, 48, 0, 16, WorkerThenSequence),
            // 2020-05-03 00:00:00 +08:00; the sign bit, 10 bits of worker,
            // 41 of ms, 12 of sequence.
            "seata" => (1_588_435_200_000, 1, 41, 10, 12, WorkerFirst),
            _ => return Err(FormatError::UnknownPreset(name.to_string())),
        };
        let mut f = Format::with_unit(epoch, unit, t, w, s, order)?;
        if epoch == 1_288_834_974_657 {
            f.predecessor = Some(Predecessor {
                first_id: TWITTER_FIRST_SNOWFLAKE,
                detail: "Twitter's status IDs up to 29700859247 were sequential (2006 to 2010-11-04) and carry no timestamp.",
            });
        }
        Ok(f)
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
    pub fn unit_ms(&self) -> i64 {
        self.unit_ms
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
    /// Whether IDs sort by time: the timestamp is the highest field.
    pub fn time_ordered(&self) -> bool {
        self.order != FieldOrder::WorkerFirst
    }
    fn total_bits(&self) -> u32 {
        self.timestamp_bits + self.worker_bits + self.sequence_bits
    }
    /// The bits below the timestamp.
    fn low_bits(&self) -> u32 {
        match self.order {
            FieldOrder::WorkerFirst => self.sequence_bits,
            _ => self.worker_bits + self.sequence_bits,
        }
    }

    /// The Unix ms at which tick `ticks` starts (saturating).
    fn tick_start(&self, ticks: u64) -> i64 {
        let ms = self.epoch_ms as i128 + ticks as i128 * self.unit_ms as i128;
        ms.min(i64::MAX as i128) as i64
    }

    /// Split an ID. With 64 bits in use every `bigint` is a valid ID (its
    /// bit pattern read as unsigned); with fewer, negative IDs and IDs with
    /// bits set above the format are rejected, and so are IDs below the
    /// first one a preset's system made. `unix_ms` is the start of the tick.
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
        if let Some(p) = self.predecessor {
            if (0..p.first_id).contains(&id) {
                return Err(IdError::BeforeFirstId {
                    id,
                    first_id: p.first_id,
                    detail: p.detail,
                });
            }
        }
        let (s, w) = (self.sequence_bits, self.worker_bits);
        let (ticks, worker, sequence) = match self.order {
            FieldOrder::WorkerThenSequence => {
                (bits >> (w + s), (bits >> s) & mask(w), bits & mask(s))
            }
            FieldOrder::SequenceThenWorker => {
                (bits >> (w + s), bits & mask(w), (bits >> w) & mask(s))
            }
            FieldOrder::WorkerFirst => (
                (bits >> s) & mask(self.timestamp_bits),
                bits.checked_shr(self.timestamp_bits + s).unwrap_or(0),
                bits & mask(s),
            ),
        };
        Ok(Parts {
            unix_ms: self.tick_start(ticks),
            worker,
            sequence,
        })
    }

    /// Unix milliseconds as an in-range tick count from the epoch, up to
    /// `max_ticks`.
    fn ticks_of(&self, unix_ms: i64, max_ticks: u64) -> Result<u64, IdError> {
        // The last millisecond of the last tick.
        let last_unix_ms = self.tick_start(max_ticks).saturating_add(self.unit_ms - 1);
        if unix_ms < self.epoch_ms {
            return Err(IdError::BeforeEpoch {
                unix_ms,
                epoch_ms: self.epoch_ms,
                last_unix_ms,
            });
        }
        let ticks = (unix_ms as i128 - self.epoch_ms as i128) / self.unit_ms as i128;
        if ticks > max_ticks as i128 {
            return Err(IdError::PastEnd {
                unix_ms,
                epoch_ms: self.epoch_ms,
                last_unix_ms,
            });
        }
        Ok(ticks as u64)
    }

    /// Unix milliseconds as an in-range tick count whose IDs are all
    /// non-negative `bigint`s, so that bounds compare the way the IDs in
    /// a `bigint` column do.
    pub(crate) fn offset_of(&self, unix_ms: i64) -> Result<u64, IdError> {
        let max = mask(self.timestamp_bits).min((i64::MAX as u64) >> self.low_bits());
        self.ticks_of(unix_ms, max)
    }

    /// The smallest ID of any worker in the tick of `unix_ms`. Refused for
    /// formats whose IDs do not sort by time.
    pub fn min_id(&self, unix_ms: i64) -> Result<i64, IdError> {
        if !self.time_ordered() {
            return Err(IdError::NotTimeOrdered);
        }
        Ok((self.offset_of(unix_ms)? << self.low_bits()) as i64)
    }

    /// The largest ID of any worker in the tick of `unix_ms`. Refused for
    /// formats whose IDs do not sort by time.
    pub fn max_id(&self, unix_ms: i64) -> Result<i64, IdError> {
        if !self.time_ordered() {
            return Err(IdError::NotTimeOrdered);
        }
        Ok(((self.offset_of(unix_ms)? << self.low_bits()) | mask(self.low_bits())) as i64)
    }

    /// The ID with these fields, in the tick of `unix_ms`. With all 64
    /// bits in use, an ID above 2^63 - 1 comes back as the negative
    /// `bigint` with its bit pattern, which [`Format::decode`] reads back.
    pub fn compose(&self, unix_ms: i64, worker: i64, sequence: i64) -> Result<i64, IdError> {
        let ticks = self.ticks_of(unix_ms, mask(self.timestamp_bits))?;
        let max_worker = mask(self.worker_bits);
        if !(0..=max_worker as i128).contains(&(worker as i128)) {
            return Err(IdError::WorkerOutOfRange {
                worker,
                max: max_worker,
            });
        }
        let max_sequence = mask(self.sequence_bits);
        if !(0..=max_sequence as i128).contains(&(sequence as i128)) {
            return Err(IdError::SequenceOutOfRange {
                sequence,
                max: max_sequence,
            });
        }
        let (w, q, s) = (worker as u64, sequence as u64, self.sequence_bits);
        let bits = match self.order {
            FieldOrder::WorkerThenSequence => (ticks << (self.worker_bits + s)) | (w << s) | q,
            FieldOrder::SequenceThenWorker => {
                (ticks << (self.worker_bits + s)) | (q << self.worker_bits) | w
            }
            FieldOrder::WorkerFirst => {
                w.checked_shl(self.timestamp_bits + s).unwrap_or(0) | (ticks << s) | q
            }
        };
        Ok(bits as i64)
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
            unit_ms: 1,
            predecessor: None,
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
        for name in [
            "twitter",
            "discord",
            "instagram",
            "pgedge",
            "sonyflake",
            "baidu",
            "mastodon",
            "seata",
        ] {
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

    #[test]
    fn sonyflake_ids_from_the_library() {
        // Generated on 2026-11-24 with PyPI sonyflake-py 1.3.0 (the Go
        // sony/sonyflake layout), machine_id 0x2a7b; its decompose() gave
        // time 38596237155 (10 ms ticks since 2014-09-01), sequence 1,
        // machine_id 10875.
        let p = decode("sonyflake", 647_537_407_536_736_891);
        assert_eq!(p.unix_ms, 1_409_529_600_000 + 38_596_237_155 * 10);
        assert_eq!((p.worker, p.sequence), (10875, 1));
        let p = decode("sonyflake", 647_537_407_385_676_411);
        assert_eq!(p.unix_ms, 1_409_529_600_000 + 38_596_237_146 * 10);
        assert_eq!((p.worker, p.sequence), (10875, 0));
    }

    #[test]
    fn baidu_worked_example() {
        // baidu/uid-generator DefaultUidGenerator: sign bit, 28 bits of
        // seconds since epochSeconds = 1463673600 (2016-05-20 +08:00), 22
        // bits of worker, 13 of sequence. An ID of 2023-11-14 12:00:00
        // +08:00 (Unix 1699934400): delta 236260800 s, worker 1234,
        // sequence 56: (236260800 << 35) | (1234 << 13) | 56.
        let id = (236_260_800i64 << 35) | (1234 << 13) | 56;
        assert_eq!(id, 8_117_859_274_624_483_384);
        let p = decode("baidu", id);
        assert_eq!(p.unix_ms, 1_699_934_400_000);
        assert_eq!((p.worker, p.sequence), (1234, 56));
    }

    #[test]
    fn mastodon_worked_example() {
        // mastodon lib/mastodon/snowflake.rb: id_at(timestamp) is the Unix
        // time in ms shifted left 16 bits, or-ed with 16 bits of a
        // hash-seeded sequence. 2022-11-15 12:34:56.789 UTC, sequence 0xbeef.
        let id = (1_668_515_696_789i64 << 16) | 0xbeef;
        assert_eq!(id, 109_347_844_704_812_783);
        let p = decode("mastodon", id);
        assert_eq!(
            (p.unix_ms, p.worker, p.sequence),
            (1_668_515_696_789, 0, 0xbeef)
        );
    }

    #[test]
    fn seata_worked_example() {
        // apache/incubator-seata IdWorker: sign bit, 10 bits of worker,
        // 41 bits of ms since twepoch 1588435200000 (2020-05-03 +08:00), 12
        // of sequence. Worker 7 at 2024-01-01 00:00:00 UTC (1704067200000),
        // sequence 5: (7 << 53) | (115632000000 << 12) | 5.
        let id = (7i64 << 53) | (115_632_000_000 << 12) | 5;
        let p = decode("seata", id);
        assert_eq!((p.unix_ms, p.worker, p.sequence), (1_704_067_200_000, 7, 5));
        let f = Format::preset("seata").unwrap();
        assert_eq!(f.compose(1_704_067_200_000, 7, 5), Ok(id));
        // Its IDs do not sort by time: no range bounds.
        assert_eq!(f.min_id(1_704_067_200_000), Err(IdError::NotTimeOrdered));
        assert_eq!(f.max_id(1_704_067_200_000), Err(IdError::NotTimeOrdered));
    }

    #[test]
    fn twitter_ids_before_snowflake_are_refused() {
        let f = Format::preset("twitter").unwrap();
        for id in [0, 20, 29_700_859_247] {
            assert!(matches!(
                f.decode(id),
                Err(IdError::BeforeFirstId {
                    first_id: 29_700_859_248,
                    ..
                })
            ));
        }
        assert!(f.decode(29_700_859_248).is_ok());
        // An explicit Twitter layout has no such range.
        let e = Format::new(
            1_288_834_974_657,
            41,
            10,
            12,
            FieldOrder::WorkerThenSequence,
        )
        .unwrap();
        assert_eq!(e.decode(20).unwrap().unix_ms, 1_288_834_974_657);
    }

    #[test]
    fn ticks_longer_than_a_millisecond() {
        let f =
            Format::with_unit(1_000_000, 10, 39, 16, 8, FieldOrder::SequenceThenWorker).unwrap();
        // Every ms of a tick has the same bounds; ts is the tick's start.
        for ms in 1_000_050..1_000_060 {
            assert_eq!(f.min_id(ms).unwrap(), 5 << 24);
            assert_eq!(f.max_id(ms).unwrap(), (6 << 24) - 1);
        }
        assert_eq!(
            f.decode(f.compose(1_000_057, 3, 4).unwrap())
                .unwrap()
                .unix_ms,
            1_000_050
        );
        // The first and the last tick.
        assert_eq!(f.min_id(1_000_000).unwrap(), 0);
        let last = 1_000_000 + ((1i64 << 39) - 1) * 10;
        assert_eq!(f.max_id(last + 9).unwrap(), i64::MAX);
        assert!(
            matches!(f.min_id(last + 10), Err(IdError::PastEnd { last_unix_ms, .. }) if last_unix_ms == last + 9)
        );
        assert!(matches!(
            f.min_id(999_999),
            Err(IdError::BeforeEpoch { .. })
        ));
        let s = Format::with_unit(0, 1000, 28, 22, 13, FieldOrder::WorkerThenSequence).unwrap();
        assert_eq!(
            s.decode(s.compose(5_999, 1, 2).unwrap()).unwrap().unix_ms,
            5_000
        );
        assert!(Format::with_unit(0, 0, 41, 10, 12, FieldOrder::WorkerThenSequence).is_err());
        assert!(Format::with_unit(
            0,
            MAX_UNIT_MS + 1,
            41,
            10,
            12,
            FieldOrder::WorkerThenSequence
        )
        .is_err());
    }

    #[test]
    fn compose_round_trips_in_every_order() {
        use FieldOrder::*;
        for order in [WorkerThenSequence, SequenceThenWorker, WorkerFirst] {
            for (t, w, s) in [
                (41, 10, 12),
                (42, 10, 12),
                (39, 16, 8),
                (48, 0, 16),
                (1, 31, 31),
            ] {
                let f = Format::with_unit(1_000, 7, t, w, s, order).unwrap();
                let last_tick = mask(t as u32);
                let last_ms = 1_000 + last_tick as i64 * 7;
                for (ms, worker, seq) in [
                    (1_000, 0, 0),
                    (last_ms + 6, mask(w as u32) as i64, mask(s as u32) as i64),
                    (
                        1_000 + 7 * 12_345.min(last_tick as i64),
                        mask(w as u32) as i64 / 2,
                        1,
                    ),
                ] {
                    let id = f.compose(ms, worker, seq).unwrap();
                    let p = f.decode(id).unwrap();
                    let tick_start = 1_000 + (ms - 1_000) / 7 * 7;
                    assert_eq!(
                        (p.unix_ms, p.worker as i64, p.sequence as i64),
                        (tick_start, worker, seq),
                        "{order:?} {t}/{w}/{s} at {ms}"
                    );
                }
                assert!(matches!(
                    f.compose(1_000, mask(w as u32) as i64 + 1, 0),
                    Err(IdError::WorkerOutOfRange { .. })
                ));
                assert!(matches!(
                    f.compose(1_000, 0, -1),
                    Err(IdError::SequenceOutOfRange { .. })
                ));
            }
        }
    }

    #[test]
    fn field_orders_parse() {
        use FieldOrder::*;
        assert_eq!(
            FieldOrder::parse("time,worker,sequence"),
            Ok(WorkerThenSequence)
        );
        assert_eq!(
            FieldOrder::parse(" Time | Sequence | Worker "),
            Ok(SequenceThenWorker)
        );
        assert_eq!(FieldOrder::parse("worker time sequence"), Ok(WorkerFirst));
        for bad in [
            "",
            "time,worker",
            "sequence,time,worker",
            "time,worker,sequence,x",
            "time,,worker;sequence",
        ] {
            assert!(
                matches!(
                    FieldOrder::parse(bad),
                    Err(FormatError::UnknownFieldOrder(_))
                ),
                "{bad}"
            );
        }
        for o in [WorkerThenSequence, SequenceThenWorker, WorkerFirst] {
            assert_eq!(FieldOrder::parse(o.as_str()), Ok(o));
        }
    }
}
