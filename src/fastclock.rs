//! The clock of `snowflake_nextval()`: the system clock, with most
//! wall-clock reads replaced by a time-stamp-counter check
//! ([`MillisCache`], one per backend) where that is safe: on x86-64, when
//! the CPU's TSC is invariant (`constant_tsc` and `nonstop_tsc`) and the
//! kernel itself uses it as its clock source, which it only does when the
//! TSC is synchronised across CPUs. Elsewhere every call reads the clock.
//!
//! `clock_gettime` costs about 30 ns on a VM, `rdtsc` about 12 ns; an ID
//! needs only the current millisecond. Real reads still happen at least
//! once per millisecond, so wall-clock steps (and libfaketime in the tests)
//! are seen within a millisecond.

use snowflake_id_core::{CachedClock, MillisCache, SystemClock, Tsc};
use std::sync::atomic::{AtomicBool, Ordering};

/// Decided in the postmaster (`_PG_init`), inherited by every backend.
static USABLE: AtomicBool = AtomicBool::new(false);

/// This backend's cache. A plain static, not a thread-local (whose lookup
/// is a function call in a shared library): every backend is its own
/// single-threaded process with its own copy, forked from a postmaster
/// that never reads it.
static CACHE: MillisCache = MillisCache::new(true);

/// Decide whether the counter may be used on this machine.
pub fn detect() {
    USABLE.store(tsc_is_the_clock_source(), Ordering::Relaxed);
}

/// Whether `snowflake_nextval()` reads the wall clock through the cache.
pub fn in_use() -> bool {
    USABLE.load(Ordering::Relaxed)
}

fn tsc_is_the_clock_source() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let source =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .unwrap_or_default();
    if source.trim() != "tsc" {
        return false;
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .map(|l| {
            let flags: Vec<&str> = l.split_whitespace().collect();
            flags.contains(&"constant_tsc") && flags.contains(&"nonstop_tsc")
        })
        .unwrap_or(false)
}

/// Run `f` with this backend's cached clock (only when [`in_use`]).
#[inline(always)]
pub fn cached<R>(f: impl FnOnce(&CachedClock<'_, SystemClock, Tsc>) -> R) -> R {
    f(&CachedClock {
        cache: &CACHE,
        clock: SystemClock,
        counter: Tsc,
    })
}
