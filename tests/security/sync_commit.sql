-- Attack 4: a session's synchronous_commit weakens the server-wide
-- reservation. On a server whose synchronous_standby_names names a
-- standby that never answers, the first call must renew the reservation
-- and wait for that standby. On 0.6.0, SET synchronous_commit = local (or
-- off) made it return an ID under a reservation no standby confirmed.
-- Now the wait depends on the server's configuration only: every caller
-- waits, and statement_timeout ends the wait with 57014, nothing issued.
\set ON_ERROR_STOP 1
\c - postgres
SET synchronous_commit = local;   -- the superuser's own commit, not the attack
CREATE TABLE reservation_before AS
SELECT reserved_until, coalesce(last_id, 0) AS last_id FROM snowflake_stats();
GRANT SELECT ON reservation_before TO PUBLIC;
\c - mallory
SET statement_timeout = '1s';
SET synchronous_commit = local;
SELECT sectest.refused($$SELECT snowflake_nextval()$$, '57014');
SET synchronous_commit = off;
SELECT sectest.refused($$SELECT snowflake_nextval()$$, '57014');
SELECT sectest.refused($$SELECT count(*) FROM snowflake_nextval(100)$$, '57014');
SET synchronous_commit = remote_write;
SELECT sectest.refused($$SELECT snowflake_nextval()$$, '57014');
RESET synchronous_commit;
SELECT sectest.refused($$SELECT snowflake_nextval()$$, '57014');
\c - postgres
SELECT sectest.check(s.reserved_until IS NOT DISTINCT FROM b.reserved_until AND coalesce(s.last_id, 0) = b.last_id,
                     'no reservation was published and no ID issued without the standby')
  FROM snowflake_stats() s, reservation_before b;
