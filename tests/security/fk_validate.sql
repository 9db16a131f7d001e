-- Attack F1 (issue 39): PostgreSQL's bulk foreign-key check
-- (RI_Initial_Check, behind ALTER TABLE ... VALIDATE CONSTRAINT) plans its
-- join as the current user, and planning const-folds the partial-index
-- predicates of the tables it reads. On 0.7.0 the online conversion
-- validated its new foreign keys as the caller: mallory's child table,
-- with a partial index WHERE mal.pred(1) (an IMMUTABLE function that calls
-- a VOLATILE one) added before the constraints step, ran her code as the
-- superuser who converted her parent table: she became SUPERUSER. The
-- swap's SET NOT NULL, which const-folds the table's CHECK constraints to
-- prove NOT NULL from them, did the same with her CHECK constraint. Her
-- code must run as mallory, in a security-restricted operation. Also: a
-- referencing table whose owner may not reference the converted table is
-- refused (42501), never validated with the caller's rights.
\set ON_ERROR_STOP 1
\c - postgres
ALTER ROLE mallory NOSUPERUSER;
\c - mallory
-- The payload: as a superuser, make mallory one and write the mark file.
-- Whoever it runs as, it tries to write the conversion's progress (its
-- write flag must be closed while her code runs) and notes a success.
CREATE TABLE mal.wrote_progress (who name, what text);
GRANT INSERT ON mal.wrote_progress TO PUBLIC;
CREATE FUNCTION mal.escalate(what text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $esc$
BEGIN
    BEGIN
        UPDATE public.snowflake_convert_progress SET updated_at = updated_at;
        INSERT INTO mal.wrote_progress VALUES (current_user, what);
    EXCEPTION WHEN insufficient_privilege THEN
        NULL;
    END;
    IF (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
        EXECUTE 'ALTER ROLE mallory SUPERUSER';
        EXECUTE pg_catalog.format('COPY (SELECT %L) TO PROGRAM %L', what || ' ran as ' || current_user,
                                  'cat >> ' || (SELECT c.mark FROM sectest.config c));
    END IF;
END;
$esc$;
CREATE FUNCTION mal.pred(x integer) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN PERFORM mal.escalate('F1 partial-index predicate'); RETURN x > 0; END $$;
CREATE FUNCTION mal.pred_check(x integer) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN PERFORM mal.escalate('F1 CHECK constraint'); RETURN x > 0; END $$;
CREATE TABLE mal.parent (id serial PRIMARY KEY, v integer);
CREATE TABLE mal.child (id bigserial PRIMARY KEY, pid integer NOT NULL REFERENCES mal.parent);
INSERT INTO mal.parent (v) SELECT g FROM generate_series(1, 50) g;
INSERT INTO mal.child (pid) SELECT id FROM mal.parent;
GRANT SELECT ON sectest.config TO mallory;

-- A superuser converts mal.parent online: prepare, back-fill, indexes.
\c - postgres
SET client_min_messages = warning;
CALL snowflake_convert_online('mal.parent', 'id');
SELECT snowflake_convert_online_indexes('mal.parent', 'id') \gexec
-- Before the constraints step, mallory adds her partial index.
\c - mallory
CREATE INDEX child_pred ON mal.child (id) WHERE mal.pred(1);
-- And a CHECK constraint, which the swap's SET NOT NULL const-folds.
ALTER TABLE mal.child ADD CONSTRAINT child_check CHECK (mal.pred_check(1));
\c - postgres
SET client_min_messages = warning;
CALL snowflake_convert_online('mal.parent', 'id');
RESET client_min_messages;
SELECT sectest.check(phase = 'done', 'the online conversion of mal.parent (referenced by mal.child) is done')
  FROM snowflake_convert_status WHERE "table" = 'mal.parent'::regclass AND relation = 'mal.child'::regclass;
SELECT sectest.check(format_type(atttypid, atttypmod) = 'bigint', 'mal.child.pid is now bigint')
  FROM pg_attribute WHERE attrelid = 'mal.child'::regclass AND attname = 'pid';
SELECT sectest.check(convalidated, 'mal.child''s new foreign key is validated')
  FROM pg_constraint WHERE conrelid = 'mal.child'::regclass AND contype = 'f';
SELECT sectest.check(NOT rolsuper, 'F1: validating mal.child''s foreign key did not make mallory a superuser')
  FROM pg_roles WHERE rolname = 'mallory';
SELECT sectest.check(count(*) = 0, 'F1: mallory''s code could not write the conversion''s progress: '
                                   || coalesce(string_agg(who || ' in ' || what, ', '), ''))
  FROM mal.wrote_progress;
SELECT sectest.check(coalesce(pg_read_file(c.mark, 0, 100000, true), '') !~ 'F1 ',
                     'F1: mallory''s partial-index predicate never ran as a superuser')
  FROM sectest.config c;

-- A referencing table owned by alice, whose foreign key a superuser
-- created: alice may not reference mallory's table. The conversion refuses
-- to validate it as alice (42501, with a HINT) rather than as the caller,
-- and resumes once alice is granted REFERENCES and SELECT.
\c - mallory
CREATE TABLE mal.parent2 (id serial PRIMARY KEY);
INSERT INTO mal.parent2 SELECT FROM generate_series(1, 10);
\c - postgres
CREATE TABLE app.kid (id serial PRIMARY KEY, pid integer REFERENCES mal.parent2);
ALTER TABLE app.kid OWNER TO alice;
INSERT INTO app.kid (pid) SELECT id FROM mal.parent2;
SET client_min_messages = warning;
CALL snowflake_convert_online('mal.parent2', 'id');
SELECT snowflake_convert_online_indexes('mal.parent2', 'id') \gexec
-- The steps in one transaction (a CALL commits, which EXECUTE cannot).
SELECT sectest.refused($q$DO $d$ DECLARE i integer := 0; BEGIN
    LOOP
        i := i + 1;
        EXIT WHEN i > 50 OR snowflake_convert_online_step('mal.parent2', 'id', 1000, '1s') IN ('done', 'indexes');
    END LOOP; END $d$$q$, '42501');
\set VERBOSITY verbose
\set ON_ERROR_STOP 0
CALL snowflake_convert_online('mal.parent2', 'id');
\set ON_ERROR_STOP 1
\set VERBOSITY default
\c - mallory
GRANT USAGE ON SCHEMA mal TO alice;
GRANT SELECT, REFERENCES ON mal.parent2 TO alice;
\c - postgres
SET client_min_messages = warning;
CALL snowflake_convert_online('mal.parent2', 'id');
RESET client_min_messages;
SELECT sectest.check(phase = 'done', 'the conversion resumes once alice may reference mal.parent2')
  FROM snowflake_convert_status WHERE "table" = 'mal.parent2'::regclass AND relation = 'app.kid'::regclass;
SELECT sectest.check(NOT rolsuper, 'mallory is not a superuser') FROM pg_roles WHERE rolname = 'mallory';
SELECT sectest.nothing_leaked();
SELECT sectest.accounts_unchanged();
