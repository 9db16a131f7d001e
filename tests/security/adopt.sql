-- Adopted sequences (issue 57; src/adopt/): the red-team review of the
-- first version (F1-F9 below) and what must hold for every role. Each
-- part ran its attack on 447f0d9/fcb7ddd and got through there.
-- Runs in databases of its own; a role that ever becomes a superuser is
-- caught by sectest.never_super() at the end of each part.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE ROLE adopt_carol LOGIN CREATEDB;
CREATE ROLE adopt_dbo LOGIN;
CREATE ROLE adopt_alice LOGIN;
CREATE ROLE adopt_mallory LOGIN;
CREATE FUNCTION sectest.never_super() RETURNS text LANGUAGE sql AS $$
    SELECT sectest.check(NOT EXISTS (SELECT FROM pg_roles WHERE rolname LIKE 'adopt\_%' AND rolsuper),
                         'no adopt_* role became a superuser');
$$;
RESET client_min_messages;

-- F1. A role with CREATE on a database (here a CREATEDB role in her own)
-- planted a schema snowflake_id_internal with a list and seq_* functions
-- of her own: the planner hook called them in every statement, a
-- superuser's included (she became one). Only the extension's own
-- objects count now: in her database, which has no extension, nextval()
-- is PostgreSQL's, and her functions never run.
\c - adopt_carol
CREATE DATABASE adopt_carol_db;
\c adopt_carol_db adopt_carol
CREATE SCHEMA snowflake_id_internal;
CREATE FUNCTION snowflake_id_internal.seq_nextval(regclass) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        EXECUTE 'ALTER ROLE adopt_carol SUPERUSER';
    END IF;
    RETURN 42;
END $$;
CREATE FUNCTION snowflake_id_internal.seq_currval(regclass) RETURNS bigint LANGUAGE sql AS 'SELECT 42::bigint';
CREATE FUNCTION snowflake_id_internal.seq_setval(regclass, bigint) RETURNS bigint LANGUAGE sql AS 'SELECT 42::bigint';
CREATE FUNCTION snowflake_id_internal.seq_setval(regclass, bigint, boolean) RETURNS bigint LANGUAGE sql AS 'SELECT 42::bigint';
CREATE FUNCTION snowflake_id_internal.seq_lastval() RETURNS bigint LANGUAGE sql AS 'SELECT 42::bigint';
CREATE TABLE snowflake_id_internal.snowflake_adopted (seq regclass);
CREATE SEQUENCE public.s;
INSERT INTO snowflake_id_internal.snowflake_adopted VALUES ('public.s');
\c adopt_carol_db postgres
\ir adopt_helpers.sql
SELECT sectest.check(nextval('public.s') = 1, 'F1: her planted list and functions are not the extension''s: nextval() is the sequence''s');
SELECT sectest.check(true, 'F1: a statement in her database plans without her functions');
-- With the extension installed next to her objects (CREATE EXTENSION
-- moves a squatted snowflake_id_internal aside), still only its own.
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
RESET client_min_messages;
SELECT sectest.check(nextval('public.s') = 2, 'F1: with the extension installed beside them, still the sequence''s');
\c postgres postgres
SELECT sectest.never_super();

-- F2. A database's owner (CREATE in its public schema, where the
-- extension lives) planted an overload snowflake_convert_as_owner(regclass,
-- text): the adoption called it by name, as a superuser (she became one),
-- and so did the switch's event trigger on her own CREATE TABLE. The
-- adoption now calls its own function in its internal schema, with exact
-- types.
CREATE DATABASE adopt_owned OWNER adopt_dbo;
\c adopt_owned postgres
\ir adopt_helpers.sql
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
RESET client_min_messages;
\c adopt_owned adopt_dbo
CREATE FUNCTION public.snowflake_convert_as_owner(rel regclass, stmt text) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
        EXECUTE 'ALTER ROLE adopt_dbo SUPERUSER';
    END IF;
    RETURN public.snowflake_convert_as_owner(rel::oid, stmt);
END $$;
CREATE TABLE public.t (id bigserial PRIMARY KEY);
\c adopt_owned postgres
SELECT snowflake_adopt_sequence('public.t_id_seq');
SELECT sectest.check(pg_get_expr(adbin, adrelid) = format('nextval(%L::regclass)', 'public.t_id_seq'::regclass),
                     'F2: the adoption ran, and her default is as she made it (issue 63)')
  FROM pg_attrdef WHERE adrelid = 'public.t'::regclass;
SELECT snowflake_adopt_sequences();
\c adopt_owned adopt_dbo
CREATE TABLE public.t2 (id bigserial PRIMARY KEY);
CREATE TABLE public.t3 (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY);
\c postgres postgres
SELECT sectest.never_super();

-- F3, F4. The adoption rewrote every default that mentions the sequence:
-- alice's currval() default, and mallory's integer column on alice's
-- sequence (which also stopped the adoption with 42804). Now only a
-- default that is nextval() of it alone, in a table of the sequence's
-- owner, becomes snowflake_nextval(); the rest keep theirs (NOTICE).
CREATE DATABASE adopt_defaults;
\c adopt_defaults postgres
\ir adopt_helpers.sql
SET client_min_messages = warning;
CREATE EXTENSION snowflake_id;
RESET client_min_messages;
CREATE SCHEMA a AUTHORIZATION adopt_alice;
CREATE SCHEMA m AUTHORIZATION adopt_mallory;
GRANT USAGE ON SCHEMA a TO adopt_mallory;
\c adopt_defaults adopt_alice
CREATE TABLE a.orders (id bigserial PRIMARY KEY);
CREATE TABLE a.lines (order_id bigint DEFAULT currval('a.orders_id_seq'), n bigint DEFAULT nextval('a.orders_id_seq') * 10);
\c adopt_defaults adopt_mallory
CREATE TABLE m.blocker (x integer DEFAULT nextval('a.orders_id_seq'));
\c adopt_defaults postgres
SELECT snowflake_adopt_sequence('a.orders_id_seq');
SELECT c.relname, a.attname, pg_get_expr(d.adbin, d.adrelid) AS default_now
  FROM pg_attrdef d JOIN pg_class c ON c.oid = d.adrelid
  JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
 WHERE c.relnamespace IN ('a'::regnamespace, 'm'::regnamespace) ORDER BY 1, 2;

-- F6. An operator or aggregate over nextval()/setval() went around the
-- swap; with UPDATE on the sequence, mallory moved its counter onto an ID
-- just minted and drew it again. Operators are swapped now, and the
-- sequence's own counter is fenced (at the end of its range, called),
-- so a path the planner does not see draws nothing (2200H); the swapped
-- setval() never moves it back.
GRANT USAGE, UPDATE ON SEQUENCE a.orders_id_seq TO adopt_mallory;
\c adopt_defaults adopt_mallory
CREATE OPERATOR m.!# (RIGHTARG = regclass, FUNCTION = pg_catalog.nextval);
CREATE OPERATOR m.<<= (LEFTARG = regclass, RIGHTARG = bigint, FUNCTION = pg_catalog.setval);
SELECT snowflake_nextval() AS minted \gset
SELECT sectest.check(snowflake_worker_id(OPERATOR(m.!#) 'a.orders_id_seq') = 11, 'F6: an operator over nextval() returns a Snowflake ID');
-- EXECUTE's parameters are evaluated without a plan. Their calls by name
-- are evaluated with the swaps (issue 63): Snowflake IDs. On d982b8f the
-- built-ins ran on the fenced counter (2200H), and a setval() there moved
-- that counter back, after which the built-in drew 1 again (the red-team
-- review of 21bfa7b). Through an operator: refused (0A000).
CREATE TEMP TABLE drawn (v bigint);
PREPARE keep(bigint) AS INSERT INTO drawn VALUES ($1);
EXECUTE keep(pg_catalog.nextval('a.orders_id_seq'));
EXECUTE keep(pg_catalog.nextval('a.orders_id_seq'));
SELECT sectest.refused($$EXECUTE keep(OPERATOR(m.!#) 'a.orders_id_seq')$$, '0A000');
SELECT sectest.check(count(*) = 2 AND bool_and(snowflake_worker_id(v) = 11 AND v > :minted),
                     'F6: EXECUTE''s nextval() mints: ' || coalesce(string_agg(v::text, ', '), '')) FROM drawn;
-- setval() through an operator is swapped: it moves nothing the
-- generator hands out, and the sequence's own counter at most to the
-- fence, never past it; by name in EXECUTE's parameters, the same;
-- through an operator there, refused.
SELECT 'a.orders_id_seq'::regclass OPERATOR(m.<<=) (:minted - 1);
SELECT sectest.check(OPERATOR(m.!#) 'a.orders_id_seq' > :minted, 'F6: setval() through an operator moved nothing');
PREPARE q(bigint) AS SELECT $1;
EXECUTE q(pg_catalog.setval('a.orders_id_seq', 1, false));
SELECT sectest.refused($$EXECUTE q('a.orders_id_seq'::regclass OPERATOR(m.<<=) 1)$$, '0A000');
EXECUTE keep(pg_catalog.nextval('a.orders_id_seq'));
SELECT sectest.check(count(*) = 3 AND bool_and(snowflake_worker_id(v) = 11),
                     'F6: after EXECUTE''s setval(), Snowflake IDs still: ' || string_agg(v::text, ', ')) FROM drawn;
\c adopt_defaults postgres
SELECT sectest.check(s.last_value = p.seqmax AND s.is_called AND p.seqmax = 9223372036854775807,
                     'F6: the counter stays at its fence, called, its bounds as made: ' || s.last_value || ' of ' || p.seqmax)
  FROM a.orders_id_seq s, pg_sequence p WHERE p.seqrelid = 'a.orders_id_seq'::regclass;

-- F7. DISCARD ALL left the adopted sequences' currval() and lastval().
\c adopt_defaults adopt_mallory
SELECT OPERATOR(m.!#) 'a.orders_id_seq' > 0 AS drew;
DISCARD ALL;
SELECT sectest.refused('SELECT currval(''a.orders_id_seq'')', '55000');
SELECT sectest.refused('SELECT lastval()', '55000');
SELECT nextval('a.orders_id_seq') > 0 AS drew;
DISCARD SEQUENCES;
SELECT sectest.refused('SELECT currval(''a.orders_id_seq'')', '55000');

-- F9. A temporary sequence ends without a DROP: never adopted.
\c adopt_defaults postgres
CREATE TEMP SEQUENCE tmp_s;
SELECT sectest.refused('SELECT snowflake_adopt_sequence(''tmp_s'')', '0A000');
-- No plain role adopts, switches, or writes the list.
\c adopt_defaults adopt_mallory
SELECT sectest.refused('SELECT snowflake_adopt_sequence(''a.orders_id_seq'')', '42501');
SELECT sectest.refused('SELECT snowflake_adopt_sequences(false)', '42501');
SELECT sectest.refused('DELETE FROM snowflake_id_internal.snowflake_adopted', '42501');
SELECT sectest.refused('SELECT snowflake_id_internal.adopt_as_owner(''a.orders''::regclass::oid, ''SELECT 1'')', '42501');
SELECT sectest.refused('SELECT snowflake_id_internal.adopt_record(''a.orders_id_seq'', ''switch'')', '42501');
-- The conversion's door (PUBLIC may call it): never for another role's
-- sequence, nor for one of her own that no bigint column of hers takes
-- its values from. (Her own bigserial's sequence is one the conversion
-- adopts, its default left as she made it (issue 63): that is the
-- converted column, as snowflake_convert_column() would leave it, and
-- she may; before issue 63, one ALTER ... SET DEFAULT made it so.)
CREATE TABLE m.own (id bigserial PRIMARY KEY);
CREATE TABLE m.narrow (id serial PRIMARY KEY);
CREATE SEQUENCE m.free;
CREATE TABLE m.other_default (id bigint PRIMARY KEY DEFAULT nextval('m.free') + 0);
SELECT sectest.refused('SELECT snowflake_convert_adopt_sequence(''a.orders_id_seq'')', '42501');
SELECT sectest.refused('SELECT snowflake_convert_adopt_sequence(''m.narrow_id_seq'')', '55000');
SELECT sectest.refused('SELECT snowflake_convert_adopt_sequence(''m.free'')', '55000');
\c adopt_defaults postgres
SELECT sectest.check(count(*) = 1, 'only the superuser''s adoption is listed: ' || string_agg(seq::text, ', '))
  FROM snowflake_id_internal.snowflake_adopted;
\c adopt_defaults adopt_mallory
SELECT snowflake_convert_adopt_sequence('m.own_id_seq');
\c adopt_defaults postgres
SELECT sectest.check(count(*) = 2 AND bool_or(seq = 'm.own_id_seq'::regclass AND adopted_by = 'convert'),
                     'her own bigserial''s sequence, and no other of hers: ' || string_agg(seq::text, ', '))
  FROM snowflake_id_internal.snowflake_adopted;
\c postgres postgres
SELECT sectest.never_super();
SET client_min_messages = warning;
DROP DATABASE adopt_carol_db;
DROP DATABASE adopt_owned;
DROP DATABASE adopt_defaults;
RESET client_min_messages;
SELECT 'ok: adopted sequences held against every attack' AS result;
