-- The online conversion, as docs/sharding.md shows it. Run with psql
-- outside a transaction block; it resumes wherever an earlier run stopped.
CALL snowflake_convert_online('orders', 'id');
SELECT snowflake_convert_online_indexes('orders', 'id') \gexec
CALL snowflake_convert_online('orders', 'id');
