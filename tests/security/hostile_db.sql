-- Included by hostile_install.sql and hostile_online.sql, as postgres, in each database it
-- creates: the mark's path and the check that nothing of mallory's ran as
-- another role, in a schema only the superuser may create in. The check
-- pins its own search_path: her operators must not catch it either.
CREATE SCHEMA sectest;
GRANT USAGE ON SCHEMA sectest TO PUBLIC;
CREATE TABLE public.hs_config (mark text NOT NULL);
INSERT INTO public.hs_config VALUES (:'mark');
GRANT SELECT ON public.hs_config TO PUBLIC;
CREATE FUNCTION sectest.check(ok boolean, what text) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF ok IS NOT TRUE THEN
        RAISE EXCEPTION 'FAILED: %', what;
    END IF;
    RETURN 'ok: ' || what;
END;
$$;
CREATE FUNCTION sectest.nothing_ran(what text) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    ran text;
BEGIN
    IF to_regclass('public.hs_ran') IS NOT NULL THEN
        EXECUTE 'SELECT string_agg(h.what || '' as '' || h.who, ''; '' ORDER BY h.what, h.who) FROM public.hs_ran h' INTO ran;
        IF ran IS NOT NULL THEN
            RAISE EXCEPTION 'FAILED: %: mallory''s operators ran as another role: %', what, ran;
        END IF;
    END IF;
    IF (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = 'mallory') THEN
        RAISE EXCEPTION 'FAILED: %: mallory became a superuser', what;
    END IF;
    IF position(current_database() || ': ' IN
                coalesce(pg_read_file((SELECT c.mark FROM public.hs_config c), 0, 1000000, true), '')) > 0 THEN
        RAISE EXCEPTION 'FAILED: %: mallory''s code ran as a superuser in database %', what, current_database();
    END IF;
    RETURN 'ok: ' || what;
END;
$$;
-- No view or policy of the extension uses an operator outside pg_catalog.
CREATE FUNCTION sectest.no_foreign_operators(what text) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    found text;
BEGIN
    SELECT string_agg(DISTINCT o.oid::regoperator::text, ', ') INTO found
      FROM pg_depend d
      JOIN pg_operator o ON d.refclassid = 'pg_operator'::regclass AND o.oid = d.refobjid
     WHERE o.oprnamespace <> 'pg_catalog'::regnamespace
       AND ((d.classid = 'pg_rewrite'::regclass AND EXISTS (
                SELECT 1 FROM pg_rewrite rw JOIN pg_depend e ON e.classid = 'pg_class'::regclass AND e.objid = rw.ev_class
                  JOIN pg_extension x ON x.oid = e.refobjid AND x.extname = 'snowflake_id'
                 WHERE rw.oid = d.objid AND e.deptype = 'e'))
         OR (d.classid = 'pg_policy'::regclass AND EXISTS (
                SELECT 1 FROM pg_policy pol JOIN pg_depend e ON e.classid = 'pg_class'::regclass AND e.objid = pol.polrelid
                  JOIN pg_extension x ON x.oid = e.refobjid AND x.extname = 'snowflake_id'
                 WHERE pol.oid = d.objid AND e.deptype = 'e')));
    IF found IS NOT NULL THEN
        RAISE EXCEPTION 'FAILED: %: the extension''s views and policies use mallory''s operators %', what, found;
    END IF;
    RETURN 'ok: ' || what;
END;
$$;
