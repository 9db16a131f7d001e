//! JSON that JavaScript reads without losing snowflake IDs:
//! `snowflake_to_jsonb(row)` and `snowflake_js_safe(jsonb)`.
//!
//! A snowflake ID is above 2^53, where a JavaScript `Number` (and every
//! `JSON.parse`) rounds: `383011532541268040` reads as `…030`, and a lookup
//! with the parsed value silently finds nothing. `row_to_json`,
//! `json_build_object` and `to_jsonb` all emit IDs as bare numbers. These
//! functions rewrite every integer in the `bigint` range beyond
//! ±(2^53 − 1), however deep in the document, as its decimal string, and
//! leave everything else alone (fractions, and numbers beyond `bigint`,
//! which only floating point can have produced). They
//! are SQL (`src/read/sql/js_safe.sql`); `snowflake_to_text(id)` is the same for
//! a single ID.
//!
//! ## `snowflake_to_jsonb(r anyelement)`
//!
//! A whole row (or any value) as JSON, IDs as strings. STABLE (like
//! `to_jsonb`, whose output of timestamps follows the session's settings).
//!
//! ```sql
//! SELECT snowflake_to_jsonb(o) FROM orders o LIMIT 1;
//! -- {"id": "383011532541268040", "item": "book", "qty": 2}
//! ```
//!
//! ## `snowflake_js_safe(j jsonb)`
//!
//! The same rewrite for a document built some other way. IMMUTABLE.
//!
//! ```sql
//! SELECT snowflake_js_safe(jsonb_build_object('id', o.id, 'lines', jsonb_agg(l.id)))
//!   FROM orders o JOIN order_lines l ON l.order_id = o.id GROUP BY o.id;
//! ```

use pgrx::prelude::*;

extension_sql_file!("sql/js_safe.sql", name = "js_safe");
