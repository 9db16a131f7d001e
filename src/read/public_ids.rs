//! Public IDs: `snowflake_to_public` and `snowflake_from_public`, the keyed,
//! reversible form of an ID to show users (core: `snowflake_id_core::public`).
//!
//! The keys are in a file, not in a setting: PostgreSQL logs a setting's
//! new value when a reload changes it, and ALTER SYSTEM puts it in the
//! statement log. The file is `$PGDATA/snowflake_id.public_keys`, or the
//! one `snowflake_id.public_keys_file` names (set at server start, an
//! absolute path outside the data directory): a base backup, which a role
//! with REPLICATION may take, copies every file of the data directory, and
//! a member of pg_write_server_files may write any file the server may.
//! Only the server's OS user and superusers (or members of
//! pg_read_server_files) can read the file. Each backend reads it again
//! when its modification time, size or inode changed, checked at most once
//! per transaction, so a new file takes effect without a reload.

use crate::datadir::{self, PUBLIC_KEYS_FILE};
use crate::{errors, gucs};
use pgrx::pg_sys;
use pgrx::prelude::*;
use snowflake_id_core::public::PublicKeys;
use std::cell::RefCell;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// What identifies a version of the keys file.
#[derive(PartialEq, Eq, Clone, Copy)]
struct Stamp {
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

struct Cache {
    /// The transaction that last looked at the file.
    xact_start: pg_sys::TimestampTz,
    stamp: Option<Stamp>,
    keys: Option<PublicKeys>,
}

thread_local! {
    static CACHE: RefCell<Option<Cache>> = const { RefCell::new(None) };
}

/// Run `f` with the configured keys, or raise 55000.
fn with_keys<T>(f: impl FnOnce(&PublicKeys) -> T) -> T {
    // SAFETY: reads this backend's transaction start time.
    let xact_start = unsafe { pg_sys::GetCurrentTransactionStartTimestamp() };
    let result = CACHE.with(|cell| {
        let mut cache = cell.borrow_mut();
        if cache.as_ref().is_none_or(|c| c.xact_start != xact_start) {
            refresh(&mut cache, xact_start);
        }
        cache.as_ref().and_then(|c| c.keys.as_ref()).map(f)
    });
    result.unwrap_or_else(|| errors::no_public_keys(&keys_file().1))
}

/// The keys file, and how messages name it: never by its full path
/// (plain roles see the messages; the setting is for superusers).
fn keys_file() -> (PathBuf, String) {
    match gucs::public_keys_file() {
        Some(path) => {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (
                path,
                format!("\"{name}\" named by snowflake_id.public_keys_file"),
            )
        }
        None => (
            datadir::public_keys_path(),
            format!("\"{PUBLIC_KEYS_FILE}\" of the data directory"),
        ),
    }
}

/// Read the keys file again if it changed since this backend last read it.
fn refresh(cache: &mut Option<Cache>, xact_start: pg_sys::TimestampTz) {
    let (path, shown) = keys_file();
    let shown = shown.as_str();
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            *cache = Some(Cache {
                xact_start,
                stamp: None,
                keys: None,
            });
            return;
        }
        Err(e) => errors::public_keys_unreadable(shown, &e.to_string()),
    };
    if meta.mode() & 0o007 != 0 {
        errors::public_keys_exposed(shown);
    }
    let stamp = Stamp {
        ino: meta.ino(),
        size: meta.size(),
        mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
    };
    if let Some(c) = cache.as_mut() {
        if c.stamp == Some(stamp) {
            c.xact_start = xact_start;
            return;
        }
    }
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| errors::public_keys_unreadable(shown, &e.to_string()));
    let keys =
        PublicKeys::parse(&text).unwrap_or_else(|e| errors::bad_public_keys(shown, &e.to_string()));
    *cache = Some(Cache {
        xact_start,
        stamp: Some(stamp),
        keys,
    });
}

/// The public form of `id`: 15 Crockford base32 symbols that reveal
/// nothing about the ID (not its time, worker or sequence, nor its
/// neighbours) without the server's key. FF1 (NIST SP 800-38G) with
/// AES-256 under the first key of `$PGDATA/snowflake_id.public_keys` (or
/// of the file `snowflake_id.public_keys_file` names, outside the data
/// directory);
/// `domain` is the cipher's tweak, so that the same number gets unrelated
/// public forms in different domains (tables). Public forms do not sort
/// like the IDs. No key configured: 55000. STABLE (the keys can change
/// between transactions), STRICT, PARALLEL SAFE.
///
/// ```sql
/// SELECT snowflake_to_public(id, 'orders') AS public_id FROM orders LIMIT 1;
/// --   public_id
/// -- 16DDKKXRJE6YAHJ
/// ```
#[pg_extern(stable, strict, parallel_safe)]
pub fn snowflake_to_public(id: i64, domain: default!(&str, "''")) -> String {
    with_keys(|keys| keys.encode(id, domain.as_bytes()))
}

/// The ID of a public form made by `snowflake_to_public(id, domain)` with
/// any key still in the keys file. Case-insensitive. A mistyped symbol or
/// two swapped neighbours fail the check symbol, and a form made with a
/// key no longer configured is refused: 22P02, with a DETAIL. A lookup is
/// a primary-key index scan:
///
/// ```sql
/// SELECT * FROM orders WHERE id = snowflake_from_public('16DDKKXRJE6YAHJ', 'orders');
/// ```
#[pg_extern(stable, strict, parallel_safe)]
pub fn snowflake_from_public(public: &str, domain: default!(&str, "''")) -> i64 {
    with_keys(|keys| keys.decode(public, domain.as_bytes()))
        .unwrap_or_else(|e| errors::invalid_public_id(public, &e.to_string()))
}
