//! The durable high-water mark: a small text file in the data directory
//! recording the configuration and a *reservation*, a Unix millisecond up
//! to which this server may issue IDs. After any restart or crash the
//! generator continues strictly above the reservation, whatever the clock
//! says.
//!
//! Format (one `key=value` per line, then a checksum of everything above
//! it, FNV-1a 64 in hex):
//!
//! ```text
//! snowflake_id state 2
//! epoch_ms=1704067200000
//! worker_bits=10
//! sequence_bits=12
//! worker_id=42
//! reserved_until_ms=1763712000000
//! system_identifier=7441000217000000000
//! stopped_at_checkpoint=22817384
//! checksum=9c3f0c1d2e4b5a69
//! ```
//!
//! `stopped_at_checkpoint` (optional) is written at a clean stop, when no
//! process can mint any more: the LSN of the shutdown checkpoint, and the
//! reservation is then the last ID's millisecond. A start that finds the
//! same checkpoint in `pg_control` knows the file is the one its clean
//! stop wrote, not a stale copy.
//!
//! `system_identifier` is the PostgreSQL cluster's (`pg_control_system()`),
//! so that a file copied from another cluster is recognised as such.
//! Version 1 files (0.6.0 and earlier) have no such line; they are read
//! with `system_identifier: None`.
//!
//! Writes are crash-safe: write a temporary file, fsync it, rename it over
//! the old one, fsync the directory (what PostgreSQL's `durable_rename`
//! does).

use crate::layout::Layout;
use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

pub const FILE_NAME: &str = "snowflake_id.state";
const MAGIC_V1: &str = "snowflake_id state 1";
const MAGIC: &str = "snowflake_id state 2";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateFile {
    pub epoch_ms: i64,
    pub worker_bits: u32,
    pub sequence_bits: u32,
    pub worker_id: u64,
    /// IDs with timestamps up to and including this Unix millisecond may
    /// have been issued.
    pub reserved_until_ms: i64,
    /// The system identifier of the cluster that wrote the file; `None`
    /// for a version 1 file, which did not record it.
    pub system_identifier: Option<u64>,
    /// Written at a clean stop: the shutdown checkpoint's LSN.
    pub stopped_at_checkpoint: Option<u64>,
    /// What was pending when it was written (`crate::starts`): a line
    /// `pending=marks_unread,carry` where anything was, none otherwise.
    pub pending: crate::starts::Pending,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateError {
    /// The file exists but could not be read.
    Unreadable(String),
    /// The file's content is damaged or not ours.
    Corrupt(String),
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateError::Unreadable(m) => write!(f, "could not read state file: {m}"),
            StateError::Corrupt(m) => write!(f, "state file is corrupt: {m}"),
        }
    }
}

/// FNV-1a, 64 bits: detects torn or hand-edited files.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl StateFile {
    pub fn layout(&self) -> Option<Layout> {
        Layout::new(self.epoch_ms, self.worker_bits, self.sequence_bits).ok()
    }

    pub fn encode(&self) -> String {
        let mut body = format!(
            "{}\nepoch_ms={}\nworker_bits={}\nsequence_bits={}\nworker_id={}\nreserved_until_ms={}\n",
            if self.system_identifier.is_some() { MAGIC } else { MAGIC_V1 },
            self.epoch_ms,
            self.worker_bits,
            self.sequence_bits,
            self.worker_id,
            self.reserved_until_ms
        );
        if let Some(id) = self.system_identifier {
            body.push_str(&format!("system_identifier={id}\n"));
            if let Some(lsn) = self.stopped_at_checkpoint {
                body.push_str(&format!("stopped_at_checkpoint={lsn}\n"));
            }
            let p = self.pending;
            if p.marks_unread || p.carry {
                let names: Vec<&str> = [(p.marks_unread, "marks_unread"), (p.carry, "carry")]
                    .iter()
                    .filter(|(on, _)| *on)
                    .map(|(_, n)| *n)
                    .collect();
                body.push_str(&format!("pending={}\n", names.join(",")));
            }
        }
        let sum = fnv1a64(body.as_bytes());
        format!("{body}checksum={sum:016x}\n")
    }

    pub fn decode(text: &str) -> Result<StateFile, StateError> {
        let corrupt = |m: &str| Err(StateError::Corrupt(m.to_string()));
        let Some(pos) = text.rfind("checksum=") else {
            return corrupt("no checksum line");
        };
        let (body, tail) = text.split_at(pos);
        let sum = tail
            .trim_end()
            .strip_prefix("checksum=")
            .and_then(|h| u64::from_str_radix(h, 16).ok());
        if sum != Some(fnv1a64(body.as_bytes())) {
            return corrupt("checksum mismatch");
        }
        let mut lines = body.lines().peekable();
        let version = match lines.next() {
            Some(MAGIC_V1) => 1,
            Some(MAGIC) => 2,
            _ => return corrupt("unknown header"),
        };
        let mut get = |key: &str| -> Result<&str, StateError> {
            lines
                .next()
                .and_then(|l| l.strip_prefix(key))
                .and_then(|l| l.strip_prefix('='))
                .ok_or_else(|| StateError::Corrupt(format!("bad or missing {key}")))
        };
        fn num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, StateError> {
            v.parse::<T>()
                .map_err(|_| StateError::Corrupt(format!("bad or missing {key}")))
        }
        let s = StateFile {
            epoch_ms: num("epoch_ms", get("epoch_ms")?)?,
            worker_bits: num::<i64>("worker_bits", get("worker_bits")?)? as u32,
            sequence_bits: num::<i64>("sequence_bits", get("sequence_bits")?)? as u32,
            worker_id: num::<i64>("worker_id", get("worker_id")?)? as u64,
            reserved_until_ms: num("reserved_until_ms", get("reserved_until_ms")?)?,
            system_identifier: if version >= 2 {
                Some(num("system_identifier", get("system_identifier")?)?)
            } else {
                None
            },
            stopped_at_checkpoint: None,
            pending: crate::starts::Pending::NONE,
        };
        let mut s = s;
        if version >= 2 {
            if let Some(v) = lines
                .peek()
                .and_then(|l| l.strip_prefix("stopped_at_checkpoint="))
            {
                s.stopped_at_checkpoint = Some(num("stopped_at_checkpoint", v)?);
                lines.next();
            }
            if let Some(v) = lines.peek().and_then(|l| l.strip_prefix("pending=")) {
                for name in v.split(',') {
                    match name {
                        "marks_unread" => s.pending.marks_unread = true,
                        "carry" => s.pending.carry = true,
                        _ => return corrupt("bad pending"),
                    }
                }
                lines.next();
            }
        }
        if lines.next().is_some() {
            return corrupt("unexpected line");
        }
        if s.layout().is_none() {
            return corrupt("invalid layout");
        }
        Ok(s)
    }

    /// Read `dir/snowflake_id.state`: `Ok(None)` when there is none.
    pub fn load(dir: &Path) -> Result<Option<StateFile>, StateError> {
        match fs::read(dir.join(FILE_NAME)) {
            Ok(bytes) => {
                let text = String::from_utf8(bytes)
                    .map_err(|_| StateError::Corrupt("not UTF-8".into()))?;
                StateFile::decode(&text).map(Some)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StateError::Unreadable(e.to_string())),
        }
    }

    /// Write durably: temp file, fsync, rename, fsync the directory.
    /// `mode` is the permission of the new file (PostgreSQL's file mode).
    pub fn store(&self, dir: &Path, mode: u32) -> io::Result<()> {
        self.store_observed(dir, mode, |_| {})
    }

    /// [`StateFile::store`], calling `at` after each of its steps: the
    /// extension's test builds crash there (its named failure points).
    pub fn store_observed(
        &self,
        dir: &Path,
        mode: u32,
        mut at: impl FnMut(StoreStep),
    ) -> io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let tmp = dir.join(format!("{FILE_NAME}.tmp"));
        {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(mode)
                .open(&tmp)?;
            f.write_all(self.encode().as_bytes())?;
            at(StoreStep::Written);
            f.sync_all()?;
            at(StoreStep::Synced);
        }
        fs::rename(&tmp, dir.join(FILE_NAME))?;
        at(StoreStep::Renamed);
        fs::File::open(dir)?.sync_all()?;
        at(StoreStep::DirectorySynced);
        Ok(())
    }
}

/// The steps of a durable write of the state file, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreStep {
    /// The temporary file is written, not yet synced.
    Written,
    /// The temporary file is synced, not yet renamed.
    Synced,
    /// Renamed over the state file; the directory not yet synced.
    Renamed,
    /// The directory is synced: the write is durable.
    DirectorySynced,
}

/// How the configuration now relates to the one recorded in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Compatibility {
    Same,
    /// Different, but every ID the new configuration can mint above the
    /// reservation is larger than every ID the old one could have minted
    /// up to it. Carries a description of the change.
    SafeChange(String),
    /// A change that could mint IDs smaller than (or equal to) old ones.
    UnsafeChange(String),
}

/// Decide whether the server may continue under `layout`/`worker` after
/// having run under `old`.
///
/// The generator restarts strictly above the reservation `R`, so the
/// question is whether the smallest ID the new configuration can mint at
/// `R + 1 ms` exceeds the largest ID the old configuration could mint at
/// `R`. With the same layout that always holds (time is the most
/// significant field), so changing only the worker id is safe. An earlier
/// epoch with the same widths is safe too (offsets only grow). A later
/// epoch, or other field widths, usually are not, and are refused.
pub fn compatibility(old: &StateFile, layout: &Layout, worker: u64) -> Compatibility {
    let mut changes = vec![];
    if old.epoch_ms != layout.epoch_ms() {
        changes.push(format!(
            "epoch {} -> {}",
            crate::format_epoch(old.epoch_ms),
            crate::format_epoch(layout.epoch_ms())
        ));
    }
    if old.worker_bits != layout.worker_bits() || old.sequence_bits != layout.sequence_bits() {
        changes.push(format!(
            "worker_bits/sequence_bits {}/{} -> {}/{}",
            old.worker_bits,
            old.sequence_bits,
            layout.worker_bits(),
            layout.sequence_bits()
        ));
    }
    if old.worker_id != worker {
        changes.push(format!("worker_id {} -> {}", old.worker_id, worker));
    }
    if changes.is_empty() {
        return Compatibility::Same;
    }
    let what = changes.join(", ");
    let Some(old_layout) = old.layout() else {
        return Compatibility::UnsafeChange(what);
    };
    let old_max = old_layout.max_id(old.reserved_until_ms).unwrap_or(i64::MAX);
    match layout.min_id(old.reserved_until_ms.saturating_add(1)) {
        Ok(new_min) if new_min > old_max => Compatibility::SafeChange(what),
        _ => Compatibility::UnsafeChange(what),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> StateFile {
        StateFile {
            epoch_ms: Layout::DEFAULT_EPOCH_MS,
            worker_bits: 10,
            sequence_bits: 12,
            worker_id: 42,
            reserved_until_ms: 1_763_712_000_000,
            system_identifier: Some(7_441_000_217_000_000_000),
            stopped_at_checkpoint: None,
            pending: crate::starts::Pending::NONE,
        }
    }

    #[test]
    fn pending_work_round_trips_and_old_files_have_none() {
        let mut s = sample();
        s.stopped_at_checkpoint = Some(7);
        for (marks_unread, carry) in [(true, false), (false, true), (true, true)] {
            s.pending = crate::starts::Pending {
                marks_unread,
                carry,
            };
            assert_eq!(StateFile::decode(&s.encode()), Ok(s));
        }
        s.pending = crate::starts::Pending::NONE;
        assert!(!s.encode().contains("pending="));
        assert_eq!(StateFile::decode(&s.encode()), Ok(s));
    }

    #[test]
    fn encode_decode_round_trip() {
        let s = sample();
        assert_eq!(StateFile::decode(&s.encode()), Ok(s));
        assert!(s.encode().starts_with("snowflake_id state 2\n"));
        // A system identifier above i64::MAX survives.
        let big = StateFile {
            system_identifier: Some(u64::MAX),
            stopped_at_checkpoint: Some(u64::MAX),
            ..s
        };
        assert_eq!(StateFile::decode(&big.encode()), Ok(big));
    }

    #[test]
    fn version_1_files_are_read_without_a_system_identifier() {
        // Exactly what 0.6.0 wrote.
        let body = "snowflake_id state 1\nepoch_ms=1704067200000\nworker_bits=10\nsequence_bits=12\nworker_id=42\nreserved_until_ms=1763712000000\n";
        let text = format!("{body}checksum={:016x}\n", fnv1a64(body.as_bytes()));
        let s = StateFile::decode(&text).unwrap();
        assert_eq!(s.system_identifier, None);
        assert_eq!(s.reserved_until_ms, 1_763_712_000_000);
        assert_eq!(s.encode(), text);
        // A version 2 header with no system identifier is damage.
        let v2 = body.replace("state 1", "state 2");
        let text = format!("{v2}checksum={:016x}\n", fnv1a64(v2.as_bytes()));
        assert!(StateFile::decode(&text).is_err());
    }

    #[test]
    fn damage_is_detected() {
        let text = sample().encode();
        // Every single-byte change before the checksum is caught.
        for i in 0..text.rfind("checksum=").unwrap() {
            let mut b = text.clone().into_bytes();
            b[i] ^= 0x01;
            let t = String::from_utf8_lossy(&b).into_owned();
            assert!(StateFile::decode(&t).is_err(), "flip at {i} undetected");
        }
        assert!(StateFile::decode("").is_err());
        assert!(StateFile::decode(&text[..text.len() / 2]).is_err());
        assert!(StateFile::decode(&format!("{text}x")).is_err());
        assert!(StateFile::decode(&text.replace("checksum=", "checksum=g")).is_err());
    }

    #[test]
    fn store_and_load() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("sfid-state-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        assert_eq!(StateFile::load(&dir), Ok(None));
        let mut s = sample();
        s.store(&dir, 0o600).unwrap();
        assert_eq!(StateFile::load(&dir), Ok(Some(s)));
        s.reserved_until_ms += 5000;
        s.store(&dir, 0o600).unwrap();
        assert_eq!(StateFile::load(&dir), Ok(Some(s)));
        let mode = fs::metadata(dir.join(FILE_NAME))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!dir.join(format!("{FILE_NAME}.tmp")).exists());
        fs::write(dir.join(FILE_NAME), "garbage").unwrap();
        assert!(matches!(StateFile::load(&dir), Err(StateError::Corrupt(_))));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn compatibility_rules() {
        let old = sample();
        let same = Layout::default_layout();
        assert_eq!(compatibility(&old, &same, 42), Compatibility::Same);
        // Worker change only: the time field dominates, still larger.
        assert!(matches!(
            compatibility(&old, &same, 7),
            Compatibility::SafeChange(_)
        ));
        // An earlier epoch: offsets grow, still larger.
        let earlier = Layout::new(Layout::DEFAULT_EPOCH_MS - 86_400_000, 10, 12).unwrap();
        assert!(matches!(
            compatibility(&old, &earlier, 42),
            Compatibility::SafeChange(_)
        ));
        // A later epoch: offsets shrink, IDs could repeat.
        let later = Layout::new(Layout::DEFAULT_EPOCH_MS + 86_400_000, 10, 12).unwrap();
        assert!(matches!(
            compatibility(&old, &later, 42),
            Compatibility::UnsafeChange(_)
        ));
        // Fewer timestamp bits' worth of shift: smaller IDs.
        let narrow = Layout::new(Layout::DEFAULT_EPOCH_MS, 8, 10).unwrap();
        assert!(matches!(
            compatibility(&old, &narrow, 42),
            Compatibility::UnsafeChange(_)
        ));
        // More bits below the timestamp: larger IDs.
        let wide = Layout::new(Layout::DEFAULT_EPOCH_MS, 12, 12).unwrap();
        assert!(matches!(
            compatibility(&old, &wide, 42),
            Compatibility::SafeChange(_)
        ));
        // Later epoch plus a new worker id: refused, and both named.
        match compatibility(&old, &later, 9) {
            Compatibility::UnsafeChange(what) => {
                assert!(
                    what.contains("epoch") && what.contains("worker_id 42 -> 9"),
                    "{what}"
                )
            }
            other => panic!("{other:?}"),
        }
    }
}
