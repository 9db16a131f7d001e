//! Bit layout of a Snowflake ID and the arithmetic on it.
//!
//! ```text
//!  63  62                                    22 21          12 11           0
//! +---+----------------------------------------+--------------+--------------+
//! | 0 |  milliseconds since epoch (41 bits)    | worker (10)  | sequence (12)|
//! +---+----------------------------------------+--------------+--------------+
//! ```
//!
//! The widths of the worker and sequence fields are configurable; the
//! timestamp takes whatever is left of the 63 usable bits.
//!
//! This module is the bottom of the core: it depends on nothing else in
//! the crate. Decoding and range bounds (`Layout::decode`, `offset_of`,
//! `min_id`, `max_id`) are written once, for local and foreign layouts
//! alike, in [`crate::format`], which builds on this module.

use std::fmt;

/// Bits available to the three fields (bit 63 is the sign bit and stays 0).
pub const USABLE_BITS: u32 = 63;
/// The narrowest timestamp field we accept: 2^35 ms is about 1.09 years.
/// Anything narrower would make a generator that runs out of time within
/// months of its epoch.
pub const MIN_TIMESTAMP_BITS: u32 = 35;
/// Earliest accepted epoch: the Unix epoch.
pub const MIN_EPOCH_MS: i64 = 0;
/// Latest accepted epoch: 9999-12-31 23:59:59.999 UTC.
pub const MAX_EPOCH_MS: i64 = 253_402_300_799_999;

/// A validated layout: epoch plus field widths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    epoch_ms: i64,
    worker_bits: u32,
    sequence_bits: u32,
}

/// Why a layout was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutError {
    WorkerBits(u32),
    SequenceBits(u32),
    TimestampTooNarrow { timestamp_bits: i64 },
    EpochOutOfRange(i64),
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::WorkerBits(b) => {
                write!(f, "worker_bits must be at least 1, got {b}")
            }
            LayoutError::SequenceBits(b) => {
                write!(f, "sequence_bits must be at least 1, got {b}")
            }
            LayoutError::TimestampTooNarrow { timestamp_bits } => write!(
                f,
                "worker_bits + sequence_bits leaves {timestamp_bits} timestamp bits, \
                 fewer than the minimum of {MIN_TIMESTAMP_BITS}"
            ),
            LayoutError::EpochOutOfRange(ms) => write!(
                f,
                "epoch {ms} ms is outside the supported range \
                 1970-01-01 to 9999-12-31"
            ),
        }
    }
}

/// Why an ID could not be composed or decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdError {
    NegativeId(i64),
    /// Bits are set above the fields of a format narrower than 64 bits.
    OutsideFormat {
        id: i64,
        bits: u32,
    },
    /// `unix_ms` is before the epoch; the layout represents `epoch_ms`
    /// to `last_unix_ms`. `i64::MIN` stands for `-infinity`.
    BeforeEpoch {
        unix_ms: i64,
        epoch_ms: i64,
        last_unix_ms: i64,
    },
    /// `unix_ms` is after the last representable millisecond; the layout
    /// represents `epoch_ms` to `last_unix_ms`. `i64::MAX` stands for
    /// `infinity`.
    PastEnd {
        unix_ms: i64,
        epoch_ms: i64,
        last_unix_ms: i64,
    },
    WorkerOutOfRange {
        worker: i64,
        max: u64,
    },
    SequenceOutOfRange {
        sequence: i64,
        max: u64,
    },
    /// The ID is below the first one the format ever produced: it was made
    /// by the system's earlier scheme and carries no timestamp (Twitter's
    /// sequential status IDs). `detail` says what those IDs were.
    BeforeFirstId {
        id: i64,
        first_id: i64,
        detail: &'static str,
    },
    /// Time-range bounds were asked of a format whose IDs do not sort by
    /// time (the worker field above the timestamp, as Seata's).
    NotTimeOrdered,
}

impl fmt::Display for IdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdError::NegativeId(id) => write!(f, "snowflake ID must not be negative: {id}"),
            IdError::OutsideFormat { id, bits } => {
                write!(f, "ID {id} does not fit in a {bits}-bit layout")
            }
            IdError::BeforeEpoch { .. } => {
                write!(f, "timestamp is before the snowflake epoch")
            }
            IdError::PastEnd { .. } => write!(
                f,
                "timestamp is past the last millisecond the snowflake layout can represent"
            ),
            IdError::WorkerOutOfRange { worker, max } => {
                write!(f, "worker id {worker} is out of range 0 .. {max}")
            }
            IdError::SequenceOutOfRange { sequence, max } => {
                write!(f, "sequence {sequence} is out of range 0 .. {max}")
            }
            IdError::BeforeFirstId { id, first_id, .. } => {
                write!(f, "ID {id} predates the format: its first ID is {first_id}")
            }
            IdError::NotTimeOrdered => write!(
                f,
                "IDs with the worker field above the timestamp do not sort by time"
            ),
        }
    }
}

/// An ID split into its fields, with the timestamp as Unix milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts {
    pub unix_ms: i64,
    pub worker: u64,
    pub sequence: u64,
}

const fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

impl Layout {
    /// The default layout: epoch 2024-01-01 00:00:00 UTC, 41/10/12.
    pub const DEFAULT_EPOCH_MS: i64 = 1_704_067_200_000;
    pub const DEFAULT_WORKER_BITS: u32 = 10;
    pub const DEFAULT_SEQUENCE_BITS: u32 = 12;

    pub fn new(epoch_ms: i64, worker_bits: u32, sequence_bits: u32) -> Result<Self, LayoutError> {
        if worker_bits == 0 {
            return Err(LayoutError::WorkerBits(worker_bits));
        }
        if sequence_bits == 0 {
            return Err(LayoutError::SequenceBits(sequence_bits));
        }
        let ts = USABLE_BITS as i64 - worker_bits as i64 - sequence_bits as i64;
        if ts < MIN_TIMESTAMP_BITS as i64 {
            return Err(LayoutError::TimestampTooNarrow { timestamp_bits: ts });
        }
        if !(MIN_EPOCH_MS..=MAX_EPOCH_MS).contains(&epoch_ms) {
            return Err(LayoutError::EpochOutOfRange(epoch_ms));
        }
        Ok(Layout {
            epoch_ms,
            worker_bits,
            sequence_bits,
        })
    }

    pub fn default_layout() -> Self {
        Layout::new(
            Self::DEFAULT_EPOCH_MS,
            Self::DEFAULT_WORKER_BITS,
            Self::DEFAULT_SEQUENCE_BITS,
        )
        .expect("default layout is valid")
    }

    pub fn epoch_ms(&self) -> i64 {
        self.epoch_ms
    }
    pub fn worker_bits(&self) -> u32 {
        self.worker_bits
    }
    pub fn sequence_bits(&self) -> u32 {
        self.sequence_bits
    }
    pub fn timestamp_bits(&self) -> u32 {
        USABLE_BITS - self.worker_bits - self.sequence_bits
    }
    pub fn max_worker(&self) -> u64 {
        mask(self.worker_bits)
    }
    pub fn max_sequence(&self) -> u64 {
        mask(self.sequence_bits)
    }
    /// Largest timestamp offset (ms since epoch) the layout can hold.
    pub fn max_timestamp(&self) -> u64 {
        mask(self.timestamp_bits())
    }
    /// Last Unix millisecond the layout can represent. Saturates for very
    /// wide timestamp fields, whose end lies beyond any real clock.
    pub fn last_unix_ms(&self) -> i64 {
        self.epoch_ms
            .saturating_add(self.max_timestamp().min(i64::MAX as u64) as i64)
    }

    /// Pack fields that are already known to be in range.
    #[inline]
    pub fn pack(&self, ts: u64, worker: u64, seq: u64) -> u64 {
        debug_assert!(ts <= self.max_timestamp());
        debug_assert!(worker <= self.max_worker());
        debug_assert!(seq <= self.max_sequence());
        (ts << (self.worker_bits + self.sequence_bits)) | (worker << self.sequence_bits) | seq
    }

    /// Split a non-negative ID into (timestamp offset, worker, sequence).
    #[inline]
    pub fn split(&self, id: u64) -> (u64, u64, u64) {
        (
            id >> (self.worker_bits + self.sequence_bits),
            (id >> self.sequence_bits) & self.max_worker(),
            id & self.max_sequence(),
        )
    }

    #[inline]
    pub fn timestamp_of(&self, id: u64) -> u64 {
        id >> (self.worker_bits + self.sequence_bits)
    }

    /// `value` as an in-range field value, or the error `err` builds.
    fn check_field(value: i64, max: u64, err: fn(i64, u64) -> IdError) -> Result<u64, IdError> {
        if value < 0 || value as u64 > max {
            return Err(err(value, max));
        }
        Ok(value as u64)
    }

    /// Build an ID from its parts, validating every one of them.
    pub fn compose(&self, unix_ms: i64, worker: i64, sequence: i64) -> Result<i64, IdError> {
        let ts = self.offset_of(unix_ms)?;
        let w = Self::check_field(worker, self.max_worker(), |worker, max| {
            IdError::WorkerOutOfRange { worker, max }
        })?;
        let s = Self::check_field(sequence, self.max_sequence(), |sequence, max| {
            IdError::SequenceOutOfRange { sequence, max }
        })?;
        Ok(self.pack(ts, w, s) as i64)
    }

    /// First sequence number used when a millisecond is opened by the wall
    /// clock (not borrowed). It varies per millisecond so that low-traffic
    /// IDs don't all end in sequence 0, which would skew `id % N` sharding.
    /// The range is `0 .. 2^min(sequence_bits - 1, 8)`, so at most half of
    /// a millisecond's sequence space (and at most 255 values with the
    /// default 12 bits, about 6%) is skipped.
    #[inline]
    pub fn start_sequence(&self, ts: u64, worker: u64) -> u64 {
        let span_bits = (self.sequence_bits - 1).min(8);
        splitmix64(ts ^ (worker << 44)) & mask(span_bits)
    }

    /// An ID's place on its worker's timeline:
    /// `timestamp * 2^sequence_bits + sequence`. Consecutive IDs of one
    /// worker have consecutive positions, across millisecond boundaries.
    #[inline]
    pub fn position(&self, id: u64) -> u64 {
        let (ts, _, seq) = self.split(id);
        (ts << self.sequence_bits()) | seq
    }

    /// The ID of `worker` at timeline position `pos` (see [`Self::position`]).
    #[inline]
    pub fn at_position(&self, pos: u64, worker: u64) -> u64 {
        self.pack(
            pos >> self.sequence_bits(),
            worker,
            pos & self.max_sequence(),
        )
    }

    /// The last position the layout can represent.
    #[inline]
    pub fn max_position(&self) -> u64 {
        (self.max_timestamp() << self.sequence_bits()) | self.max_sequence()
    }

    /// The next ID to issue after `last` for `worker`, given the wall clock
    /// offset `now`. Returns the ID and whether the sequence wrapped (so a
    /// future millisecond was borrowed).
    ///
    /// The result is the smallest ID that is greater than `last` and carries
    /// `worker`, except that a millisecond the wall clock has newly reached
    /// (later than `last`'s) starts at [`Layout::start_sequence`]. Because it is always greater
    /// than `last`, a change of `worker` at run time keeps IDs increasing.
    #[inline]
    pub fn successor(&self, last: u64, now: u64, worker: u64) -> Result<(u64, bool), u64> {
        if now > self.max_timestamp() {
            return Err(now);
        }
        let (lt, lw, ls) = self.split(last);
        if now > lt || (now == lt && worker > lw) {
            // A millisecond new to this worker: its start sequence is
            // greater than `last`. Otherwise (the hot path: same worker,
            // same millisecond) the hash is not computed at all.
            return Ok((
                self.pack(now, worker, self.start_sequence(now, worker)),
                false,
            ));
        }
        let (ts, seq, wrapped) = if lw == worker {
            if ls < self.max_sequence() {
                (lt, ls + 1, false)
            } else {
                (lt + 1, 0, true)
            }
        } else if lw < worker {
            (lt, 0, false)
        } else {
            (lt + 1, 0, false)
        };
        if ts > self.max_timestamp() {
            return Err(ts);
        }
        Ok((self.pack(ts, worker, seq), wrapped))
    }
}

/// SplitMix64 finaliser: a cheap, well-mixed hash of a 64-bit value.
#[inline]
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_layout_is_41_10_12() {
        let l = Layout::default_layout();
        assert_eq!(l.timestamp_bits(), 41);
        assert_eq!(l.max_worker(), 1023);
        assert_eq!(l.max_sequence(), 4095);
        assert_eq!(l.epoch_ms(), 1_704_067_200_000);
    }

    #[test]
    fn round_trip_all_layouts() {
        for wb in 1..=14 {
            for sb in 1..=14 {
                let l = Layout::new(Layout::DEFAULT_EPOCH_MS, wb, sb).unwrap();
                for &(dt, w, s) in &[
                    (0i64, 0u64, 0u64),
                    (1, 1, 1),
                    (123_456_789, l.max_worker(), l.max_sequence()),
                    (
                        l.max_timestamp() as i64,
                        l.max_worker() / 2,
                        l.max_sequence() / 3,
                    ),
                ] {
                    let ms = l.epoch_ms() + dt;
                    let id = l.compose(ms, w as i64, s as i64).unwrap();
                    assert!(id >= 0);
                    let p = l.decode(id).unwrap();
                    assert_eq!((p.unix_ms, p.worker, p.sequence), (ms, w, s), "{wb}/{sb}");
                }
            }
        }
    }

    #[test]
    fn known_id() {
        let l = Layout::default_layout();
        // 2024-01-01 00:00:01.000 UTC, worker 5, sequence 7.
        let id = l.compose(1_704_067_201_000, 5, 7).unwrap();
        assert_eq!(id, (1000 << 22) | (5 << 12) | 7);
        assert_eq!(id, 4_194_324_487);
    }

    #[test]
    fn ids_order_by_time_then_worker_then_sequence() {
        let l = Layout::default_layout();
        let a = l.compose(l.epoch_ms() + 10, 1023, 4095).unwrap();
        let b = l.compose(l.epoch_ms() + 11, 0, 0).unwrap();
        assert!(a < b);
        assert_eq!(l.max_id(l.epoch_ms() + 10).unwrap(), a);
        assert_eq!(l.min_id(l.epoch_ms() + 11).unwrap(), b);
        assert_eq!(l.max_id(l.epoch_ms() + 10).unwrap() + 1, b);
    }

    #[test]
    fn range_limits() {
        let l = Layout::default_layout();
        assert!(matches!(
            l.compose(l.epoch_ms() - 1, 0, 0),
            Err(IdError::BeforeEpoch { .. })
        ));
        let last = l.last_unix_ms();
        assert_eq!(last, l.epoch_ms() + (1 << 41) - 1);
        let top = l.compose(last, 1023, 4095).unwrap();
        assert_eq!(top, i64::MAX);
        assert!(matches!(
            l.compose(last + 1, 0, 0),
            Err(IdError::PastEnd { .. })
        ));
        assert!(matches!(l.max_id(last + 1), Err(IdError::PastEnd { .. })));
        assert!(matches!(
            l.min_id(i64::MIN),
            Err(IdError::BeforeEpoch { .. })
        ));
        assert!(matches!(l.min_id(i64::MAX), Err(IdError::PastEnd { .. })));
        assert!(matches!(
            l.compose(last, 1024, 0),
            Err(IdError::WorkerOutOfRange { max: 1023, .. })
        ));
        assert!(matches!(
            l.compose(last, -1, 0),
            Err(IdError::WorkerOutOfRange { .. })
        ));
        assert!(matches!(
            l.compose(last, 0, 4096),
            Err(IdError::SequenceOutOfRange { max: 4095, .. })
        ));
        assert!(matches!(
            l.compose(last, 0, -1),
            Err(IdError::SequenceOutOfRange { .. })
        ));
        assert_eq!(l.decode(-1), Err(IdError::NegativeId(-1)));
        assert_eq!(l.decode(i64::MAX).unwrap().unix_ms, last);
        assert_eq!(l.decode(0).unwrap().unix_ms, l.epoch_ms());
    }

    #[test]
    fn layout_validation() {
        assert_eq!(Layout::new(0, 0, 12), Err(LayoutError::WorkerBits(0)));
        assert_eq!(Layout::new(0, 10, 0), Err(LayoutError::SequenceBits(0)));
        assert_eq!(
            Layout::new(0, 14, 15),
            Err(LayoutError::TimestampTooNarrow { timestamp_bits: 34 })
        );
        assert_eq!(
            Layout::new(0, 40, 40),
            Err(LayoutError::TimestampTooNarrow {
                timestamp_bits: -17
            })
        );
        assert!(Layout::new(0, 14, 14).is_ok());
        assert!(Layout::new(0, 1, 1).is_ok());
        assert_eq!(
            Layout::new(-1, 10, 12),
            Err(LayoutError::EpochOutOfRange(-1))
        );
        assert!(Layout::new(MAX_EPOCH_MS, 10, 12).is_ok());
        // The widest timestamp field: the end saturates instead of overflowing.
        let wide = Layout::new(MAX_EPOCH_MS, 1, 1).unwrap();
        assert_eq!(wide.timestamp_bits(), 61);
        assert!(wide.last_unix_ms() > MAX_EPOCH_MS);
    }

    #[test]
    fn successor_rules() {
        let l = Layout::default_layout();
        let w = 7;
        // Fresh millisecond: starts at the varying start sequence.
        let (a, wrapped) = l.successor(0, 100, w).unwrap();
        assert!(!wrapped);
        assert_eq!(l.split(a), (100, w, l.start_sequence(100, w)));
        // Same millisecond: sequence + 1.
        let (b, _) = l.successor(a, 100, w).unwrap();
        assert_eq!(b, a + 1);
        // Clock behind: continue from the last timestamp.
        let (c, _) = l.successor(b, 50, w).unwrap();
        assert_eq!(c, b + 1);
        // Sequence exhausted: borrow the next millisecond.
        let full = l.pack(100, w, 4095);
        let (d, wrapped) = l.successor(full, 100, w).unwrap();
        assert!(wrapped);
        assert_eq!(l.split(d), (101, w, 0));
        // Worker changed upward within the same millisecond.
        // (The millisecond is new to this worker, so it takes its start sequence.)
        let (e, _) = l.successor(full, 100, w + 1).unwrap();
        assert_eq!(l.split(e), (100, w + 1, l.start_sequence(100, w + 1)));
        // Worker changed upward while the clock is behind: sequence 0.
        let (e2, _) = l.successor(full, 90, w + 1).unwrap();
        assert_eq!(l.split(e2), (100, w + 1, 0));
        assert!(e > full);
        // Worker changed downward: must move to the next millisecond.
        let (f, _) = l.successor(full, 100, w - 1).unwrap();
        assert_eq!(l.split(f), (101, w - 1, 0));
        assert!(f > full);
        // The end of time is an error, never a wrap.
        let top = l.pack(l.max_timestamp(), w, 4095);
        assert!(l.successor(top, l.max_timestamp(), w).is_err());
        assert!(l.successor(0, l.max_timestamp() + 1, w).is_err());
    }

    #[test]
    fn start_sequence_spreads_low_bits() {
        let l = Layout::default_layout();
        let mut buckets = [0u32; 16];
        let mut max = 0;
        for ts in 0..16_000u64 {
            let s = l.start_sequence(ts, 3);
            max = max.max(s);
            buckets[(s % 16) as usize] += 1;
        }
        assert!(max <= 255);
        assert!(max >= 250, "start sequence should use its whole range");
        for b in buckets {
            assert!((800..=1200).contains(&b), "skewed bucket {b}: {buckets:?}");
        }
        // With one sequence bit there is no room to vary.
        let narrow = Layout::new(0, 10, 1).unwrap();
        assert!((0..1000).all(|ts| narrow.start_sequence(ts, 1) == 0));
    }
}
