//! `snowflake_convert_column(tbl regclass, col name)`: the migration path
//! from `serial`, `bigserial`, `IDENTITY` and `nextval()` defaults.
//!
//! It is catalog work and DDL, so it is written in PL/pgSQL and runs as the
//! caller (SECURITY INVOKER): PostgreSQL's own ownership checks apply to
//! every statement, and the function checks ownership up front to fail
//! with a clear message before touching anything. Everything happens in
//! the caller's transaction, so any error undoes all of it.
//!
//! Steps, each reported as one result row:
//! 1. refuse what cannot be converted (not a table, a partition, a
//!    non-integer or generated column, a foreign default, a materialized
//!    view or rule in the way, a table the caller does not own);
//! 2. drop the views that depend on the columns being widened (PostgreSQL
//!    cannot change a column's type under a view), remembering their
//!    definition, options, owner, grants, comments, triggers and defaults;
//! 3. keep the IDENTITY or the `nextval()` default of the column's own
//!    sequence as the application made it (issue 63: schema tools read
//!    the catalog they wrote); a default over a sequence that is shared,
//!    not owned by the column, or more than `nextval()` of it, is dropped
//!    and the sequence kept as it is;
//! 4. widen `smallint`/`integer` to `bigint`: the column and every
//!    foreign-key column that references it, transitively (widening an
//!    identity widens its sequence);
//! 5. adopt the column's own sequence (`snowflake_convert_adopt_sequence`:
//!    inserts and `nextval()` of it get Snowflake IDs), or, where step 3
//!    dropped the default, `SET DEFAULT snowflake_nextval()` (partitions
//!    follow the parent);
//! 6. recreate the views exactly as they were;
//! 7. check that the next ID is larger than every existing value, and
//!    fail (rolling everything back) if it is not.
//!
//! Running it again on a converted column changes nothing and says so.
//!
//! ## `snowflake_convert_column(tbl regclass, col name)`
//!
//! Makes a `serial`, `bigserial`, `IDENTITY` or `nextval()`-default
//! column hand out Snowflake IDs, widening it and every foreign-key
//! column that references it to `bigint`, in the caller's transaction:
//! the column keeps its identity or `nextval()` default, over its own
//! sequence, adopted. Existing values are kept. Returns one row per change.
//! Owner (or superuser) only; idempotent.
//!
//! ```sql
//! BEGIN;
//! SELECT * FROM snowflake_convert_column('orders', 'id');
//! --  step |     action      |          object          |        detail
//! --     1 | widen           | public.orders.id         | integer -> bigint
//! --     2 | widen           | public.order_items.order_id | integer -> bigint ...
//! --     3 | adopt sequence  | public.orders_id_seq     | of identity public.orders.id (GENERATED ALWAYS), which stays; ...
//! --     4 | check           | public.orders.id         | largest existing value 1042 < next ID ...
//! COMMIT;
//! ```

#[allow(unused_imports)] // named in `requires` below
use crate::convert::as_owner::snowflake_convert_as_owner;
#[allow(unused_imports)] // named in `requires` below
use crate::mint::nextval::snowflake_nextval;
use pgrx::prelude::*;

extension_sql_file!(
    "sql/convert_column.sql",
    name = "convert_column",
    requires = [snowflake_nextval, snowflake_convert_as_owner, "adopt"]
);
