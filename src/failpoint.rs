//! Named failure points at the steps that make an ID durable (issue 55):
//! `failpoint!("name")` crashes the process there (SIGABRT, as a crash
//! would end it) when the test that armed it asked for that name.
//!
//! Compiled only with the cargo feature `failpoints` (test builds,
//! `tests/integration/crashpoints.sh`); in every other build the macro
//! expands to nothing, so the release build carries no check at all.
//!
//! A point is armed by writing its name into `$PGDATA/snowflake_id.failpoint`;
//! the first process that reaches it removes the file and aborts, so a
//! crash restart does not crash again. `name sleep=MS` makes the step
//! slow instead.

/// Crash here if the test armed `name`; or, armed as `name sleep=MS`,
/// sleep that long here (every process that reaches it, until the test
/// removes the file): a slow step, not a failed one.
#[cfg(feature = "failpoints")]
pub fn hit(name: &str) {
    // SAFETY: DataDir is set for the life of every server process.
    let dir = unsafe { std::ffi::CStr::from_ptr(pgrx::pg_sys::DataDir) };
    let path = std::path::Path::new(dir.to_str().unwrap_or(".")).join("snowflake_id.failpoint");
    let Ok(armed) = std::fs::read_to_string(&path) else {
        return;
    };
    let mut words = armed.split_whitespace();
    if words.next() != Some(name) {
        return;
    }
    if let Some(ms) = words.next().and_then(|w| w.strip_prefix("sleep=")) {
        let ms = ms.parse().unwrap_or(0);
        std::thread::sleep(std::time::Duration::from_millis(ms));
        return;
    }
    if std::fs::remove_file(&path).is_ok() {
        eprintln!("snowflake_id: failure point \"{name}\" reached: crashing");
        std::process::abort();
    }
}

/// `failpoint!("name")`: see the module documentation.
#[macro_export]
macro_rules! failpoint {
    ($name:literal) => {{
        #[cfg(feature = "failpoints")]
        $crate::failpoint::hit($name);
    }};
}
