-- A snowflake-keyed table split into 8 hash partitions on its key, so
-- that concurrent inserts spread over 8 right-most index pages instead of
-- one. Run with psql -v tbl=<name>; bench/inserts.sh measures it.
CREATE TABLE :"tbl" (
    id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
    v  int NOT NULL
) PARTITION BY HASH (id);
SELECT format('CREATE TABLE %I PARTITION OF %I FOR VALUES WITH (MODULUS 8, REMAINDER %s)',
              :'tbl' || '_' || r, :'tbl', r)
  FROM generate_series(0, 7) AS r \gexec
