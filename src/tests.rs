//! `#[pg_test]`s: run inside a real server with the library preloaded and
//! `snowflake_id.worker_id = 42` (see `pg_test::postgresql_conf_options`).
//!
//! Only what must call the Rust functions directly lives here: the
//! generator and the text forms called as Rust, without SQL in between.
//! Everything reachable through SQL is pinned once, by the `pg_regress`
//! suites in `tests/regress/` (see `tests/README.md`).

#[pgrx::pg_schema]
mod tests {
    use crate::mint::nextval::snowflake_nextval;
    use crate::read::decode::snowflake_worker_id;
    use pgrx::prelude::*;

    #[pg_test]
    fn nextval_is_increasing_and_carries_worker() {
        let mut prev = 0;
        for _ in 0..10_000 {
            let id = snowflake_nextval();
            assert!(id > prev, "{id} <= {prev}");
            prev = id;
        }
        assert_eq!(snowflake_worker_id(prev), 42);
    }

    #[pg_test]
    fn base32_round_trips_fresh_ids_in_order() {
        use crate::read::text::{snowflake_from_base32, snowflake_to_base32};
        let mut prev = String::new();
        for _ in 0..5_000 {
            let id = snowflake_nextval();
            let code = snowflake_to_base32(id);
            assert_eq!(code.len(), 13);
            assert_eq!(snowflake_from_base32(&code), id);
            assert!(code > prev, "{code} <= {prev}");
            prev = code;
        }
    }
}
