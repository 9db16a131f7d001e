-- Attack 2: the owner's code runs with the caller's privileges. On 0.6.0
-- the dry run copied a sample with the owner's expression indexes into a
-- table the caller owned, so a superuser's snowflake_convert_plan() ran
-- mallory's index expression as a superuser (COPY ... TO PROGRAM). Also
-- tried: the online back-fill (the owner's triggers), the offline
-- rewrite (CHECK constraints) and the final check (forced row-level
-- security policies). Every one must run mallory's code as mallory: the
-- mark file stays absent (checked by run.sh) and mal.leak unset.
\set ON_ERROR_STOP 1
\c - mallory
CREATE TABLE mal.d (id serial PRIMARY KEY, v integer);
INSERT INTO mal.d (v) SELECT g FROM generate_series(1, 100) g;
CREATE INDEX ON mal.d (mal.spy_int(v));
CREATE TABLE mal.b (id serial PRIMARY KEY, v integer);
INSERT INTO mal.b (v) SELECT g FROM generate_series(1, 100) g;
CREATE TRIGGER spy BEFORE UPDATE ON mal.b FOR EACH ROW EXECUTE FUNCTION mal.spy_trigger();
CREATE TABLE mal.b2 (id serial PRIMARY KEY, v integer);
INSERT INTO mal.b2 (v) SELECT g FROM generate_series(1, 100) g;
CREATE TRIGGER spy BEFORE UPDATE ON mal.b2 FOR EACH ROW EXECUTE FUNCTION mal.spy_trigger();
CREATE TABLE mal.c (id serial PRIMARY KEY CHECK (mal.spy_ok(id)), v integer);
INSERT INTO mal.c (v) SELECT g FROM generate_series(1, 100) g;
CREATE TABLE mal.f (id serial PRIMARY KEY, v integer);
INSERT INTO mal.f (v) SELECT g FROM generate_series(1, 100) g;
ALTER TABLE mal.f ENABLE ROW LEVEL SECURITY;
ALTER TABLE mal.f FORCE ROW LEVEL SECURITY;
CREATE POLICY spy ON mal.f USING (mal.spy_ok(v));

-- The dry run, by a superuser and by dba.
\c - postgres
SELECT sectest.check(count(*) > 0, 'a superuser''s dry run of mal.d') FROM snowflake_convert_plan('mal.d', 'id');
SELECT sectest.check(estimate_basis ~ '^estimate from a logged sample of 100 rows', 'the dry run still measures a sample')
  FROM snowflake_convert_plan('mal.d', 'id') WHERE action = 'widen';
\c - dba
SELECT sectest.check(count(*) > 0, 'dba''s dry run of mal.d') FROM snowflake_convert_plan('mal.d', 'id');
SELECT sectest.nothing_leaked();

-- The online back-fill fires mallory's trigger: by dba, then a superuser.
\c - dba
SET client_min_messages = warning;
CALL snowflake_convert_online('mal.b', 'id');
SELECT sectest.check(rows_done = 100, 'dba''s back-fill of mal.b updated its 100 rows')
  FROM snowflake_convert_status WHERE "table" = 'mal.b'::regclass;
SELECT sectest.nothing_leaked();
\c - postgres
SET client_min_messages = warning;
CALL snowflake_convert_online('mal.b2', 'id');
SELECT count(*) FROM snowflake_convert_online_abandon('mal.b', 'id');
SELECT count(*) FROM snowflake_convert_online_abandon('mal.b2', 'id');

-- The offline conversion: the rewrite checks mallory's CHECK constraint;
-- the final max() reads a table that forces her policy.
\c - dba
SELECT sectest.check(count(*) > 0, 'dba converts mal.c') FROM snowflake_convert_column('mal.c', 'id');
SELECT sectest.check(count(*) > 0, 'dba converts mal.f') FROM snowflake_convert_column('mal.f', 'id');
SELECT sectest.nothing_leaked();
\c - postgres
SELECT sectest.check(format_type(atttypid, atttypmod) = 'bigint', 'mal.c.id is now bigint')
  FROM pg_attribute WHERE attrelid = 'mal.c'::regclass AND attname = 'id';

-- The primitive itself: only for roles with the owner's privileges, and
-- restricted (no SET ROLE back to the caller).
\c - mallory
SELECT sectest.refused($$SELECT snowflake_convert_as_owner('app.accounts'::regclass, 'UPDATE app.accounts SET balance = 0')$$, '42501');
SELECT sectest.refused($$SELECT snowflake_convert_as_owner(0, 'SELECT 1::bigint')$$, '42P01');
\c - dba
SELECT sectest.refused($$SELECT snowflake_convert_as_owner('mal.t'::regclass, 'SET ROLE dba')$$, '42501');
SELECT sectest.refused($$SELECT snowflake_convert_as_owner('mal.t'::regclass, 'CREATE TEMP TABLE x (i int)')$$, '42501');
SELECT sectest.check(snowflake_convert_as_owner('mal.t'::regclass, 'SELECT count(*) FROM mal.t WHERE current_user = ''mallory''') = 100,
                     'snowflake_convert_as_owner runs as the table''s owner');
\c - postgres
SELECT sectest.accounts_unchanged();
