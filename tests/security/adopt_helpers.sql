-- sectest.check() and sectest.refused() (as setup.sql makes them in the
-- database postgres) for a database of adopt.sql's own, created by the
-- superuser; every role may call them.
SET client_min_messages = warning;
CREATE SCHEMA sectest;
GRANT USAGE ON SCHEMA sectest TO PUBLIC;
CREATE FUNCTION sectest.refused(stmt text, want text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        EXECUTE stmt;
    EXCEPTION WHEN OTHERS THEN
        IF SQLSTATE <> want THEN
            RAISE EXCEPTION 'expected SQLSTATE %, got %: % (from: %)', want, SQLSTATE, SQLERRM, stmt;
        END IF;
        RETURN SQLSTATE || ': ' || SQLERRM;
    END;
    RAISE EXCEPTION 'expected SQLSTATE % but it succeeded: %', want, stmt;
END;
$$;
CREATE FUNCTION sectest.check(ok boolean, what text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    IF ok IS NOT TRUE THEN
        RAISE EXCEPTION 'FAILED: %', what;
    END IF;
    RETURN 'ok: ' || what;
END;
$$;
RESET client_min_messages;
