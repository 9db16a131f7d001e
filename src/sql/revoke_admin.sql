-- Only superusers (and roles they grant it to) may accept a changed
-- configuration: see snowflake_accept_configuration() in src/admin.rs.
REVOKE ALL ON FUNCTION snowflake_accept_configuration() FROM PUBLIC;
