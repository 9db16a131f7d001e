//! The state file in the data directory, `$PGDATA/snowflake_id.state`:
//! its path, PostgreSQL's file mode for it, and reading and writing it.
//! Used by [`crate::mint::reservation`] (start-up and renewals) and [`crate::mint::wal`]
//! (redo), which therefore do not depend on each other for it.

use pgrx::pg_sys;
use snowflake_id_core::{StateError, StateFile};
use std::ffi::CStr;
use std::path::PathBuf;

fn data_dir() -> PathBuf {
    // SAFETY: DataDir is set before any library is loaded.
    unsafe {
        PathBuf::from(
            CStr::from_ptr(pg_sys::DataDir)
                .to_string_lossy()
                .into_owned(),
        )
    }
}

/// The keys of public IDs: `$PGDATA/snowflake_id.public_keys`
/// (src/read/public_ids.rs).
pub fn public_keys_path() -> PathBuf {
    data_dir().join(PUBLIC_KEYS_FILE)
}

/// The keys file's name in the data directory.
pub const PUBLIC_KEYS_FILE: &str = "snowflake_id.public_keys";

/// The state file's path, for messages.
pub fn state_path() -> String {
    data_dir()
        .join(snowflake_id_core::state_file::FILE_NAME)
        .display()
        .to_string()
}

/// PostgreSQL's file mode: 0600, or 0640 when the data directory allows
/// group access (`data_directory_mode` 0750).
fn file_mode() -> u32 {
    // SAFETY: GetConfigOption returns a valid string for a built-in GUC.
    let dir_mode = unsafe {
        let p = pg_sys::GetConfigOption(c"data_directory_mode".as_ptr(), true, false);
        if p.is_null() {
            0o700
        } else {
            u32::from_str_radix(CStr::from_ptr(p).to_string_lossy().trim(), 8).unwrap_or(0o700)
        }
    };
    if dir_mode & 0o050 == 0o050 {
        0o640
    } else {
        0o600
    }
}

/// This cluster's system identifier (`pg_control_system()`), recorded in
/// the state file so that a file from another cluster is recognised.
pub fn system_identifier() -> u64 {
    // SAFETY: the control file is read before libraries are preloaded and
    // before any backend starts.
    unsafe { pg_sys::GetSystemIdentifier() }
}

/// Read the state file: `Ok(None)` when there is none.
pub fn load() -> Result<Option<StateFile>, StateError> {
    StateFile::load(&data_dir())
}

/// Whether this server starts as a standby (`standby.signal`).
pub fn standby_signal() -> bool {
    data_dir().join("standby.signal").exists()
}

/// Whether the state file is there (readable or not).
pub fn exists() -> bool {
    data_dir()
        .join(snowflake_id_core::state_file::FILE_NAME)
        .exists()
}

/// Write the state file durably, with PostgreSQL's file mode.
pub fn store(file: &StateFile) -> std::io::Result<()> {
    file.store_observed(&data_dir(), file_mode(), |step| match step {
        snowflake_id_core::StoreStep::Written => crate::failpoint!("state-file-written"),
        snowflake_id_core::StoreStep::Synced => crate::failpoint!("state-file-synced"),
        snowflake_id_core::StoreStep::Renamed => crate::failpoint!("state-file-renamed"),
        snowflake_id_core::StoreStep::DirectorySynced => {}
    })
}
