-- On the merged server, once the sources stopped writing and every
-- subscription caught up: each line must say ok before the cut-over.
SELECT 'replication errors: ' || coalesce(sum(apply_error_count + sync_error_count), 0)
       || CASE WHEN coalesce(sum(apply_error_count + sync_error_count), 0) = 0 THEN ' ok' ELSE ' FAIL' END
  FROM pg_stat_subscription_stats WHERE subname LIKE 'merge\_%';
SELECT 'tables not yet synchronised: ' || count(*) || CASE WHEN count(*) = 0 THEN ' ok' ELSE ' FAIL' END
  FROM pg_subscription_rel WHERE srsubstate <> 'r';
SELECT 'orders without their customer: ' || count(*) || CASE WHEN count(*) = 0 THEN ' ok' ELSE ' FAIL' END
  FROM orders o WHERE NOT EXISTS (SELECT FROM customers c WHERE c.id = o.customer_id);
-- Rows per worker id: compare with each source's count.
SELECT 'worker ' || snowflake_worker_id(id) || ': ' || count(*) || ' customers'
  FROM customers GROUP BY snowflake_worker_id(id) ORDER BY 1;
-- Before the cut-over: mint above every merged key, even if this server's
-- clock is behind the sources' (as a superuser; each table read as its
-- owner; one row per key column; never more than 10 minutes ahead).
SELECT 'floor raised above the keys of ' || count(*) || ' column(s)'
       || CASE WHEN count(error) = 0 AND NOT bool_or(beyond_limit) THEN ' ok' ELSE ' FAIL' END
  FROM snowflake_raise_floor_from_data(apply => true);
