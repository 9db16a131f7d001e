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
//! 3. drop the IDENTITY or the `nextval()` default; the sequence the
//!    column owned stays (an identity's is made again under its name),
//!    and is adopted after step 5 (`snowflake_convert_adopt_sequence`:
//!    `nextval()` of it returns Snowflake IDs); a shared one is kept as
//!    it is;
//! 4. widen `smallint`/`integer` to `bigint`: the column and every
//!    foreign-key column that references it, transitively;
//! 5. `SET DEFAULT snowflake_nextval()` (partitions follow the parent);
//! 6. recreate the views exactly as they were;
//! 7. check that the next ID is larger than every existing value, and
//!    fail (rolling everything back) if it is not.
//!
//! Running it again on a converted column changes nothing and says so.
//!
//! ## `snowflake_convert_column(tbl regclass, col name)`
//!
//! Switches a `serial`, `bigserial`, `IDENTITY` or `nextval()`-default
//! column to `DEFAULT snowflake_nextval()`, widening it and every
//! foreign-key column that references it to `bigint`, in the caller's
//! transaction. Existing values are kept. Returns one row per change.
//! Owner (or superuser) only; idempotent.
//!
//! ```sql
//! BEGIN;
//! SELECT * FROM snowflake_convert_column('orders', 'id');
//! --  step |     action      |          object          |        detail
//! --     1 | drop identity   | public.orders.id         | GENERATED ALWAYS ...
//! --     2 | widen           | public.orders.id         | integer -> bigint
//! --     3 | widen           | public.order_items.order_id | integer -> bigint ...
//! --   ... | set default     | public.orders.id         | snowflake_nextval()
//! --   ... | check           | public.orders.id         | largest existing value 1042 < next ID ...
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
