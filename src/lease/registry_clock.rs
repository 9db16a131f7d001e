//! The registry's own clock: what a registry database times its leases
//! by (`sql/registry.sql`). A lease expires by the registry host's
//! monotonic clock, never by its wall clock, so that no step of the
//! registry's wall clock (an NTP correction, an operator, a VM restored
//! from a snapshot) expires a live lease and lets a second server claim
//! its id while the first still mints (issue 47).
//!
//! The clock is `CLOCK_BOOTTIME` (monotonic, counting a suspend), named
//! by the host's boot id and the boottime offset of the server's time
//! namespace (`snowflake_id_core::lease::registry_clock_name`): two
//! readings with the same name are comparable, two with different names
//! (a failover to another host, a reboot, a standby started in another
//! time namespace or restored by CRIU) are not, and the registry then
//! counts a lease's TTL again from the first reading of its new clock.
//!
//! Both functions are declared in `sql/registry.sql` (in the extension's
//! internal schema, which the upgrade script creates before it), so their
//! SQL is not generated here.

use pgrx::prelude::*;
use snowflake_id_core::lease::registry_clock_name;
use snowflake_id_core::{Clock, SystemClock};

/// The name of the registry host's monotonic clock: the kernel's boot id
/// (or the postmaster's start time where the kernel has none) and the
/// boottime offset of this process's time namespace where it has one.
/// Internal (`snowflake_id_internal`); EXECUTE for `pg_monitor` only.
///
/// ```sql
/// SELECT snowflake_id_internal.snowflake_registry_boot();
/// ```
#[pg_extern(sql = false)]
pub fn snowflake_registry_boot() -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| {
            // SAFETY: PgStartTime is a plain global set at postmaster start.
            format!("postmaster-{}", unsafe { pgrx::pg_sys::PgStartTime })
        });
    let offsets = std::fs::read_to_string("/proc/self/timens_offsets").ok();
    let ns = std::fs::read_link("/proc/self/ns/time")
        .ok()
        .map(|p| p.to_string_lossy().into_owned());
    registry_clock_name(&boot, offsets.as_deref(), ns.as_deref())
}

/// The registry host's monotonic clock, ns (any origin; compare readings
/// of one [`snowflake_registry_boot`] only). Internal, like it.
///
/// ```sql
/// SELECT snowflake_id_internal.snowflake_registry_ns();
/// ```
#[pg_extern(sql = false)]
pub fn snowflake_registry_ns() -> i64 {
    SystemClock.lease_ns()
}
