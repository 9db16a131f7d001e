-- Attack 3: objects alice created under the names the online conversion
-- gives its own (a column, a trigger, an index, a constraint) are never
-- taken for the conversion's: the conversion refuses before changing
-- anything, and abandon never drops them.
\set ON_ERROR_STOP 1
\c - alice
CREATE FUNCTION app.noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TABLE app.col1 (id serial PRIMARY KEY, id_snowflake_new text DEFAULT 'mine');
INSERT INTO app.col1 DEFAULT VALUES;
SELECT sectest.refused($$CALL snowflake_convert_online('app.col1', 'id')$$, '42701');
CREATE TABLE app.tr1 (id serial PRIMARY KEY);
CREATE TRIGGER snowflake_convert_sync BEFORE INSERT ON app.tr1 FOR EACH ROW EXECUTE FUNCTION app.noop();
SELECT sectest.refused($$CALL snowflake_convert_online('app.tr1', 'id')$$, '42710');
CREATE TABLE app.ix1 (id serial PRIMARY KEY, v integer);
SELECT format('CREATE UNIQUE INDEX %I ON app.ix1 (v)', 'snowflake_new_' || 'app.ix1_pkey'::regclass::oid) \gexec
SELECT sectest.refused($$CALL snowflake_convert_online('app.ix1', 'id')$$, '42710');
CREATE TABLE app.k1 (id serial PRIMARY KEY, CONSTRAINT snowflake_new_nn_1_1 CHECK (true));
SELECT sectest.refused($$CALL snowflake_convert_online('app.k1', 'id')$$, '42710');
-- Nothing recorded, nothing changed, nothing to abandon.
SELECT sectest.check((SELECT count(*) = 0 FROM snowflake_convert_status), 'no conversion was recorded');
SELECT sectest.refused($$SELECT * FROM snowflake_convert_online_abandon('app.col1', 'id')$$, '42704');
SELECT sectest.check((SELECT id_snowflake_new = 'mine' FROM app.col1), 'alice''s column id_snowflake_new is intact');
SELECT sectest.check((SELECT count(*) = 1 FROM pg_trigger WHERE tgrelid = 'app.tr1'::regclass AND tgfoid = 'app.noop()'::regprocedure),
                     'alice''s trigger snowflake_convert_sync is intact');
SELECT sectest.check((SELECT count(*) = 0 FROM pg_attribute WHERE attrelid IN ('app.tr1'::regclass, 'app.ix1'::regclass, 'app.k1'::regclass)
                         AND attname LIKE '%snowflake_new%'), 'no new column was left behind');
