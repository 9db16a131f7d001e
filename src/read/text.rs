//! JavaScript-safe text forms of an ID.
//!
//! A JSON number is an IEEE double, exact only up to 2^53; snowflake IDs
//! pass that within days of the epoch. Send IDs to JSON clients as strings:
//! decimal (`snowflake_to_text`) or the 13-symbol Crockford base32 form
//! (`snowflake_to_base32`), which is shorter and sorts like the number.
//! All three functions are IMMUTABLE: they depend on nothing but the input.

use crate::errors;
use pgrx::prelude::*;
use snowflake_id_core::base32;

/// The ID as decimal text, for JSON and JavaScript clients (which lose
/// precision on integers above 2^53). Same as `id::text`, named so that
/// intent is visible in queries and APIs.
///
/// ```sql
/// SELECT json_build_object('id', snowflake_to_text(id), 'total', total)
///   FROM orders LIMIT 1;
/// ```
#[pg_extern(immutable, strict, parallel_safe)]
pub fn snowflake_to_text(id: i64) -> String {
    id.to_string()
}

/// The ID as 13 Crockford base32 symbols (`0-9`, `A-Z` without I, L, O,
/// U), zero-padded so that text order equals numeric order under the `C`
/// collation. Negative numbers are not IDs and raise an error.
///
/// ```sql
/// SELECT snowflake_to_base32(1234567890123456789);  -- '128GGYHYYK08N'
/// ```
#[pg_extern(immutable, strict, parallel_safe)]
pub fn snowflake_to_base32(id: i64) -> String {
    base32::encode(id).unwrap_or_else(|e| errors::base32_error(e, None))
}

/// Parses Crockford base32 back into the ID; the exact inverse of
/// `snowflake_to_base32`. Case-insensitive; `O` reads as 0, `I` and `L` as
/// 1, and hyphens are ignored. Invalid text raises SQLSTATE 22P02, a value
/// above the largest `bigint` 22003.
///
/// ```sql
/// SELECT snowflake_from_base32('128g-gyhy-yk08n');  -- 1234567890123456789
/// ```
#[pg_extern(immutable, strict, parallel_safe)]
pub fn snowflake_from_base32(text: &str) -> i64 {
    base32::decode(text).unwrap_or_else(|e| errors::base32_error(e, Some(text)))
}
