//! Leased worker ids: the arithmetic of one lease, on the monotonic clock.
//!
//! A server in `registry` mode holds a worker id by lease (the extension's
//! `lease` module talks to the registry). This module decides, from what
//! the registry granted and when the request was sent, until when the
//! lease may be used and when to renew it. It never reads a clock: every
//! function takes the monotonic time, so tests drive it by hand.
//!
//! - **Deadline.** A lease granted for `ttl_ms` by a request sent at
//!   monotonic time `sent` is used until `sent + ttl_ms - ttl_ms / 10`.
//!   The registry counts the TTL from when it ran the statement, which is
//!   later than `sent`; the tenth is a margin for the rates of the two
//!   clocks. After the deadline no ID is issued under the lease, whatever
//!   the wall clock says.
//! - **Renewal** is due a third of the TTL after the last grant, so two
//!   renewals can fail (a registry restart, a lost connection) before the
//!   deadline.
//! - **The cap.** No ID carries a timestamp above `reserved_until_ms`, the
//!   reservation the registry committed for this holder: the next holder
//!   of the id starts above it. A renewal only ever raises it.

/// One granted lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub worker: u64,
    /// The registry row's epoch, for compare-and-set renewals.
    pub epoch: i64,
    /// Unix ms: no ID under this lease carries a later timestamp.
    pub reserved_until_ms: i64,
    /// Monotonic ns when the request that granted or last renewed the
    /// lease was sent.
    pub sent_ns: i64,
    /// The lease's length, ms.
    pub ttl_ms: i64,
}

/// The smallest TTL the extension accepts, ms.
pub const MIN_TTL_MS: i64 = 3_000;

impl Lease {
    /// The lease the registry granted for a request sent at `sent_ns`.
    pub fn granted(
        worker: u64,
        epoch: i64,
        reserved_until_ms: i64,
        sent_ns: i64,
        ttl_ms: i64,
    ) -> Self {
        Lease {
            worker,
            epoch,
            reserved_until_ms,
            sent_ns,
            ttl_ms: ttl_ms.max(1),
        }
    }

    /// A renewal sent at `sent_ns` succeeded: the deadline moves, and the
    /// reservation rises (never falls).
    pub fn renewed(&mut self, reserved_until_ms: i64, sent_ns: i64, ttl_ms: i64) {
        self.reserved_until_ms = self.reserved_until_ms.max(reserved_until_ms);
        self.sent_ns = self.sent_ns.max(sent_ns);
        self.ttl_ms = ttl_ms.max(1);
    }

    /// Monotonic ns after which the lease is not used.
    pub fn deadline_ns(&self) -> i64 {
        let ms = self.ttl_ms - self.ttl_ms / 10;
        self.sent_ns.saturating_add(ms.saturating_mul(1_000_000))
    }

    /// Whether IDs may be issued under the lease at monotonic `mono_ns`.
    pub fn live(&self, mono_ns: i64) -> bool {
        mono_ns < self.deadline_ns()
    }

    /// The highest Unix ms an ID may carry at monotonic `mono_ns`: the
    /// reservation while the lease is live, `None` after its deadline.
    pub fn cap_ms(&self, mono_ns: i64) -> Option<i64> {
        self.live(mono_ns).then_some(self.reserved_until_ms)
    }

    /// Monotonic ns when the next renewal is due.
    pub fn renew_at_ns(&self) -> i64 {
        self.sent_ns
            .saturating_add((self.ttl_ms / 3).saturating_mul(1_000_000))
    }

    /// Whether the lease should be renewed at `mono_ns`: the renewal is
    /// due, or the reservation has less than a third of the TTL left
    /// beyond `frontier_ms` (a burst, or a clock that jumped ahead).
    pub fn renewal_due(&self, mono_ns: i64, frontier_ms: i64) -> bool {
        mono_ns >= self.renew_at_ns()
            || self.reserved_until_ms.saturating_sub(frontier_ms) < self.ttl_ms / 3
    }
}

/// How long to wait before the next attempt after `failures` failed ones
/// in a row: 100 ms doubling, at most a third of the TTL.
pub fn retry_delay_ms(failures: u32, ttl_ms: i64) -> i64 {
    let backoff = 100i64.saturating_mul(1i64 << failures.min(20));
    backoff.min((ttl_ms / 3).max(100))
}

/// The name of the registry host's lease clock (`CLOCK_BOOTTIME`): two
/// readings are comparable only under one name. The kernel's boot id
/// alone does not name it: a process in another Linux time namespace
/// (`unshare --time`, a container restored by CRIU) shares the boot id
/// but reads `CLOCK_BOOTTIME` shifted by its namespace's offset (issue
/// 56). So the name is the boot id, followed by the namespace's boottime
/// offset where it is not zero (`timens_offsets` is the text of
/// `/proc/self/timens_offsets`; `None` where the kernel has no time
/// namespaces, which is offset zero). A clock in the initial namespace
/// keeps the plain boot id, so leases timed before this name existed stay
/// comparable. Where the offsets cannot be read but the process is in a
/// time namespace (`timens`, the target of `/proc/self/ns/time`), that
/// namespace names the clock instead: never comparable by mistake.
pub fn registry_clock_name(
    boot_id: &str,
    timens_offsets: Option<&str>,
    timens: Option<&str>,
) -> String {
    let Some(text) = timens_offsets else {
        return match timens {
            Some(ns) => format!("{boot_id}/{ns}"),
            None => boot_id.to_string(),
        };
    };
    let offset = text.lines().find_map(|line| {
        let mut f = line.split_whitespace();
        if f.next()? != "boottime" {
            return None;
        }
        let secs: i64 = f.next()?.parse().ok()?;
        let nanos: i64 = f.next()?.parse().ok()?;
        Some((secs, nanos))
    });
    match (offset, timens) {
        (Some((0, 0)), _) => boot_id.to_string(),
        (Some((secs, nanos)), _) => format!("{boot_id}/boottime{secs:+}.{nanos:09}"),
        (None, Some(ns)) => format!("{boot_id}/{ns}"),
        (None, None) => boot_id.to_string(),
    }
}

/// When a refused claim may be granted: the milliseconds a registry's
/// limit refusal (53400) names in its DETAIL, "... runs out in N ms",
/// or `None` where it names none (an older registry).
pub fn claim_retry_in_ms(message: &str) -> Option<i64> {
    let at = message.find("runs out in ")? + "runs out in ".len();
    let rest = &message[at..];
    let end = rest.find(" ms")?;
    rest[..end].trim().parse().ok().filter(|ms: &i64| *ms >= 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    #[test]
    fn deadline_is_before_the_registrys_expiry() {
        let l = Lease::granted(7, 1, 50_000, 1_000 * MS, 15_000);
        // Sent at 1 s, 15 s TTL: used until 1 s + 13.5 s.
        assert_eq!(l.deadline_ns(), 14_500 * MS);
        assert!(l.live(14_499 * MS));
        assert!(!l.live(14_500 * MS));
        assert_eq!(l.cap_ms(2_000 * MS), Some(50_000));
        assert_eq!(l.cap_ms(14_500 * MS), None, "no cap after the deadline");
    }

    #[test]
    fn renewal_moves_the_deadline_and_only_raises_the_reservation() {
        let mut l = Lease::granted(7, 1, 50_000, 0, 15_000);
        assert_eq!(l.renew_at_ns(), 5_000 * MS);
        l.renewed(40_000, 5_000 * MS, 15_000);
        assert_eq!(l.reserved_until_ms, 50_000, "a renewal never lowers it");
        assert_eq!(l.deadline_ns(), 18_500 * MS);
        l.renewed(60_000, 5_100 * MS, 15_000);
        assert_eq!(l.reserved_until_ms, 60_000);
        // A late answer to an older request does not move the deadline back.
        l.renewed(60_000, 4_000 * MS, 15_000);
        assert_eq!(l.sent_ns, 5_100 * MS);
    }

    #[test]
    fn renewal_due_on_time_or_when_the_reservation_runs_short() {
        let l = Lease::granted(7, 1, 20_000, 0, 15_000);
        assert!(!l.renewal_due(4_999 * MS, 10_000));
        assert!(l.renewal_due(5_000 * MS, 10_000));
        // 4.999 s of reservation left beyond the frontier: under a third.
        assert!(l.renewal_due(0, 15_001));
        assert!(!l.renewal_due(0, 15_000));
    }

    #[test]
    fn a_paused_holder_is_past_its_deadline_when_it_wakes() {
        // Granted at 0, then frozen for 20 s (SIGSTOP) with a 15 s TTL:
        // the next look at the clock finds it past the deadline, however
        // far its reservation reaches.
        let l = Lease::granted(3, 9, i64::MAX, 0, 15_000);
        assert_eq!(l.cap_ms(20_000 * MS), None);
    }

    #[test]
    fn retry_backs_off_up_to_a_third_of_the_ttl() {
        assert_eq!(retry_delay_ms(0, 15_000), 100);
        assert_eq!(retry_delay_ms(3, 15_000), 800);
        assert_eq!(retry_delay_ms(10, 15_000), 5_000);
        assert_eq!(retry_delay_ms(63, 15_000), 5_000);
        assert_eq!(retry_delay_ms(5, 3_000), 1_000);
    }

    #[test]
    fn the_clock_name_tells_time_namespaces_apart() {
        let boot = "0b7c1c6e-5a8e-4b8e-9a6e-2f3a1d9c0e11";
        let initial = "monotonic           0         0\nboottime            0         0\n";
        let ahead = "monotonic           0         0\nboottime         3600         0\n";
        let behind = "monotonic           0         0\nboottime        -3600         5\n";
        // The initial namespace keeps the plain boot id (leases timed
        // before the name changed stay comparable).
        assert_eq!(
            registry_clock_name(boot, Some(initial), Some("time:[1]")),
            boot
        );
        assert_eq!(registry_clock_name(boot, None, None), boot);
        let a = registry_clock_name(boot, Some(ahead), Some("time:[2]"));
        let b = registry_clock_name(boot, Some(behind), Some("time:[3]"));
        assert_eq!(a, format!("{boot}/boottime+3600.000000000"));
        assert_eq!(b, format!("{boot}/boottime-3600.000000005"));
        assert_ne!(a, b);
        // Two namespaces with one offset read one clock: one name.
        assert_eq!(a, registry_clock_name(boot, Some(ahead), Some("time:[9]")));
        // Offsets unreadable in a namespace: the namespace names it.
        assert_eq!(
            registry_clock_name(boot, None, Some("time:[7]")),
            format!("{boot}/time:[7]")
        );
        assert_eq!(
            registry_clock_name(boot, Some("garbage"), Some("time:[7]")),
            format!("{boot}/time:[7]")
        );
    }

    #[test]
    fn a_limit_refusal_says_when_to_ask_again() {
        let m = "role \"a\" may hold no more worker-id leases of this registry (53400) DETAIL: It holds 1 live leases; its limit is 1. The first of them runs out in 5712 ms unless its holder renews it.";
        assert_eq!(claim_retry_in_ms(m), Some(5712));
        assert_eq!(claim_retry_in_ms("runs out in 0 ms"), Some(0));
        assert_eq!(claim_retry_in_ms("runs out in -3 ms"), None);
        assert_eq!(
            claim_retry_in_ms("It holds 1 live leases; its limit is 1."),
            None
        );
        assert_eq!(claim_retry_in_ms("runs out in soon ms"), None);
    }
}
