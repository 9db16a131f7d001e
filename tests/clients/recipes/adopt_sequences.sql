-- Adopt Snowflake keys without touching the application (docs/converting.md,
-- "New tables and nextval() of your own"): run once, as a superuser, in
-- the database the application uses. From then on every bigserial and
-- bigint identity column and every bigint sequence that a migration tool
-- creates hands out Snowflake IDs, and so does nextval() of them.
SELECT snowflake_adopt_sequences();
-- Sequences that exist already: adopt them one by one.
-- SELECT snowflake_adopt_sequence('orders_id_seq');
