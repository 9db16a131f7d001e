//! Parsing and formatting of the `snowflake_id.epoch` setting.
//!
//! Accepted forms (surrounding blanks ignored):
//! - an integer: milliseconds since 1970-01-01 00:00:00 UTC, e.g. `1704067200000`;
//! - `YYYY-MM-DD`, meaning midnight UTC;
//! - `YYYY-MM-DD HH:MM[:SS[.fff]]` (a `T` may replace the blank), optionally
//!   followed by a zone: `Z`, `UTC`, `+HH`, `+HHMM` or `+HH:MM` (or `-`).
//!   Without a zone the time is UTC, never the server's `TimeZone`, so the
//!   setting means the same on every node.
//!
//! At most millisecond precision is accepted. The canonical output form is
//! `YYYY-MM-DD HH:MM:SS.mmm+00`.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochError(pub String);

impl fmt::Display for EpochError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, EpochError> {
    Err(EpochError(msg.into()))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Inverse of [`days_from_civil`].
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

struct Cursor<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn digits(&mut self, n: usize, what: &str) -> Result<u32, EpochError> {
        let end = self.pos + n;
        if end > self.s.len() || !self.s[self.pos..end].iter().all(u8::is_ascii_digit) {
            return err(format!("expected {n} digits for the {what}"));
        }
        let v = self.s[self.pos..end]
            .iter()
            .fold(0u32, |a, c| a * 10 + (c - b'0') as u32);
        self.pos = end;
        Ok(v)
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.s.get(self.pos) == Some(&c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn done(&self) -> bool {
        self.pos == self.s.len()
    }
}

/// Parse an epoch setting into Unix milliseconds.
pub fn parse_epoch(input: &str) -> Result<i64, EpochError> {
    let s = input.trim();
    if s.is_empty() {
        return err("the epoch must not be empty");
    }
    if s.bytes().all(|c| c.is_ascii_digit()) {
        return s
            .parse::<i64>()
            .or_else(|_| err("the epoch in milliseconds is too large"));
    }
    let mut c = Cursor {
        s: s.as_bytes(),
        pos: 0,
    };
    let year = c.digits(4, "year")? as i64;
    if !c.eat(b'-') {
        return err("expected YYYY-MM-DD");
    }
    let month = c.digits(2, "month")?;
    if !c.eat(b'-') {
        return err("expected YYYY-MM-DD");
    }
    let day = c.digits(2, "day")?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return err(format!("{year:04}-{month:02}-{day:02} is not a valid date"));
    }
    let (mut h, mut mi, mut sec, mut ms) = (0u32, 0u32, 0u32, 0u32);
    let mut offset_min: i64 = 0;
    if !c.done() {
        if !(c.eat(b' ') || c.eat(b'T') || c.eat(b't')) {
            return err("expected a blank or T between date and time");
        }
        h = c.digits(2, "hour")?;
        if !c.eat(b':') {
            return err("expected HH:MM");
        }
        mi = c.digits(2, "minute")?;
        if c.eat(b':') {
            sec = c.digits(2, "second")?;
            if c.eat(b'.') {
                let start = c.pos;
                while c.pos < c.s.len() && c.s[c.pos].is_ascii_digit() {
                    c.pos += 1;
                }
                let frac = &s[start..c.pos];
                if frac.is_empty() || frac.len() > 3 {
                    return err(
                        "fractional seconds must have 1 to 3 digits (millisecond precision)",
                    );
                }
                ms = format!("{frac:0<3}").parse().expect("digits");
            }
        }
        if h > 23 || mi > 59 || sec > 59 {
            return err(format!("{h:02}:{mi:02}:{sec:02} is not a valid time"));
        }
        // Optional zone.
        let rest = s[c.pos..].trim_start();
        c.pos = c.s.len() - rest.len();
        if rest.eq_ignore_ascii_case("z") || rest.eq_ignore_ascii_case("utc") {
            c.pos = c.s.len();
        } else if let Some(sign) = rest.bytes().next().filter(|b| *b == b'+' || *b == b'-') {
            c.pos += 1;
            let oh = c.digits(2, "zone hour")?;
            let mut om = 0;
            if !c.done() {
                c.eat(b':');
                om = c.digits(2, "zone minute")?;
            }
            if oh > 15 || om > 59 {
                return err("zone offset out of range");
            }
            offset_min = (oh * 60 + om) as i64 * if sign == b'-' { -1 } else { 1 };
        }
        if !c.done() {
            return err(format!("unexpected trailing text \"{}\"", &s[c.pos..]));
        }
    }
    let days = days_from_civil(year, month, day);
    let local_ms =
        ((days * 24 + h as i64) * 60 + mi as i64) * 60_000 + sec as i64 * 1000 + ms as i64;
    Ok(local_ms - offset_min * 60_000)
}

/// Format Unix milliseconds as `YYYY-MM-DD HH:MM:SS.mmm+00`.
pub fn format_epoch(unix_ms: i64) -> String {
    let days = unix_ms.div_euclid(86_400_000);
    let rem = unix_ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let (h, rem) = (rem / 3_600_000, rem % 3_600_000);
    let (mi, rem) = (rem / 60_000, rem % 60_000);
    let (s, ms) = (rem / 1000, rem % 1000);
    format!("{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02}.{ms:03}+00")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_forms() {
        let jan1 = 1_704_067_200_000;
        for s in [
            "2024-01-01",
            "2024-01-01 00:00:00+00",
            "2024-01-01 00:00:00+00:00",
            "2024-01-01T00:00:00Z",
            "2024-01-01 00:00",
            "2024-01-01 00:00:00.000",
            "  2024-01-01 00:00:00 UTC ",
            "2024-01-01 01:00:00+01",
            "2023-12-31 19:00:00-0500",
            "1704067200000",
        ] {
            assert_eq!(parse_epoch(s), Ok(jan1), "{s}");
        }
        assert_eq!(
            parse_epoch("2010-11-04 01:42:54.657Z"),
            Ok(1_288_834_974_657)
        );
        assert_eq!(parse_epoch("2015-01-01"), Ok(1_420_070_400_000));
        assert_eq!(parse_epoch("1970-01-01"), Ok(0));
        assert_eq!(parse_epoch("2024-02-29 12:00:00.5"), Ok(1_709_208_000_500));
    }

    #[test]
    fn rejected_forms() {
        for s in [
            "",
            "yesterday",
            "2024-13-01",
            "2023-02-29",
            "2024-01-01 24:00:00",
            "2024-01-01 00:00:00.0001",
            "2024-01-01 00:00:00 PST",
            "2024-01-01 00:00:00+16",
            "2024/01/01",
            "99999999999999999999999",
            "-5",
        ] {
            assert!(parse_epoch(s).is_err(), "{s} should be rejected");
        }
    }

    #[test]
    fn format_round_trips() {
        for ms in [0, 1_704_067_200_000, 1_288_834_974_657, 253_402_300_799_999] {
            let text = format_epoch(ms);
            assert_eq!(parse_epoch(&text), Ok(ms), "{text}");
        }
        assert_eq!(
            format_epoch(1_704_067_200_000),
            "2024-01-01 00:00:00.000+00"
        );
        for d in -800_000..800_000 {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
    }
}
