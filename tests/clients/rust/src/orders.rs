//! Rust: keys are `i64` (`u64` has no `FromSql`), read back with
//! `INSERT ... RETURNING id`; `snowflake_nextval($1)` takes the `i64` count
//! drivers bind. diesel has no set-returning functions: take bulk keys with
//! `sql_query` and a `QueryableByName` row. serde writes `i64` as a number
//! that JavaScript rounds: serialize IDs as strings.
use serde::{Serialize, Serializer};

pub const EPOCH_MS: i64 = 1_704_067_200_000; // snowflake_id.epoch, 2024-01-01 00:00:00+00

/// (Unix ms, worker id, sequence) of an ID.
pub fn decode(id: i64) -> (i64, i64, i64) {
    (EPOCH_MS + (id >> 22), (id >> 12) & 1023, id & 4095)
}

/// `#[serde(serialize_with = "id_as_string")]` on an ID field.
pub fn id_as_string<S: Serializer>(id: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(id)
}

#[derive(Serialize)]
pub struct Order {
    #[serde(serialize_with = "id_as_string")]
    pub id: i64,
    pub item: String,
}

// tokio-postgres
pub async fn insert_order(
    client: &tokio_postgres::Client,
    item: &str,
) -> Result<i64, tokio_postgres::Error> {
    let row = client
        .query_one(
            "INSERT INTO rust_orders (item) VALUES ($1) RETURNING id",
            &[&item],
        )
        .await?;
    Ok(row.get(0))
}

pub async fn bulk_keys(
    client: &tokio_postgres::Client,
    n: i64,
) -> Result<Vec<i64>, tokio_postgres::Error> {
    let rows = client.query("SELECT snowflake_nextval($1)", &[&n]).await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

// sqlx
pub async fn insert_order_sqlx(pool: &sqlx::PgPool, item: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("INSERT INTO rust_orders (item) VALUES ($1) RETURNING id")
        .bind(item)
        .fetch_one(pool)
        .await
}

pub async fn bulk_keys_sqlx(pool: &sqlx::PgPool, n: i64) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT snowflake_nextval($1)")
        .bind(n)
        .fetch_all(pool)
        .await
}

// diesel
pub mod schema {
    diesel::table! {
        rust_orders (id) {
            id -> BigInt,
            item -> Text,
        }
    }
}

#[derive(diesel::QueryableByName)]
pub struct Key {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub id: i64,
}

pub fn insert_order_diesel(
    conn: &mut diesel::PgConnection,
    item: &str,
) -> diesel::QueryResult<i64> {
    use diesel::prelude::*;
    use schema::rust_orders::dsl;
    diesel::insert_into(dsl::rust_orders)
        .values(dsl::item.eq(item))
        .returning(dsl::id)
        .get_result(conn)
}

pub fn bulk_keys_diesel(conn: &mut diesel::PgConnection, n: i64) -> diesel::QueryResult<Vec<i64>> {
    use diesel::prelude::*;
    let keys: Vec<Key> = diesel::sql_query("SELECT snowflake_nextval($1) AS id")
        .bind::<diesel::sql_types::BigInt, _>(n)
        .load(conn)?;
    Ok(keys.into_iter().map(|k| k.id).collect())
}
