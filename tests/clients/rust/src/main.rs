//! Rust clients against a running server (worker_id 21): tokio-postgres
//! (single inserts on 8 connections at once, bulk keys with an i64 count),
//! sqlx and diesel; IDs unique, increasing per connection, decoded in Rust
//! as on the server; serde's number and the string fix. Run by run.sh with
//! SNOWFLAKE_DSN and SNOWFLAKE_URL set.
mod orders;

use std::collections::HashSet;

fn increasing(ids: &[i64]) -> bool {
    ids.windows(2).all(|w| w[0] < w[1])
}

async fn connect(dsn: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(dsn, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(async move { conn.await.expect("connection") });
    client
}

#[tokio::main]
async fn main() {
    let dsn = std::env::var("SNOWFLAKE_DSN").expect("SNOWFLAKE_DSN");
    let url = std::env::var("SNOWFLAKE_URL").expect("SNOWFLAKE_URL");
    let admin = connect(&dsn).await;
    admin
        .batch_execute("CREATE TABLE rust_orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text NOT NULL)")
        .await
        .expect("create");

    // tokio-postgres: 8 connections at once, each its own increasing run.
    let mut tasks = Vec::new();
    for c in 0..8 {
        let dsn = dsn.clone();
        tasks.push(tokio::spawn(async move {
            let client = connect(&dsn).await;
            let mut ids = Vec::new();
            for i in 0..100 {
                ids.push(
                    orders::insert_order(&client, &format!("c{c} {i}"))
                        .await
                        .expect("insert"),
                );
            }
            ids.extend(
                orders::bulk_keys(&client, 500)
                    .await
                    .expect("bulk keys, i64 count"),
            );
            assert!(
                increasing(&ids),
                "tokio-postgres: IDs do not increase on connection {c}"
            );
            ids
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("task"));
    }

    // sqlx
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .expect("sqlx connect");
    let mut sqlx_ids = Vec::new();
    for i in 0..100 {
        sqlx_ids.push(
            orders::insert_order_sqlx(&pool, &format!("sqlx {i}"))
                .await
                .expect("sqlx insert"),
        );
    }
    sqlx_ids.extend(
        orders::bulk_keys_sqlx(&pool, 500)
            .await
            .expect("sqlx bulk keys"),
    );
    assert!(increasing(&sqlx_ids), "sqlx: IDs do not increase");
    all.extend(&sqlx_ids);

    // diesel (blocking)
    let diesel_ids = tokio::task::spawn_blocking(move || {
        use diesel::Connection;
        let mut conn = diesel::PgConnection::establish(&url).expect("diesel connect");
        let mut ids = Vec::new();
        for i in 0..100 {
            ids.push(
                orders::insert_order_diesel(&mut conn, &format!("diesel {i}"))
                    .expect("diesel insert"),
            );
        }
        ids.extend(orders::bulk_keys_diesel(&mut conn, 500).expect("diesel bulk keys"));
        ids
    })
    .await
    .expect("diesel task");
    assert!(increasing(&diesel_ids), "diesel: IDs do not increase");
    all.extend(&diesel_ids);

    let unique: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(unique.len(), all.len(), "duplicate IDs");

    // Decoded in Rust as on the server.
    let rows = admin
        .query(
            "SELECT id, (extract(epoch FROM d.ts) * 1000)::bigint, d.worker_id, d.sequence
               FROM unnest($1::bigint[]) id, snowflake_decode(id) d",
            &[&all],
        )
        .await
        .expect("decode");
    assert_eq!(rows.len(), all.len());
    for r in &rows {
        let (id, ms, worker, seq): (i64, i64, i32, i32) = (r.get(0), r.get(1), r.get(2), r.get(3));
        assert_eq!(
            orders::decode(id),
            (ms, worker.into(), seq.into()),
            "decode of {id}"
        );
        assert_eq!(worker, 21);
    }

    // JSON: serde writes a plain i64 as a number, which a double rounds.
    // The first ID a double cannot hold (1 in 64 of them it can: multiples of its spacing).
    let id = *all
        .iter()
        .find(|&&v| v as f64 as i64 != v)
        .expect("a double holds every ID exactly");
    let plain = serde_json::to_string(&serde_json::json!({ "id": id })).unwrap();
    let as_double = serde_json::from_str::<serde_json::Value>(&plain).unwrap()["id"]
        .as_f64()
        .unwrap();
    assert_ne!(as_double as i64, id, "a double holds {id} exactly");
    let fixed = serde_json::to_string(&orders::Order {
        id,
        item: "x".into(),
    })
    .unwrap();
    assert_eq!(fixed, format!("{{\"id\":\"{id}\",\"item\":\"x\"}}"));
    println!(
        "  tokio-postgres: {} IDs on 8 connections at once; sqlx: {}; diesel: {} (bulk keys with an i64 count in each); \
         unique, increasing per connection, decoded in Rust as on the server; as a JSON number {id} reads {}, \
         serialize_with writes a string",
        all.len() - sqlx_ids.len() - diesel_ids.len(),
        sqlx_ids.len(),
        diesel_ids.len(),
        as_double as i64
    );
}
