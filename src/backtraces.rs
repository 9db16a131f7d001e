//! Rust backtraces go to the server log, never to a client.
//!
//! pgrx captures a Rust backtrace whenever a PostgreSQL ERROR (a cancel, a
//! statement timeout) unwinds through our code, and when `RUST_BACKTRACE`
//! is set in the server's environment it appends that backtrace to the
//! DETAIL every client sees: addresses and paths of the server's binaries,
//! which are the server operator's business. [`keep_out_of_client_messages`]
//! turns pgrx's capture off (`RUST_LIB_BACKTRACE=0`, read by
//! `Backtrace::capture`), and where the operator asked for backtraces,
//! writes them to the server's stderr, which is its log, instead.

use std::backtrace::Backtrace;
use std::ffi::OsStr;

/// Call once from `_PG_init`, before any backtrace is captured: in the
/// postmaster (every backend inherits its environment) or in a backend
/// that loads the library on demand, single-threaded either way.
pub fn keep_out_of_client_messages() {
    let enabled = |v: &OsStr| v != "0";
    let wanted = match std::env::var_os("RUST_LIB_BACKTRACE") {
        Some(v) => enabled(&v),
        None => std::env::var_os("RUST_BACKTRACE").is_some_and(|v| enabled(&v)),
    };
    std::env::set_var("RUST_LIB_BACKTRACE", "0");
    if wanted {
        let pgrx_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            pgrx_hook(info);
            let at = info
                .location()
                .map_or_else(String::new, |l| format!(" at {}:{}", l.file(), l.line()));
            eprintln!(
                "snowflake_id: Rust backtrace{at} (RUST_BACKTRACE is set; it is never sent to clients):\n{}",
                Backtrace::force_capture()
            );
        }));
    }
}
