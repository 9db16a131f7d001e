//! Public IDs: a keyed, reversible form of an ID that reveals nothing
//! without the server's key (not its time, worker or sequence, nor its
//! neighbours), for showing IDs to users while the table keeps the
//! ordered internal key.
//!
//! **The cipher** is FF1 (NIST SP 800-38G, format-preserving encryption)
//! with AES-256, over the 64 bits of the ID as a radix-2 numeral string of
//! length 64, most significant bit first; the tweak is the caller's domain
//! (UTF-8 bytes), so that order 42 and user 42 have unrelated public forms.
//! This module implements FF1 for that one radix and length with machine
//! integers: its numeral strings are the two 32-bit halves of a `u64`, and
//! each of its ten Feistel rounds is one AES block (the tweak's constant
//! blocks are chained once per call). The tests check it against the
//! general FF1 of the `fpe` crate (which is checked against NIST's sample
//! vectors) for random keys, tweaks and IDs, and pin known answers.
//!
//! **The text form** is 15 Crockford base32 symbols, case-insensitive:
//! the key version (0 to 31), 13 symbols of ciphertext (the first carries 4
//! bits), and a check symbol. The check symbol is the parity symbol of a
//! code over GF(32): every single mistyped symbol and every swap of two
//! adjacent different symbols is detected.

use crate::base32::{symbol_value, ALPHABET};
use aes::cipher::{BlockCipherEncrypt, KeyInit};
use aes::Aes256;
use std::fmt;

/// Symbols of a public ID.
pub const PUBLIC_LEN: usize = 15;

/// A key version and its AES-256 key schedule.
struct Key {
    version: u8,
    cipher: Aes256,
}

/// The configured keys: the first encodes, every one decodes.
pub struct PublicKeys {
    keys: Vec<Key>,
}

/// Why keys could not be parsed. Never carries key material.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeysError {
    /// Entry `n` (1-based) is not `VERSION:64 hex digits`.
    Entry(usize),
    /// A version outside 0..=31.
    Version(usize),
    /// Two entries with the same version.
    Duplicate(u8),
}

impl fmt::Display for KeysError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeysError::Entry(n) => write!(
                f,
                "entry {n} is not VERSION:KEY with a key of 64 hexadecimal digits"
            ),
            KeysError::Version(n) => write!(f, "entry {n} has a version outside 0 to 31"),
            KeysError::Duplicate(v) => write!(f, "version {v} is listed twice"),
        }
    }
}

/// Why a public ID was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PublicError {
    Length(usize),
    Symbol(char),
    Check,
    /// The first ciphertext symbol carries more than 4 bits.
    Range,
    /// Made with a key version that is not configured (any more).
    UnknownVersion(u8),
}

impl fmt::Display for PublicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PublicError::Length(n) => write!(f, "a public ID has {PUBLIC_LEN} symbols, not {n}"),
            PublicError::Symbol(c) => write!(f, "\"{c}\" is not a Crockford base32 symbol"),
            PublicError::Check => write!(
                f,
                "its check symbol does not match: a symbol is mistyped or two are swapped"
            ),
            PublicError::Range => write!(f, "it is outside the range of public IDs"),
            PublicError::UnknownVersion(v) => write!(
                f,
                "it was made with key version {v}, which is not among the configured keys"
            ),
        }
    }
}

impl PublicKeys {
    /// Parse entries `VERSION:HEX`, one per line or separated by commas
    /// (blank lines and lines starting with `#` are skipped): a version
    /// from 0 to 31 and an AES-256 key of 64 hex digits. The first entry
    /// encodes; all decode. `None` when there is no entry.
    pub fn parse(text: &str) -> Result<Option<PublicKeys>, KeysError> {
        let entries: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.starts_with('#'))
            .flat_map(|l| l.split(','))
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .collect();
        if entries.is_empty() {
            return Ok(None);
        }
        let mut keys = Vec::new();
        for (i, entry) in entries.into_iter().enumerate() {
            let n = i + 1;
            let (v, hex) = entry.trim().split_once(':').ok_or(KeysError::Entry(n))?;
            let version: u8 = v.trim().parse().map_err(|_| KeysError::Entry(n))?;
            if version > 31 {
                return Err(KeysError::Version(n));
            }
            let hex = hex.trim().as_bytes();
            if hex.len() != 64 || !hex.iter().all(u8::is_ascii_hexdigit) {
                return Err(KeysError::Entry(n));
            }
            let mut key = [0u8; 32];
            for (k, pair) in key.iter_mut().zip(hex.chunks(2)) {
                *k = (hex_value(pair[0]) << 4) | hex_value(pair[1]);
            }
            if keys.iter().any(|k: &Key| k.version == version) {
                return Err(KeysError::Duplicate(version));
            }
            keys.push(Key {
                version,
                cipher: Aes256::new(&key.into()),
            });
        }
        Ok(Some(PublicKeys { keys }))
    }

    /// The version that encodes.
    pub fn current_version(&self) -> u8 {
        self.keys[0].version
    }

    /// The public form of `id` under the current key and `domain`.
    pub fn encode(&self, id: i64, domain: &[u8]) -> String {
        let key = &self.keys[0];
        let ct = ff1_encrypt(&key.cipher, domain, id as u64);
        let mut symbols = [0u8; PUBLIC_LEN];
        symbols[0] = key.version;
        for (i, s) in symbols[1..14].iter_mut().enumerate() {
            *s = ((ct >> (60 - 5 * i as u32)) & 31) as u8;
        }
        symbols[14] = check_symbol(&symbols[..14]);
        symbols
            .iter()
            .map(|&s| ALPHABET[s as usize] as char)
            .collect()
    }

    /// The ID of a public form made under `domain` with any configured key.
    pub fn decode(&self, text: &str, domain: &[u8]) -> Result<i64, PublicError> {
        let symbols = parse_symbols(text)?;
        let version = symbols[0];
        if symbols[1] > 15 {
            return Err(PublicError::Range);
        }
        let ct = symbols[1..14]
            .iter()
            .fold(0u64, |acc, &s| (acc << 5) | u64::from(s));
        let key = self
            .keys
            .iter()
            .find(|k| k.version == version)
            .ok_or(PublicError::UnknownVersion(version))?;
        Ok(ff1_decrypt(&key.cipher, domain, ct) as i64)
    }
}

fn hex_value(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

/// The symbol values of a public ID's text, case-insensitive, with
/// Crockford's readings of I and L as 1 and O as 0; checked.
fn parse_symbols(text: &str) -> Result<[u8; PUBLIC_LEN], PublicError> {
    let n = text.chars().count();
    if n != PUBLIC_LEN {
        return Err(PublicError::Length(n));
    }
    let mut symbols = [0u8; PUBLIC_LEN];
    for (s, c) in symbols.iter_mut().zip(text.chars()) {
        let value = u8::try_from(c).ok().and_then(symbol_value);
        *s = value.ok_or(PublicError::Symbol(c))? as u8;
    }
    if check_symbol(&symbols[..14]) != symbols[14] {
        return Err(PublicError::Check);
    }
    Ok(symbols)
}

/// Multiplication in GF(32) = GF(2)[x] / (x^5 + x^2 + 1).
fn gf32_mul(mut a: u8, mut b: u8) -> u8 {
    let mut p = 0;
    while b != 0 {
        if b & 1 != 0 {
            p ^= a;
        }
        b >>= 1;
        a <<= 1;
        if a & 32 != 0 {
            a ^= 0b100101;
        }
    }
    p
}

/// The check symbol c of `symbols` (s_1 .. s_k): the one that makes
/// sum(s_i * x^(k+1-i)) + c = 0 in GF(32). A changed symbol changes the sum
/// by a nonzero multiple of a power of x; swapping adjacent s, t changes it
/// by (x + 1)(s + t) x^j, nonzero when s != t.
fn check_symbol(symbols: &[u8]) -> u8 {
    let acc = symbols.iter().fold(0u8, |acc, &s| gf32_mul(acc, 2) ^ s);
    gf32_mul(acc, 2)
}

/// FF1's P block for radix 2, u = 32, n = 64 and a tweak of `t` bytes.
fn p_block(t: usize) -> [u8; 16] {
    let mut p = [1, 2, 1, 0, 0, 2, 10, 32, 0, 0, 0, 64, 0, 0, 0, 0];
    p[12..16].copy_from_slice(&(t as u32).to_be_bytes());
    p
}

/// The CBC-MAC state after P and every block of Q but the last, and the
/// last block of Q with its round number and numeral left zero (at bytes
/// 11 and 12..16): FF1 step 6.ii for b = 4.
fn prf_prefix(cipher: &Aes256, tweak: &[u8]) -> ([u8; 16], [u8; 16]) {
    let t = tweak.len();
    // Q = T || 0^((-t-b-1) mod 16) || [i] || [NUM(B)]^4, a multiple of 16.
    let pad = (16 - (t + 5) % 16) % 16;
    let q_len = t + pad + 5;
    let mut q = vec![0u8; q_len];
    q[..t].copy_from_slice(tweak);
    let mut state = p_block(t);
    encrypt(cipher, &mut state);
    for block in q[..q_len - 16].chunks(16) {
        xor_into(&mut state, block);
        encrypt(cipher, &mut state);
    }
    let mut last = [0u8; 16];
    last.copy_from_slice(&q[q_len - 16..]);
    (state, last)
}

fn encrypt(cipher: &Aes256, block: &mut [u8; 16]) {
    let b: &mut aes::Block = block.into();
    cipher.encrypt_block(b);
}

fn xor_into(a: &mut [u8; 16], b: &[u8]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x ^= y;
    }
}

/// y of round `i` with B = `b`: the first d = 8 bytes of
/// PRF(P || Q), as a big-endian integer.
fn round_value(cipher: &Aes256, state: &[u8; 16], last: &[u8; 16], i: u8, b: u32) -> u32 {
    let mut block = *last;
    block[11] = i;
    block[12..16].copy_from_slice(&b.to_be_bytes());
    xor_into(&mut block, state);
    encrypt(cipher, &mut block);
    // (A + y) mod 2^32 only needs y mod 2^32: bytes 4..8 of S.
    u32::from_be_bytes([block[4], block[5], block[6], block[7]])
}

/// FF1.Encrypt(K, T, X) for radix 2 and n = 64, X being the bits of `x`
/// from the most significant: A is the high half, B the low.
pub fn ff1_encrypt(cipher: &Aes256, tweak: &[u8], x: u64) -> u64 {
    let (state, last) = prf_prefix(cipher, tweak);
    let (mut a, mut b) = ((x >> 32) as u32, x as u32);
    for i in 0..10u8 {
        let c = a.wrapping_add(round_value(cipher, &state, &last, i, b));
        a = b;
        b = c;
    }
    (u64::from(a) << 32) | u64::from(b)
}

/// FF1.Decrypt(K, T, Y) for radix 2 and n = 64.
pub fn ff1_decrypt(cipher: &Aes256, tweak: &[u8], y: u64) -> u64 {
    let (state, last) = prf_prefix(cipher, tweak);
    let (mut a, mut b) = ((y >> 32) as u32, y as u32);
    for i in (0..10u8).rev() {
        let c = b.wrapping_sub(round_value(cipher, &state, &last, i, a));
        b = a;
        a = c;
    }
    (u64::from(a) << 32) | u64::from(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fpe::ff1::{BinaryNumeralString, FlexibleNumeralString, FF1};

    const KEY1: &str = "1:2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94";
    const KEY2: &str = "2:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    fn keys(text: &str) -> PublicKeys {
        PublicKeys::parse(text).unwrap().unwrap()
    }

    fn cipher_of(text: &str) -> Aes256 {
        keys(text).keys[0].cipher.clone()
    }

    /// A small deterministic generator for test inputs.
    fn splitmix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The oracle: the `fpe` crate's general FF1 checked against NIST's
    /// sample vectors (`nist_samples_through_the_oracle`).
    fn oracle(key: &[u8], tweak: &[u8], x: u64) -> u64 {
        let ff = FF1::<aes::Aes256>::new(key, 2).unwrap();
        // fpe's binary numeral string takes bits least significant first;
        // ours reads them most significant first.
        let pt = BinaryNumeralString::from_bytes_le(&x.reverse_bits().to_le_bytes());
        let ct = ff.encrypt(tweak, &pt).unwrap().to_bytes_le();
        u64::from_le_bytes(ct.try_into().unwrap()).reverse_bits()
    }

    #[test]
    fn nist_samples_through_the_oracle() {
        // NIST SP 800-38G FF1 samples 7 to 9 (AES-256), from the CSRC
        // "Examples with Intermediate Values" (FF1samples.pdf).
        let key = hex("2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94");
        let digits = |s: &str| -> Vec<u16> {
            s.bytes()
                .map(|b| (b as char).to_digit(36).unwrap() as u16)
                .collect()
        };
        for (radix, tweak, pt, ct) in [
            (10, "", "0123456789", "6657667009"),
            (10, "39383736353433323130", "0123456789", "1001623463"),
            (
                36,
                "3737373770717273373737",
                "0123456789abcdefghi",
                "xs8a0azh2avyalyzuwd",
            ),
        ] {
            let ff = FF1::<aes::Aes256>::new(&key, radix).unwrap();
            let out: Vec<u16> = ff
                .encrypt(&hex(tweak), &FlexibleNumeralString::from(digits(pt)))
                .unwrap()
                .into();
            assert_eq!(out, digits(ct), "sample with radix {radix}, tweak {tweak}");
        }
    }

    #[test]
    fn agrees_with_the_general_ff1() {
        let mut s = 7;
        for case in 0..300 {
            let mut key = [0u8; 32];
            for k in key.chunks_mut(8) {
                k.copy_from_slice(&splitmix(&mut s).to_le_bytes());
            }
            // Tweaks of every length up to 40 bytes: one to four blocks of Q.
            let tweak: Vec<u8> = (0..case % 41).map(|_| splitmix(&mut s) as u8).collect();
            let x = match case % 5 {
                0 => 0,
                1 => u64::MAX,
                2 => i64::MAX as u64,
                _ => splitmix(&mut s),
            };
            let cipher = Aes256::new(&key.into());
            let ours = ff1_encrypt(&cipher, &tweak, x);
            assert_eq!(ours, oracle(&key, &tweak, x), "case {case}");
            assert_eq!(ff1_decrypt(&cipher, &tweak, ours), x);
        }
    }

    #[test]
    fn known_answers() {
        // Pinned: also in tests/regress/sql/public_ids.sql.
        let k = keys(KEY1);
        assert_eq!(k.encode(0, b""), "1DQSYMPVFE544GX");
        assert_eq!(k.encode(1, b""), "11MQ8XT7QMEMGYV");
        assert_eq!(
            k.encode(383_465_699_634_401_301, b"orders"),
            "16DDKKXRJE6YAHJ"
        );
        assert_eq!(
            k.encode(383_465_699_634_401_301, b"users"),
            "111K8ZKY4T1JBP7"
        );
        assert_eq!(k.encode(i64::MAX, b""), "1DAVWHK9NJ5406D");
        assert_eq!(k.encode(-1, b""), "17YD2TCBM988G4J");
    }

    #[test]
    fn round_trips_at_the_edges_and_over_a_million_consecutive_ids() {
        let k = keys(&format!("{KEY2},{KEY1}"));
        for id in [0, 1, 2, i64::MAX, i64::MAX - 1, i64::MIN, -1, 1 << 62] {
            for domain in [&b""[..], b"orders", &[0xffu8; 40][..]] {
                let p = k.encode(id, domain);
                assert_eq!(p.len(), PUBLIC_LEN);
                assert!(p.starts_with('2'), "the first key encodes");
                assert_eq!(k.decode(&p, domain), Ok(id));
                assert_eq!(k.decode(&p.to_ascii_lowercase(), domain), Ok(id));
            }
        }
        let start = 383_465_699_634_401_301i64;
        for id in start..start + 1_000_000 {
            assert_eq!(k.decode(&k.encode(id, b"orders"), b"orders"), Ok(id));
        }
    }

    /// Over 1M consecutive IDs: each output bit set in 50% +- 0.5%, no rank
    /// correlation between IDs and outputs (|Spearman rho| < 0.01), no two
    /// equal outputs.
    #[test]
    fn statistics_of_a_million_consecutive_ids() {
        const N: usize = 1_000_000;
        let cipher = cipher_of(KEY1);
        let start = 383_465_699_634_401_301u64;
        let out: Vec<u64> = (0..N as u64)
            .map(|i| ff1_encrypt(&cipher, b"orders", start + i))
            .collect();
        for bit in 0..64 {
            let set = out.iter().filter(|&&o| o >> bit & 1 == 1).count() as f64 / N as f64;
            assert!(
                (set - 0.5).abs() < 0.005,
                "bit {bit} is set in {:.4} of the outputs",
                set
            );
        }
        // Ranks of the outputs; the IDs' ranks are 0..N in order.
        let mut order: Vec<usize> = (0..N).collect();
        order.sort_unstable_by_key(|&i| out[i]);
        let mut sum_d2 = 0f64;
        for (rank, &i) in order.iter().enumerate() {
            let d = rank as f64 - i as f64;
            sum_d2 += d * d;
        }
        let n = N as f64;
        let rho = 1.0 - 6.0 * sum_d2 / (n * (n * n - 1.0));
        assert!(rho.abs() < 0.01, "Spearman rho {rho}");
        let mut sorted = out.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), N, "two IDs share a public form");
    }

    /// Outputs of the same IDs under two domains, or two keys, agree in
    /// about half their bits, as unrelated values do.
    #[test]
    fn domains_and_keys_are_isolated() {
        let (k1, k2) = (cipher_of(KEY1), cipher_of(KEY2));
        let n = 100_000u64;
        let mut same_domain_bits = 0u64;
        let mut same_key_bits = 0u64;
        for id in 0..n {
            let a = ff1_encrypt(&k1, b"orders", id);
            same_domain_bits += u64::from((a ^ ff1_encrypt(&k1, b"users", id)).count_zeros());
            same_key_bits += u64::from((a ^ ff1_encrypt(&k2, b"orders", id)).count_zeros());
        }
        for agree in [same_domain_bits, same_key_bits] {
            let share = agree as f64 / (64 * n) as f64;
            assert!(
                (share - 0.5).abs() < 0.005,
                "outputs agree in {share:.4} of their bits"
            );
        }
    }

    #[test]
    fn every_single_error_and_adjacent_swap_is_refused() {
        let k = keys(KEY1);
        let mut s = 3;
        for _ in 0..200 {
            let id = splitmix(&mut s) as i64;
            let p: Vec<u8> = k.encode(id, b"t").into_bytes();
            for i in 0..PUBLIC_LEN {
                for &c in ALPHABET.iter() {
                    if c != p[i] {
                        let mut q = p.clone();
                        q[i] = c;
                        let r = k.decode(std::str::from_utf8(&q).unwrap(), b"t");
                        assert!(
                            r == Err(PublicError::Check),
                            "{} -> {:?}",
                            String::from_utf8_lossy(&q),
                            r
                        );
                    }
                }
                if i + 1 < PUBLIC_LEN && p[i] != p[i + 1] {
                    let mut q = p.clone();
                    q.swap(i, i + 1);
                    assert_eq!(
                        k.decode(std::str::from_utf8(&q).unwrap(), b"t"),
                        Err(PublicError::Check)
                    );
                }
            }
        }
    }

    #[test]
    fn refusals() {
        let k = keys(KEY1);
        let p = k.encode(42, b"");
        assert_eq!(k.decode(&p[1..], b""), Err(PublicError::Length(14)));
        assert_eq!(
            k.decode(&format!("{p}0"), b""),
            Err(PublicError::Length(16))
        );
        assert_eq!(
            k.decode("1PH1X9DMZJKQ1G*", b""),
            Err(PublicError::Symbol('*'))
        );
        assert_eq!(
            k.decode("1UH1X9DMZJKQ1G3", b""),
            Err(PublicError::Symbol('U'))
        );
        // Made with version 2, which is not configured.
        let p2 = keys(KEY2).encode(42, b"");
        assert_eq!(k.decode(&p2, b""), Err(PublicError::UnknownVersion(2)));
        // Rotation: the new key encodes, the old one still decodes.
        let rotated = keys(&format!("{KEY2}, {KEY1}"));
        assert_eq!(rotated.decode(&p, b""), Ok(42));
        assert_eq!(rotated.current_version(), 2);
        // A first ciphertext symbol above 15 is outside the range.
        let mut sym = parse_symbols(&p).unwrap();
        sym[1] = 16;
        sym[14] = check_symbol(&sym[..14]);
        let text: String = sym.iter().map(|&s| ALPHABET[s as usize] as char).collect();
        assert_eq!(k.decode(&text, b""), Err(PublicError::Range));
    }

    #[test]
    fn key_syntax() {
        assert!(PublicKeys::parse("").unwrap().is_none());
        assert!(PublicKeys::parse("  ").unwrap().is_none());
        assert!(PublicKeys::parse("# no key yet\n\n").unwrap().is_none());
        let file = format!("# rotated 2026-11-24\n{KEY2}\n\n# old\n{KEY1}\n");
        let k = PublicKeys::parse(&file).unwrap().unwrap();
        assert_eq!(k.current_version(), 2);
        assert_eq!(k.decode(&keys(KEY1).encode(7, b""), b""), Ok(7));
        assert_eq!(PublicKeys::parse("1:abc").err(), Some(KeysError::Entry(1)));
        assert_eq!(
            PublicKeys::parse(&format!("{KEY1},x")).err(),
            Some(KeysError::Entry(2))
        );
        assert_eq!(
            PublicKeys::parse(&format!("32:{}", &KEY1[2..])).err(),
            Some(KeysError::Version(1))
        );
        assert_eq!(
            PublicKeys::parse(&format!("{KEY1},{KEY1}")).err(),
            Some(KeysError::Duplicate(1))
        );
        // No message carries key material.
        for e in [
            KeysError::Entry(1),
            KeysError::Version(2),
            KeysError::Duplicate(3),
        ] {
            assert!(!e.to_string().contains("2b7e"));
        }
    }
}
