-- Attack 1: forged progress rows turn an administrator into mallory's
-- deputy. On 0.6.0 mallory could write snowflake_convert_progress rows
-- naming alice's table; dba's abandon then dropped app.accounts.secret,
-- and dba's CALL ran UPDATE app.accounts SET balance = id.
\set ON_ERROR_STOP 1
\c - mallory
CREATE TABLE mal.t (id serial PRIMARY KEY, v integer);
INSERT INTO mal.t (v) SELECT g FROM generate_series(1, 100) g;
-- Writing the progress table by hand is refused, whatever it names.
SELECT sectest.refused($$
    INSERT INTO snowflake_convert_progress (tbl, col, rel, rel_col, new_col, not_null, phase, pages_total)
    VALUES ('mal.t', 'id', 'mal.t', 'id', 'id_snowflake_new', true, 'backfill', 1),
           ('mal.t', 'id', 'app.accounts', 'id', 'secret', false, 'backfill', 1),
           ('mal.t', 'id', 'app.accounts', 'balance', 'balance', false, 'backfill', 1)$$, '42501');
\c - dba
SELECT sectest.refused($$SELECT * FROM snowflake_convert_online_abandon('mal.t', 'id')$$, '42704');
\c - postgres
SELECT sectest.accounts_unchanged();

-- mallory's own conversion writes its rows; she cannot change them.
\c - mallory
SET client_min_messages = warning;
CALL snowflake_convert_online('mal.t', 'id');
RESET client_min_messages;
SELECT sectest.check((SELECT count(*) = 1 FROM snowflake_convert_status WHERE "table" = 'mal.t'::regclass),
                     'mallory sees her conversion in snowflake_convert_status');
SELECT sectest.refused($$UPDATE snowflake_convert_progress SET rel = 'app.accounts', new_col = 'secret'$$, '42501');
SELECT sectest.refused($$UPDATE snowflake_convert_progress SET pages_done = pages_total, phase = 'swap'$$, '42501');
SELECT sectest.refused($$DELETE FROM snowflake_convert_progress$$, '42501');
SELECT sectest.refused($$INSERT INTO snowflake_convert_progress (tbl, col, rel, rel_col, new_col, not_null, phase, pages_total)
    VALUES ('mal.t', 'id', 'app.accounts', 'id', 'secret', false, 'backfill', 1)$$, '42501');
-- Nor can the code of a table owner that the conversion runs (as the
-- owner, in a security-restricted operation), nor any role directly.
SELECT sectest.check(NOT snowflake_convert_progress_writable(), 'the progress is not writable outside the conversion');
\c - alice
SELECT sectest.check((SELECT count(*) = 0 FROM snowflake_convert_status), 'alice does not see mallory''s conversion');
SET row_security = off;
SELECT sectest.refused($$SELECT * FROM snowflake_convert_status$$, '42501');
RESET row_security;

-- Defence in depth: rows that do not match the catalog (written here by
-- the superuser, who may: a restored dump does) are never acted on. A
-- step refuses (55000); abandon backs out only what both the rows and the
-- catalog name.
\c - postgres
INSERT INTO snowflake_convert_progress (tbl, col, rel, rel_col, new_col, not_null, phase, pages_total)
VALUES ('mal.t', 'id', 'app.accounts', 'id', 'secret', false, 'backfill', 1),
       ('mal.t', 'id', 'app.accounts', 'balance', 'balance', false, 'backfill', 1);
\c - dba
SELECT sectest.refused($$CALL snowflake_convert_online('mal.t', 'id')$$, '55000');
SELECT action, object FROM snowflake_convert_online_abandon('mal.t', 'id') ORDER BY 1, 2;
\c - postgres
SELECT sectest.accounts_unchanged();
SELECT sectest.check((SELECT count(*) = 0 FROM snowflake_convert_progress), 'abandon forgot every row');
SELECT sectest.check((SELECT count(*) = 2 FROM pg_attribute WHERE attrelid = 'mal.t'::regclass AND attnum > 0 AND NOT attisdropped),
                     'abandon dropped mallory''s new column, and only that');
