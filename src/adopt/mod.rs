//! Adopted sequences (issue 57): `nextval('orders_id_seq')` returns a
//! Snowflake ID, on stock PostgreSQL, without a change to the
//! application.
//!
//! Uses [`crate::mint`] (the IDs), [`crate::convert`] (running an owner's
//! statements as the owner) and the ground; used by nothing
//! (`scripts/module_graph.py`).
//! - [`planner`]: the planner hook that puts the functions of [`calls`]
//!   in place of `nextval`, `currval`, `setval` and `lastval` in every
//!   statement of a database with adopted sequences;
//! - [`calls`]: those functions;
//! - `sql/adopt.sql`: the list of adopted sequences (a configuration
//!   table, carried by `pg_dump`), `snowflake_adopt_sequence()`, and the
//!   event trigger that forgets a dropped sequence.
//!
//! ## `snowflake_adopt_sequence(seq regclass) → void`
//!
//! Adopts a `bigint` sequence of this database: from the caller's commit
//! on, in every session of the database, `nextval(seq)` returns a
//! Snowflake ID of this server (with `INCREMENT BY n`, a `v` such that
//! `v - n .. v + n - 1` are all reserved for the caller: client-side
//! allocators number `n` keys down or up from it), `currval`
//! and `lastval` return it back, and `setval` changes nothing (WARNING).
//! Every column default that calls `nextval(seq)` becomes
//! `snowflake_nextval()` (as its table's owner), so `COPY` gets Snowflake
//! IDs too. Superuser only (42501); needs the library preloaded (55000);
//! refuses a non-sequence (42809), a sequence or column narrower than
//! `bigint` (42804) and an identity column's sequence (0A000: convert the
//! column instead). Adopting an adopted sequence changes nothing.
//!
//! ```sql
//! SELECT snowflake_adopt_sequence('orders_id_seq');
//! SELECT nextval('orders_id_seq');          -- a Snowflake ID
//! SELECT snowflake_decode(currval('orders_id_seq'));
//! ```

pub mod calls;
pub mod planner;
pub mod session;

#[allow(unused_imports)] // named in `requires` below
use crate::convert::as_owner::snowflake_convert_as_owner;
use crate::{convert::as_owner, errors, mint::shmem};
use pgrx::pg_sys;
use pgrx::prelude::*;

extension_sql_file!(
    "sql/adopt.sql",
    name = "adopt",
    requires = ["high_water", snowflake_convert_as_owner]
);

/// Every backend of this database reads the list of adopted sequences
/// again, and plans its statements again, once the caller commits (a
/// relcache invalidation of the list). With `require_preload`, first
/// refuses (55000) where the library is not preloaded.
#[pg_extern(sql = false)]
pub fn adopt_changed(require_preload: bool) {
    if require_preload && shmem::state().is_none() {
        errors::adopt_not_preloaded();
    }
    // SAFETY: catalog look-ups by name; an invalidation sent at commit.
    unsafe {
        let ns = pg_sys::get_namespace_oid(c"snowflake_id_internal".as_ptr(), false);
        let table = pg_sys::get_relname_relid(c"snowflake_adopted".as_ptr(), ns);
        if table != pg_sys::Oid::INVALID {
            pg_sys::CacheInvalidateRelcacheByRelid(table);
        }
    }
}

/// Run `stmt` as the owner of `rel`, in a security-restricted operation
/// (`snowflake_convert_as_owner`): the adoption's own door to it, in the
/// extension's internal schema, where no role but a superuser can create
/// an overload that a call by name would pick instead.
#[pg_extern(sql = false)]
pub fn adopt_as_owner(rel: pg_sys::Oid, stmt: &str) {
    as_owner::snowflake_convert_as_owner(rel, stmt);
}
