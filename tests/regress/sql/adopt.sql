-- Adopted sequences (issue 57, src/adopt/): nextval(), currval(),
-- lastval() and setval() of an adopted sequence, from SQL, PL/pgSQL,
-- prepared statements and column defaults (COPY included), with
-- PostgreSQL's own checks; every other sequence as before. Cluster A:
-- preloaded, worker id 42. IDs are compared and decoded, never printed.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id;
DROP ROLE IF EXISTS adopt_plain;
CREATE ROLE adopt_plain;
RESET client_min_messages;
\set VERBOSITY terse
CREATE SCHEMA adopt;
CREATE TABLE adopt.orders (id bigserial PRIMARY KEY, item text);
CREATE TABLE adopt.small (id serial PRIMARY KEY);
CREATE TABLE adopt.ident (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY);
CREATE SEQUENCE adopt.plain;
CREATE SEQUENCE adopt.hib INCREMENT BY 50;
-- Before adoption: a sequence, and a prepared statement and a PL/pgSQL
-- function planned now, run again after it.
SELECT nextval('adopt.orders_id_seq') AS before, nextval('adopt.plain') AS plain;
PREPARE early AS SELECT nextval('adopt.orders_id_seq');
EXECUTE early;
CREATE FUNCTION adopt.next_order() RETURNS bigint LANGUAGE plpgsql
    AS $$ BEGIN RETURN nextval('adopt.orders_id_seq'); END $$;
SELECT adopt.next_order();

-- What cannot be adopted.
SELECT snowflake_adopt_sequence('adopt.orders');
SELECT snowflake_adopt_sequence('adopt.small_id_seq');
SELECT snowflake_adopt_sequence('adopt.ident_id_seq');
GRANT USAGE ON SCHEMA adopt TO adopt_plain;
SET ROLE adopt_plain;
SELECT snowflake_adopt_sequence('adopt.orders_id_seq');
RESET ROLE;

-- Adopt: the bigserial's default becomes snowflake_nextval(), and every
-- call of nextval() of it returns a Snowflake ID of worker 42.
SELECT snowflake_adopt_sequence('adopt.orders_id_seq');
SELECT snowflake_adopt_sequence('adopt.orders_id_seq');  -- again: nothing changes
SELECT seq::text, adopted_by FROM snowflake_id_internal.snowflake_adopted ORDER BY 1;
SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = 'adopt.orders'::regclass;
SELECT pg_get_serial_sequence('adopt.orders', 'id');
SELECT snowflake_worker_id(nextval('adopt.orders_id_seq')) AS worker;
SELECT currval('adopt.orders_id_seq') = lastval() AS currval_is_lastval,
       snowflake_timestamp(currval('adopt.orders_id_seq')) > now() - interval '1 hour' AS recent;
SELECT currval('adopt.orders_id_seq') AS c \gset
SELECT nextval('adopt.orders_id_seq') > :c AS increasing;
-- The prepared statement and the function planned before: now IDs too.
EXECUTE early \gset e_
SELECT snowflake_worker_id(:e_nextval) AS worker, :e_nextval = currval('adopt.orders_id_seq') AS is_currval;
SELECT snowflake_worker_id(adopt.next_order()) AS worker;
-- A statement planned after: from PL/pgSQL, a DO block, a SQL function.
DO $$ BEGIN
    IF snowflake_worker_id(nextval('adopt.orders_id_seq')) IS DISTINCT FROM 42 THEN
        RAISE EXCEPTION 'a DO block got no Snowflake ID';
    END IF;
END $$;
CREATE FUNCTION adopt.next_sql() RETURNS bigint LANGUAGE sql
    AS $$ SELECT nextval('adopt.orders_id_seq') $$;
SELECT snowflake_worker_id(adopt.next_sql()) AS worker;
-- Inlined into the statement that calls it (a simple SQL function), or
-- not; a BEGIN ATOMIC body; a function calling that function.
CREATE FUNCTION adopt.next_atomic() RETURNS bigint LANGUAGE sql
    BEGIN ATOMIC SELECT nextval('adopt.orders_id_seq'); END;
CREATE FUNCTION adopt.next_outer() RETURNS bigint LANGUAGE sql
    AS $$ SELECT adopt.next_sql() $$;
SELECT snowflake_worker_id(adopt.next_atomic()) AS atomic, snowflake_worker_id(adopt.next_outer()) AS nested,
       snowflake_worker_id(v) AS from_clause FROM adopt.next_sql() AS v;
-- The argument as text, a parameter, an expression: decided per call.
SELECT snowflake_worker_id(nextval('adopt.orders_id_seq'::text::regclass)) AS worker;
PREPARE by_name(regclass) AS SELECT nextval($1);
EXECUTE by_name('adopt.orders_id_seq') \gset p_
EXECUTE by_name('adopt.plain') \gset q_
SELECT snowflake_worker_id(:p_nextval) AS worker, :q_nextval AS plain;
SELECT snowflake_worker_id(nextval(pg_get_serial_sequence('adopt.orders', 'id'))) AS worker;
-- Inserts through the default, and COPY: Snowflake IDs.
INSERT INTO adopt.orders (item) VALUES ('a'), ('b');
COPY adopt.orders (item) FROM STDIN;
c
\.
INSERT INTO adopt.orders (id, item) VALUES (nextval('adopt.orders_id_seq'), 'd');
SELECT count(*) AS rows, count(*) FILTER (WHERE snowflake_worker_id(id) = 42) AS snowflake
  FROM adopt.orders;

-- lastval() follows the session's last nextval(), adopted or not.
SELECT nextval('adopt.plain') AS plain, lastval() AS lastval;
SELECT snowflake_worker_id(nextval('adopt.orders_id_seq')) AS worker,
       lastval() = currval('adopt.orders_id_seq') AS lastval_is_it;
SELECT currval('adopt.plain') AS plain_currval;

-- setval(): a WARNING, and nothing changes.
SELECT setval('adopt.orders_id_seq', 5);
SELECT setval('adopt.orders_id_seq', 5, false);
SELECT nextval('adopt.orders_id_seq') > 5 AS unchanged;
SELECT setval('adopt.plain', 100), nextval('adopt.plain');

-- INCREMENT BY 50: the 49 IDs on each side of the value are this call's
-- too (Hibernate's pooled and pooled-lo optimizers), all in one
-- millisecond of worker 42: consecutive integers.
SELECT snowflake_adopt_sequence('adopt.hib');
SELECT nextval('adopt.hib') AS v \gset
SELECT snowflake_worker_id(:v - 49) = 42 AND snowflake_worker_id(:v + 49) = 42 AS same_worker,
       snowflake_timestamp(:v - 49) = snowflake_timestamp(:v + 49) AS same_millisecond,
       snowflake_sequence(:v + 49) - snowflake_sequence(:v - 49) AS span;
SELECT nextval('adopt.hib') - :v >= 50 AS next_is_past_the_range;
SELECT count(DISTINCT v) AS distinct_values,
       bool_and(snowflake_sequence(v + 49) - snowflake_sequence(v - 49) = 98) AS each_a_run
  FROM (SELECT nextval('adopt.hib') AS v FROM generate_series(1, 500)) t;
ALTER SEQUENCE adopt.hib INCREMENT BY 3000;
SELECT nextval('adopt.hib');
ALTER SEQUENCE adopt.hib INCREMENT BY -50;
SELECT snowflake_sequence(nextval('adopt.hib') + 49) - snowflake_sequence(currval('adopt.hib') - 49) AS span;

-- PostgreSQL's checks, for an adopted sequence as for any.
SET ROLE adopt_plain;
SELECT nextval('adopt.orders_id_seq');
SELECT currval('adopt.orders_id_seq');
SELECT setval('adopt.orders_id_seq', 1);
SELECT lastval();
RESET ROLE;
GRANT SELECT ON SEQUENCE adopt.orders_id_seq TO adopt_plain;
SET ROLE adopt_plain;
SELECT nextval('adopt.orders_id_seq');
SELECT snowflake_worker_id(currval('adopt.orders_id_seq')) AS worker;
RESET ROLE;
GRANT USAGE ON SEQUENCE adopt.orders_id_seq TO adopt_plain;
SET ROLE adopt_plain;
SELECT snowflake_worker_id(nextval('adopt.orders_id_seq')) AS worker;
RESET ROLE;
BEGIN READ ONLY;
SELECT nextval('adopt.orders_id_seq');
ROLLBACK;
-- A new session: currval() and lastval() not yet defined.
\c
\set VERBOSITY terse
SELECT currval('adopt.orders_id_seq');
SELECT lastval();
SELECT snowflake_worker_id(nextval('adopt.orders_id_seq')) AS worker;
EXPLAIN (VERBOSE, COSTS OFF) SELECT nextval('adopt.orders_id_seq');

-- A dropped sequence leaves the list (its OID may come back).
DROP TABLE adopt.orders;
SELECT seq::text, adopted_by FROM snowflake_id_internal.snowflake_adopted ORDER BY 1;
DROP SEQUENCE adopt.hib;
SELECT count(*) AS adopted FROM snowflake_id_internal.snowflake_adopted;
-- No adopted sequence left: statements are planned as before.
EXPLAIN (VERBOSE, COSTS OFF) SELECT nextval('adopt.plain');
SET client_min_messages = warning;
DROP SCHEMA adopt CASCADE;
DROP OWNED BY adopt_plain;
DROP ROLE adopt_plain;
