//! `#[pg_test]`s: run inside a real server with the library preloaded and
//! `snowflake_id.worker_id = 42` (see `pg_test::postgresql_conf_options`).

#[pgrx::pg_schema]
mod tests {
    use crate::decode::*;
    use crate::nextval::snowflake_nextval;
    use pgrx::prelude::*;

    fn one<T: pgrx::datum::FromDatum + pgrx::datum::IntoDatum>(sql: &str) -> T {
        Spi::get_one::<T>(sql)
            .expect("query failed")
            .expect("NULL result")
    }

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
    fn nextval_in_sql_is_unique_and_ordered() {
        let n: i64 = one(
            "SELECT count(DISTINCT id) FROM (SELECT snowflake_nextval() AS id \
             FROM generate_series(1, 100000)) s",
        );
        assert_eq!(n, 100_000);
        let ordered: bool = one(
            "SELECT bool_and(id > prev) FROM (SELECT id, lag(id) OVER (ORDER BY n) AS prev \
             FROM (SELECT n, snowflake_nextval() AS id FROM generate_series(1, 50000) n) a) b \
             WHERE prev IS NOT NULL",
        );
        assert!(ordered);
    }

    #[pg_test]
    fn nextval_timestamp_is_now() {
        let skew_ms: f64 = one(
            "SELECT abs(extract(epoch FROM snowflake_timestamp(snowflake_nextval()) \
             - clock_timestamp()) * 1000)::float8",
        );
        assert!(skew_ms < 2000.0, "timestamp off by {skew_ms} ms");
    }

    #[pg_test]
    fn default_column_works() {
        Spi::run(
            "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), v int);
             INSERT INTO t (v) SELECT g FROM generate_series(1, 5000) g;",
        )
        .unwrap();
        let ok: bool = one(
            "SELECT count(*) = 5000 AND bool_and(snowflake_worker_id(id) = 42) \
             AND count(DISTINCT id) = 5000 FROM t",
        );
        assert!(ok);
        // Insertion order is ID order.
        let ordered: bool =
            one("SELECT bool_and(id > prev) FROM (SELECT id, lag(id) OVER (ORDER BY v) prev FROM t) s WHERE prev IS NOT NULL");
        assert!(ordered);
    }

    #[pg_test]
    fn compose_decode_round_trip() {
        let ok: bool = one(
            "SELECT bool_and(snowflake_compose(d.ts, d.worker_id, d.sequence) = x.id)
               FROM (SELECT snowflake_nextval() AS id FROM generate_series(1, 1000)) x,
                    snowflake_decode(x.id) d",
        );
        assert!(ok);
        let id: i64 = one("SELECT snowflake_compose('2024-01-01 00:00:01+00', 5, 7)");
        assert_eq!(id, (1000 << 22) | (5 << 12) | 7);
        let (w, s): (i32, i32) = (
            one("SELECT snowflake_worker_id(4194324487)"),
            one("SELECT snowflake_sequence(4194324487)"),
        );
        assert_eq!((w, s), (5, 7));
        let same: bool =
            one("SELECT snowflake_timestamp(4194324487) = '2024-01-01 00:00:01+00'::timestamptz");
        assert!(same);
    }

    #[pg_test]
    fn min_max_bounds() {
        let ok: bool = one(
            "SELECT snowflake_min_id('2024-06-01 00:00:00.001+00') = snowflake_max_id('2024-06-01 00:00:00+00') + 1
                AND snowflake_min_id('2024-06-01+00') = snowflake_compose('2024-06-01+00', 0, 0)
                AND snowflake_max_id('2024-06-01+00') = snowflake_compose('2024-06-01+00', 1023, 4095)
                AND snowflake_min_id('2024-06-01 00:00:00.0009+00') = snowflake_min_id('2024-06-01+00')",
        );
        assert!(ok);
    }

    #[pg_test]
    fn range_query_uses_primary_key_index() {
        Spi::run(
            "CREATE TABLE ev (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), x int);
             INSERT INTO ev (x) SELECT g FROM generate_series(1, 20000) g;
             ANALYZE ev;",
        )
        .unwrap();
        let plan: pgrx::Json = one(
            "EXPLAIN (FORMAT JSON) SELECT * FROM ev
              WHERE id BETWEEN snowflake_min_id(now() - interval '1 hour') AND snowflake_max_id(now())",
        );
        let text = plan.0.to_string();
        assert!(text.contains("\"Index Name\":\"ev_pkey\""), "{text}");
        assert!(!text.contains("Seq Scan"), "{text}");
    }

    /// Decoders of the server layout STABLE (they read restart-only
    /// settings), explicit-layout decoders and text forms IMMUTABLE, the
    /// generator VOLATILE, DDL and administration VOLATILE PARALLEL UNSAFE.
    /// (STRICT on the argument-less functions is pgrx's default and has no
    /// effect.)
    #[pg_test]
    fn markings_are_honest() {
        let rows: String = one(
            "SELECT string_agg(p.oid::regprocedure::text || ':' || provolatile::text || proparallel::text
                               || proisstrict::text, E'\\n' ORDER BY p.oid::regprocedure::text COLLATE \"C\")
               FROM pg_proc p WHERE proname LIKE 'snowflake\\_%'",
        );
        let ts = "timestamp with time zone";
        let explicit = format!("{ts},integer,integer,integer");
        let expected = [
            "snowflake_accept_configuration():vutrue".to_string(),
            format!("snowflake_compose({ts},integer,integer):sstrue"),
            "snowflake_convert_column(regclass,name):vutrue".to_string(),
            "snowflake_decode(bigint):sstrue".to_string(),
            "snowflake_decode(bigint,text):sstrue".to_string(),
            format!("snowflake_decode(bigint,{explicit}):istrue"),
            "snowflake_from_base32(text):istrue".to_string(),
            format!("snowflake_max_id({ts}):sstrue"),
            format!("snowflake_max_id({ts},{explicit}):istrue"),
            format!("snowflake_min_id({ts}):sstrue"),
            format!("snowflake_min_id({ts},{explicit}):istrue"),
            "snowflake_nextval():vstrue".to_string(),
            "snowflake_nextval(integer):vstrue".to_string(),
            "snowflake_sequence(bigint):sstrue".to_string(),
            "snowflake_stats():vstrue".to_string(),
            "snowflake_timestamp(bigint):sstrue".to_string(),
            "snowflake_to_base32(bigint):istrue".to_string(),
            "snowflake_to_text(bigint):istrue".to_string(),
            "snowflake_worker_id(bigint):sstrue".to_string(),
        ]
        .join("\n");
        assert_eq!(rows, expected);
    }

    /// The bulk form: `count` unique, increasing IDs of this worker, all
    /// above the single IDs issued before and below those issued after.
    #[pg_test]
    fn bulk_nextval_is_a_block_of_the_same_generator() {
        let before = snowflake_nextval();
        let ok: bool = one(&format!(
            "SELECT count(*) = 100000 AND count(DISTINCT id) = 100000
                    AND bool_and(snowflake_worker_id(id) = 42)
                    AND min(id) > {before}
                    AND bool_and(id > prev)
               FROM (SELECT id, lag(id, 1, {before}::bigint) OVER (ORDER BY n) AS prev
                       FROM ROWS FROM (snowflake_nextval(100000)) WITH ORDINALITY AS t(id, n)) x"
        ));
        assert!(ok);
        let max: i64 = one("SELECT max(id) FROM snowflake_nextval(5) id");
        assert!(snowflake_nextval() > max);
        let none: i64 = one("SELECT count(*) FROM snowflake_nextval(0)");
        assert_eq!(none, 0);
    }

    #[pg_test(error = "number of IDs requested must not be negative: -1")]
    fn bulk_nextval_rejects_negative_counts() {
        Spi::run("SELECT snowflake_nextval(-1)").unwrap();
    }

    #[pg_test(error = "snowflake ID -1 is negative")]
    fn negative_id_is_rejected() {
        snowflake_decode(-1);
    }

    #[pg_test(error = "worker id 1024 is out of range")]
    fn compose_rejects_worker() {
        Spi::run("SELECT snowflake_compose(now(), 1024, 0)").unwrap();
    }

    #[pg_test(error = "timestamp is before the snowflake epoch")]
    fn min_id_rejects_pre_epoch() {
        Spi::run("SELECT snowflake_min_id('2023-12-31 23:59:59.999+00')").unwrap();
    }

    #[pg_test(error = "timestamp out of range")]
    fn min_id_rejects_infinity() {
        Spi::run("SELECT snowflake_min_id('infinity')").unwrap();
    }

    #[pg_test(error = "parameter \"snowflake_id.worker_id\" cannot be changed now")]
    fn worker_id_is_not_session_settable() {
        Spi::run("SET snowflake_id.worker_id = 1").unwrap();
    }

    #[pg_test(
        error = "parameter \"snowflake_id.epoch\" cannot be changed without restarting the server"
    )]
    fn epoch_is_postmaster_only() {
        Spi::run("SET snowflake_id.epoch = '2020-01-01'").unwrap();
    }

    #[pg_test]
    fn stats_report_generation() {
        // Other tests run concurrently in other backends of the same
        // server, so the last ID may already be a later one.
        let id = snowflake_nextval();
        let row: String = one(&format!(
            "SELECT format('%s|%s|%s|%s', worker_id, last_id >= {id},
                           reserved_until >= last_id_time, state)
               FROM snowflake_stats()"
        ));
        assert_eq!(row, "42|t|t|ok");
    }

    #[pg_test]
    fn admin_function_is_revoked_from_public() {
        // grantee 0 is PUBLIC.
        let public_grants: i64 = one("SELECT count(*) FROM pg_proc, aclexplode(proacl) a
              WHERE proname = 'snowflake_accept_configuration' AND a.grantee = 0");
        assert_eq!(public_grants, 0);
    }

    #[pg_test]
    fn settings_are_visible() {
        let s: String = one(
            "SELECT string_agg(name || '=' || setting || '/' || context, ',' ORDER BY name)
               FROM pg_settings WHERE name LIKE 'snowflake\\_id.%'",
        );
        assert_eq!(
            s,
            "snowflake_id.epoch=2024-01-01 00:00:00+00/postmaster,\
             snowflake_id.max_lead=1000/sighup,\
             snowflake_id.sequence_bits=12/postmaster,\
             snowflake_id.worker_bits=10/postmaster,\
             snowflake_id.worker_id=42/sighup"
        );
    }

    #[pg_test]
    fn base32_round_trips_fresh_ids_in_order() {
        use crate::text::{snowflake_from_base32, snowflake_to_base32};
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

    #[pg_test]
    fn default_preset_is_the_server_layout() {
        let same: bool = one("WITH i AS (SELECT snowflake_nextval() AS id) \
             SELECT (SELECT row(d.*) FROM i, snowflake_decode(i.id, 'default') d) \
                  = (SELECT row(d.*) FROM i, snowflake_decode(i.id) d) FROM i");
        assert!(same);
        // The explicit form with the server's own layout agrees as well.
        let explicit: bool = one(
            "WITH i AS (SELECT snowflake_nextval() AS id), \
                  l AS (SELECT epoch, timestamp_bits, worker_bits, sequence_bits FROM snowflake_stats()) \
             SELECT snowflake_min_id(snowflake_timestamp(i.id), l.epoch, l.timestamp_bits, l.worker_bits, l.sequence_bits) \
                  = snowflake_min_id(snowflake_timestamp(i.id)) FROM i, l",
        );
        assert!(explicit);
    }

    #[pg_test]
    fn convert_column_switches_a_serial_key() {
        Spi::run(
            "CREATE TABLE conv_t (id serial PRIMARY KEY, v text); \
             INSERT INTO conv_t (v) VALUES ('a'), ('b');",
        )
        .unwrap();
        let steps: i64 = one("SELECT count(*) FROM snowflake_convert_column('conv_t', 'id')");
        assert_eq!(steps, 5); // drop default, drop sequence, widen, set default, check
        let worker: i32 =
            one("INSERT INTO conv_t (v) VALUES ('c') RETURNING snowflake_worker_id(id)");
        assert_eq!(worker, 42);
        let again: String =
            one("SELECT string_agg(action, ',') FROM snowflake_convert_column('conv_t', 'id')");
        assert_eq!(again, "unchanged,check");
    }
}
