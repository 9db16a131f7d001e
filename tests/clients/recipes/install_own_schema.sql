-- Install in a schema of its own, as a superuser, in the database the
-- application's role owns (docs/reference.md, "Installing"), and adopt
-- the keys its migrations create (docs/adopting.md). USAGE on the schema
-- for every role: schema tools (MikroORM, TypeORM, drizzle-kit) read every
-- table they can see, and only a superuser may create in it.
SET client_min_messages = warning;
CREATE SCHEMA snowflake AUTHORIZATION postgres;
CREATE EXTENSION snowflake_id SCHEMA snowflake;
GRANT USAGE ON SCHEMA snowflake TO PUBLIC;
SELECT snowflake.snowflake_adopt_sequences();
