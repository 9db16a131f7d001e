//! Compact, sortable text form of an ID: Crockford base32, fixed width.
//!
//! Every non-negative `bigint` encodes to exactly 13 symbols from
//! `0123456789ABCDEFGHJKMNPQRSTVWXYZ` (no I, L, O or U), most significant
//! first and zero-padded, so the text sorts bytewise (and under the `C`
//! collation) in the same order as the numbers. 13 symbols carry 65 bits;
//! the first symbol of a valid ID is therefore `0`..`7`.
//!
//! Decoding follows Crockford's rules: case-insensitive, `O` reads as `0`,
//! `I` and `L` read as `1`, and hyphens are ignored, so IDs survive being
//! read aloud, retyped or grouped. Between 1 and 13 symbols are accepted
//! (fewer means leading zeros). `U` and every other character are errors.

use std::fmt;

pub(crate) const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// Symbols in the encoded form of any non-negative `bigint`.
pub const ENCODED_LEN: usize = 13;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Base32Error {
    /// The ID to encode is negative.
    Negative(i64),
    /// No symbols at all (empty, or only hyphens).
    Empty,
    /// More than 13 symbols.
    TooLong(usize),
    /// A character outside the alphabet, at this (0-based) byte offset.
    InvalidChar { ch: char, at: usize },
    /// The value is larger than the largest `bigint`.
    OutOfRange,
}

impl fmt::Display for Base32Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Base32Error::Negative(id) => write!(f, "snowflake ID {id} is negative"),
            Base32Error::Empty => write!(f, "base32 ID has no symbols"),
            Base32Error::TooLong(n) => {
                write!(f, "base32 ID has {n} symbols, more than {ENCODED_LEN}")
            }
            Base32Error::InvalidChar { ch, at } => {
                write!(
                    f,
                    "character {ch:?} at position {} is not Crockford base32",
                    at + 1
                )
            }
            Base32Error::OutOfRange => write!(f, "base32 ID is out of range for type bigint"),
        }
    }
}

/// Encode a non-negative ID as 13 Crockford base32 symbols.
pub fn encode(id: i64) -> Result<String, Base32Error> {
    if id < 0 {
        return Err(Base32Error::Negative(id));
    }
    let v = id as u64;
    let mut out = [0u8; ENCODED_LEN];
    for (i, slot) in out.iter_mut().enumerate() {
        let shift = 5 * (ENCODED_LEN - 1 - i) as u32;
        *slot = ALPHABET[((v >> shift) & 31) as usize];
    }
    Ok(String::from_utf8(out.to_vec()).expect("alphabet is ASCII"))
}

/// The value of one symbol, case-insensitive, reading O as 0 and I and L
/// as 1 (Crockford); `None` outside the alphabet.
pub(crate) fn symbol_value(c: u8) -> Option<u64> {
    let v = match c.to_ascii_uppercase() {
        b @ b'0'..=b'9' => b - b'0',
        b'O' => 0,
        b'I' | b'L' => 1,
        b => ALPHABET.iter().position(|&a| a == b && a >= b'A')? as u8,
    };
    Some(v as u64)
}

/// Decode Crockford base32 text back to the ID; the exact inverse of
/// [`encode`].
pub fn decode(text: &str) -> Result<i64, Base32Error> {
    let mut v: u64 = 0;
    let mut n = 0usize;
    for (at, ch) in text.char_indices() {
        if ch == '-' {
            continue;
        }
        let d = if ch.is_ascii() {
            symbol_value(ch as u8)
        } else {
            None
        }
        .ok_or(Base32Error::InvalidChar { ch, at })?;
        n += 1;
        if n > ENCODED_LEN {
            return Err(Base32Error::TooLong(
                text.chars().filter(|&c| c != '-').count(),
            ));
        }
        // 13 symbols hold 65 bits: check before the top bits fall off.
        if v >> 59 != 0 {
            return Err(Base32Error::OutOfRange);
        }
        v = (v << 5) | d;
    }
    if n == 0 {
        return Err(Base32Error::Empty);
    }
    if v > i64::MAX as u64 {
        return Err(Base32Error::OutOfRange);
    }
    Ok(v as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        assert_eq!(encode(0).unwrap(), "0000000000000");
        assert_eq!(encode(1).unwrap(), "0000000000001");
        assert_eq!(encode(31).unwrap(), "000000000000Z");
        assert_eq!(encode(32).unwrap(), "0000000000010");
        assert_eq!(encode(i64::MAX).unwrap(), "7ZZZZZZZZZZZZ");
        assert_eq!(decode("7ZZZZZZZZZZZZ").unwrap(), i64::MAX);
        assert_eq!(encode(-1), Err(Base32Error::Negative(-1)));
    }

    #[test]
    fn crockford_reading_rules() {
        assert_eq!(decode("zz").unwrap(), 1023);
        assert_eq!(decode("o0Oo").unwrap(), 0);
        assert_eq!(decode("IiLl").unwrap(), decode("1111").unwrap());
        assert_eq!(decode("0000-0000-0001-0").unwrap(), 32);
        assert_eq!(decode("1"), Ok(1));
    }

    #[test]
    fn invalid_text() {
        assert_eq!(decode(""), Err(Base32Error::Empty));
        assert_eq!(decode("---"), Err(Base32Error::Empty));
        assert_eq!(
            decode("12U4"),
            Err(Base32Error::InvalidChar { ch: 'U', at: 2 })
        );
        assert_eq!(
            decode("12 4"),
            Err(Base32Error::InvalidChar { ch: ' ', at: 2 })
        );
        assert_eq!(
            decode("é1"),
            Err(Base32Error::InvalidChar { ch: 'é', at: 0 })
        );
        assert_eq!(decode("80000000000000"), Err(Base32Error::TooLong(14)));
        assert_eq!(decode("8000000000000"), Err(Base32Error::OutOfRange));
        assert_eq!(decode("ZZZZZZZZZZZZZ"), Err(Base32Error::OutOfRange));
    }

    #[test]
    fn round_trip_and_order_over_the_whole_range() {
        // Powers of two and their neighbours, plus a stride over the range.
        let mut ids: Vec<i64> = (0..63)
            .flat_map(|b| {
                let p = 1i64 << b;
                [p - 1, p, p + 1]
            })
            .collect();
        let mut x: u64 = 0x1234_5678_9abc_def0;
        for _ in 0..100_000 {
            x = crate::layout::splitmix64(x);
            ids.push((x >> 1) as i64);
        }
        ids.push(i64::MAX);
        ids.sort_unstable();
        ids.dedup();
        let mut prev: Option<String> = None;
        for &id in &ids {
            let s = encode(id).unwrap();
            assert_eq!(s.len(), ENCODED_LEN);
            assert_eq!(decode(&s).unwrap(), id);
            assert_eq!(decode(&s.to_ascii_lowercase()).unwrap(), id);
            if let Some(p) = &prev {
                assert!(p < &s, "{p} !< {s}");
            }
            prev = Some(s);
        }
    }
}
