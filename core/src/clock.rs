//! Time sources. The generator reads two clocks:
//!
//! - the **wall clock** (`CLOCK_REALTIME`), which goes into IDs and may step
//!   backwards or forwards (NTP, VM migration, an operator);
//! - the **monotonic clock** (`CLOCK_MONOTONIC`), which is system-wide, never
//!   steps, and is used only to tell a clock step from a burst.
//!
//! Both are read in nanoseconds. Tests inject [`ManualClock`].

use parking_lot::Mutex;

pub trait Clock {
    /// Wall-clock time in nanoseconds since 1970-01-01 UTC.
    fn wall_ns(&self) -> i64;
    /// A system-wide monotonic clock in nanoseconds (any origin).
    fn mono_ns(&self) -> i64;
}

/// The real clocks, read through libc's `clock_gettime` (a vDSO call on
/// Linux, and the function that `libfaketime` interposes in our tests).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

extern "C" {
    fn clock_gettime(clk_id: i32, tp: *mut Timespec) -> i32;
}

#[cfg(target_os = "linux")]
const CLOCK_REALTIME: i32 = 0;
#[cfg(target_os = "linux")]
const CLOCK_MONOTONIC: i32 = 1;
#[cfg(target_os = "macos")]
const CLOCK_REALTIME: i32 = 0;
#[cfg(target_os = "macos")]
const CLOCK_MONOTONIC: i32 = 6;

#[inline]
fn read(clk: i32) -> i64 {
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime cannot fail
    // for these clock ids on supported platforms.
    let rc = unsafe { clock_gettime(clk, &mut ts) };
    debug_assert_eq!(rc, 0);
    ts.tv_sec
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec)
}

impl Clock for SystemClock {
    #[inline]
    fn wall_ns(&self) -> i64 {
        read(CLOCK_REALTIME)
    }
    #[inline]
    fn mono_ns(&self) -> i64 {
        read(CLOCK_MONOTONIC)
    }
}

/// A clock for tests: both readings are set by hand and can be shared by
/// many threads. Process-local by nature, hence a `parking_lot` mutex.
#[derive(Debug)]
pub struct ManualClock {
    inner: Mutex<(i64, i64)>,
}

impl ManualClock {
    pub fn new(wall_ns: i64, mono_ns: i64) -> Self {
        ManualClock {
            inner: Mutex::new((wall_ns, mono_ns)),
        }
    }
    /// Let `ns` of real time pass: both clocks advance.
    pub fn advance(&self, ns: i64) {
        let mut g = self.inner.lock();
        g.0 += ns;
        g.1 += ns;
    }
    /// Step the wall clock alone (negative = backwards), as NTP or an
    /// operator would.
    pub fn step_wall(&self, ns: i64) {
        self.inner.lock().0 += ns;
    }
    /// Step the monotonic clock alone. Real systems never do this; it
    /// models a broken time source.
    pub fn step_mono(&self, ns: i64) {
        self.inner.lock().1 += ns;
    }
}

impl Clock for ManualClock {
    fn wall_ns(&self) -> i64 {
        self.inner.lock().0
    }
    fn mono_ns(&self) -> i64 {
        self.inner.lock().1
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn wall_ns(&self) -> i64 {
        (**self).wall_ns()
    }
    fn mono_ns(&self) -> i64 {
        (**self).mono_ns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_is_sane() {
        let c = SystemClock;
        let w = c.wall_ns();
        // After 2020-01-01 and before 2200-01-01.
        assert!(w > 1_577_836_800_000_000_000 && w < 7_258_118_400_000_000_000);
        let m1 = c.mono_ns();
        let m2 = c.mono_ns();
        assert!(m2 >= m1);
    }

    #[test]
    fn manual_clock_steps() {
        let c = ManualClock::new(1_000, 5);
        c.advance(10);
        assert_eq!((c.wall_ns(), c.mono_ns()), (1_010, 15));
        c.step_wall(-500);
        assert_eq!((c.wall_ns(), c.mono_ns()), (510, 15));
        c.step_mono(1);
        assert_eq!(c.mono_ns(), 16);
    }
}
