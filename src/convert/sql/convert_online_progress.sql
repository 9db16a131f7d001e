-- The online conversion's progress table and its status view: see
-- src/convert/convert_online.rs. Included in the install script by
-- extension_sql_file! before src/convert/sql/convert_online.sql, which holds the
-- functions and, because upgrades carry it too, the guard trigger on the
-- table and the grant on the view.

-- One row per column being widened: the key column itself and each
-- foreign-key column that references it. Row-level security shows only
-- the rows of tables the current user owns; the guard trigger below lets
-- only the conversion's own entry points write (src/convert/convert_online.rs).
CREATE TABLE snowflake_convert_progress (
    tbl         regclass NOT NULL,
    col         name NOT NULL,
    rel         regclass NOT NULL,
    rel_col     name NOT NULL,
    new_col     name NOT NULL,
    not_null    boolean NOT NULL,
    phase       text NOT NULL,
    pages_total bigint NOT NULL,
    pages_done  bigint NOT NULL DEFAULT 0,
    rows_done   bigint NOT NULL DEFAULT 0,
    batches     bigint NOT NULL DEFAULT 0,
    started_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (tbl, col, rel, rel_col)
);
SELECT pg_catalog.pg_extension_config_dump('snowflake_convert_progress', '');
ALTER TABLE snowflake_convert_progress ENABLE ROW LEVEL SECURITY;
-- The operators of a policy or a view are bound when it is created, with
-- the search_path of CREATE EXTENSION (or of the upgrade): its schema,
-- where a role allowed to create there may have put an operator of
-- exactly the argument types used here (oid = regclass has none in
-- pg_catalog). So every operator is pg_catalog's, named, and every
-- argument has exactly its type; scripts/check_sql_operators.py checks it.
CREATE POLICY owner_only ON snowflake_convert_progress
    USING (pg_catalog.pg_has_role(current_user,
               (SELECT c.relowner FROM pg_catalog.pg_class c
                 WHERE c.oid OPERATOR(pg_catalog.=) tbl::pg_catalog.oid),
               'USAGE'::pg_catalog.text));
GRANT SELECT, INSERT, UPDATE, DELETE ON snowflake_convert_progress TO PUBLIC;
COMMENT ON TABLE snowflake_convert_progress IS
'Progress of snowflake_convert_online(): one row per column being widened';

CREATE VIEW snowflake_convert_status WITH (security_invoker = true) AS
SELECT p.tbl AS "table", p.col AS "column", p.rel AS relation, p.rel_col AS relation_column,
       p.phase, p.pages_done, p.pages_total,
       pg_catalog.round((100.0::pg_catalog.numeric OPERATOR(pg_catalog.*) p.pages_done::pg_catalog.numeric)
                        OPERATOR(pg_catalog./) greatest(p.pages_total, 1::pg_catalog.int8)::pg_catalog.numeric,
                        1::pg_catalog.int4) AS percent_done,
       p.rows_done, p.batches, p.started_at, p.updated_at
  FROM snowflake_convert_progress p;
COMMENT ON VIEW snowflake_convert_status IS
'What snowflake_convert_online() has done, per column being widened';
