//! Leased worker ids (`snowflake_id.worker_id_source = registry`): the
//! server's worker id is a lease on a row of a registry table on another
//! PostgreSQL server, which the same extension keeps
//! (`src/lease/sql/registry.sql`).
//!
//! - **Claim.** At start-up and after promotion (never on a standby), the
//!   "snowflake_id lease" background worker claims a row with
//!   `snowflake_registry_claim()`, which hands back the row's previous
//!   `reserved_until`: the generator continues above it
//!   (`GeneratorState::assign_worker`), so a new holder always mints above
//!   everything the previous holder could have minted, whatever the
//!   clocks say.
//! - **Renewal** every third of `snowflake_id.lease_ttl`, compare-and-set
//!   on the row's token and epoch, raising `reserved_until` one TTL ahead
//!   of the generator's frontier.
//! - **The cap.** No durable reservation passes the lease's
//!   `reserved_until`, nor is one made after the lease's deadline on the
//!   monotonic clock (`crate::mint::worker::cap_ms`): the hot
//!   path compares an ID with the durable reservation as before, so the
//!   lease costs it nothing but the read of the held worker id.
//! - **Losing the lease** (a lost compare-and-set, a retired id, the
//!   deadline passed with the registry unreachable) stops minting at once:
//!   55000. Callers that read the old worker id before are refused by the
//!   generator itself. The worker keeps trying: a renewal that still
//!   matches (the registry was only unreachable) resumes the same id, else
//!   it claims another.
//! - **Tokens** are random at each postmaster start: a cold copy of a data
//!   directory or a cloned VM never holds a live lease.
//! - **A clean shutdown** releases the lease (its `reserved_until` stays),
//!   so the restarted server usually gets its id back.
//!
//! The room: [`worker`] (the background worker), [`registry_client`]
//! (its libpq client), [`registry_clock`] (the registry's own clock) and
//! `sql/registry.sql` (the registry's tables and functions). The
//! arithmetic of a lease (deadline, renewal time, back-off) is
//! `snowflake_id_core::lease`. The room hands minting a worker id and a
//! deadline through `crate::mint::worker` alone, and minting never
//! calls into it (`scripts/module_graph.py`: `lease` comes after
//! `mint`).

pub mod registry_client;
pub mod registry_clock;
pub mod worker;

use pgrx::prelude::*;

extension_sql_file!(
    "sql/registry.sql",
    name = "registry",
    requires = ["high_water"]
);
