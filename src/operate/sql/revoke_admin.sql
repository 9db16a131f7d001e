-- Only superusers (and roles they grant it to) may accept a changed
-- configuration (snowflake_accept_configuration() in src/operate/admin.rs) or
-- raise the generator's floor (src/operate/floor.rs): a plain role could use up
-- the ID space.
REVOKE ALL ON FUNCTION snowflake_accept_configuration() FROM PUBLIC;
REVOKE ALL ON FUNCTION snowflake_raise_floor(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION snowflake_raise_floor_from_data(boolean) FROM PUBLIC;
