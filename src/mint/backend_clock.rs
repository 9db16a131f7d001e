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
//!
//! The decision is taken once, in the postmaster, but each backend keeps
//! checking it: a counter that goes backwards (a reset on resume, a
//! re-based virtual TSC, CPUs out of step) stops the backend's cache at
//! once, and once a second (the cache's rate recheck) the backend asks the
//! kernel again whether the TSC is still its clock source, because the
//! kernel demotes an unstable TSC at run time; either way the backend reads
//! the clock for real from then on.

use snowflake_id_core::{CachedClock, Cycles, MillisCache, SystemClock, Tsc};
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

/// Whether the kernel's current clock source is the TSC.
fn kernel_uses_tsc() -> bool {
    std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        .map(|s| s.trim() == "tsc")
        .unwrap_or(false)
}

/// The TSC, trusted only while the kernel keeps it as its clock source.
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelTsc;

impl Cycles for KernelTsc {
    #[inline(always)]
    fn cycles(&self) -> u64 {
        Tsc.cycles()
    }
    fn still_trusted(&self) -> bool {
        kernel_uses_tsc()
    }
}

fn tsc_is_the_clock_source() -> bool {
    if !cfg!(target_arch = "x86_64") || !kernel_uses_tsc() {
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
pub fn cached<R>(f: impl FnOnce(&CachedClock<'_, SystemClock, KernelTsc>) -> R) -> R {
    f(&CachedClock {
        cache: &CACHE,
        clock: SystemClock,
        counter: KernelTsc,
    })
}

/// The current wall-clock millisecond from this backend's cache, without
/// a clock read: `None` where the cache is not used, or a real read is
/// due (the entry point of `snowflake_nextval()` then takes its general
/// path, which reads the clock).
#[inline(always)]
pub fn current_ms() -> Option<i64> {
    if !in_use() {
        return None;
    }
    CACHE.current_ms(&KernelTsc)
}
