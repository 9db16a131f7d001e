-- The security layer's cast (tests/security/run.sh): alice owns the victim
-- tables, mallory is a plain role with a schema of her own, dba is a member
-- of both (inheriting their privileges) but not a superuser. sectest holds
-- the assertion helpers and alice's fingerprint, writable by the superuser
-- only.
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
CREATE ROLE alice LOGIN;
CREATE ROLE mallory LOGIN;
CREATE ROLE dba LOGIN IN ROLE alice, mallory;
CREATE SCHEMA app AUTHORIZATION alice;
CREATE SCHEMA mal AUTHORIZATION mallory;
GRANT USAGE ON SCHEMA app TO PUBLIC;

CREATE SCHEMA sectest;
GRANT USAGE ON SCHEMA sectest TO PUBLIC;
-- Where a payload that runs as a superuser writes (COPY ... TO PROGRAM):
-- the file must never appear.
CREATE TABLE sectest.config (mark text NOT NULL);
INSERT INTO sectest.config VALUES (:'mark');
GRANT SELECT ON sectest.config TO PUBLIC;

-- sectest.refused(stmt, sqlstate): stmt fails with exactly that SQLSTATE
-- (a statement timeout included).
CREATE FUNCTION sectest.refused(stmt text, want text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        EXECUTE stmt;
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        IF SQLSTATE <> want THEN
            RAISE EXCEPTION 'expected SQLSTATE %, got %: % (from: %)', want, SQLSTATE, SQLERRM, stmt;
        END IF;
        RETURN SQLSTATE || ': ' || SQLERRM;
    END;
    RAISE EXCEPTION 'expected SQLSTATE % but it succeeded: %', want, stmt;
END;
$$;
-- sectest.check(ok, what): fail with WHAT unless OK.
CREATE FUNCTION sectest.check(ok boolean, what text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    IF ok IS NOT TRUE THEN
        RAISE EXCEPTION 'FAILED: %', what;
    END IF;
    RETURN 'ok: ' || what;
END;
$$;

-- alice's table, and its fingerprint: columns and rows.
SET ROLE alice;
CREATE TABLE app.accounts (id serial PRIMARY KEY, balance integer NOT NULL, secret text);
INSERT INTO app.accounts (balance, secret) SELECT g * 10, 'secret ' || g FROM generate_series(1, 100) g;
RESET ROLE;
CREATE VIEW sectest.accounts_now AS
SELECT (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
          FROM pg_attribute a WHERE a.attrelid = 'app.accounts'::regclass AND a.attnum > 0 AND NOT a.attisdropped) AS cols,
       (SELECT md5(string_agg(t::text, ',' ORDER BY t.id)) FROM app.accounts t) AS rows;
CREATE TABLE sectest.accounts_then AS SELECT * FROM sectest.accounts_now;
CREATE FUNCTION sectest.accounts_unchanged() RETURNS text
LANGUAGE sql AS $$
    SELECT sectest.check((SELECT n = t FROM sectest.accounts_now n, sectest.accounts_then t),
                         'app.accounts has the same columns and rows as before');
$$;

-- mallory's spy: run by her code (index expressions, CHECK constraints,
-- policies, triggers). As a superuser it runs a program; with the
-- privileges of a member of alice it copies alice's data into mallory's
-- sequence. Neither must ever happen: her code runs as mallory.
SET ROLE mallory;
CREATE SEQUENCE mal.leak;
CREATE FUNCTION mal.spy() RETURNS void
LANGUAGE plpgsql VOLATILE AS $spy$
BEGIN
    IF (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user) THEN
        EXECUTE format('COPY (SELECT current_user) TO PROGRAM %L',
                       'cat >> ' || (SELECT c.mark FROM sectest.config c));
    END IF;
    BEGIN
        PERFORM setval('mal.leak', (SELECT max(a.balance) FROM app.accounts a));
    EXCEPTION WHEN insufficient_privilege THEN
        NULL;
    END;
END;
$spy$;
CREATE FUNCTION mal.spy_int(x bigint) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN PERFORM mal.spy(); RETURN x; END $$;
CREATE FUNCTION mal.spy_ok(x bigint) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN PERFORM mal.spy(); RETURN true; END $$;
CREATE FUNCTION mal.spy_trigger() RETURNS trigger
LANGUAGE plpgsql AS $$ BEGIN PERFORM mal.spy(); RETURN NEW; END $$;
RESET ROLE;
CREATE FUNCTION sectest.nothing_leaked() RETURNS text
LANGUAGE sql AS $$
    SELECT sectest.check((SELECT NOT is_called FROM mal.leak),
                         'mallory''s code never ran with the privileges of a member of alice');
$$;
