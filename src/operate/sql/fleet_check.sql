-- snowflake_node and snowflake_fleet_check(): see src/operate/fleet_check.rs.
-- Included in the install script by extension_sql_file!.

-- What one server tells the fleet check about itself. A view, so that
-- postgres_fdw can read it as a foreign table.
CREATE OR REPLACE VIEW snowflake_node AS
SELECT s.worker_id,
       s.epoch,
       s.timestamp_bits,
       s.worker_bits,
       s.sequence_bits,
       s.state,
       c.system_identifier,
       pg_catalog.pg_postmaster_start_time() AS started_at,
       pg_catalog.clock_timestamp() AS server_clock
  FROM @extschema@.snowflake_stats() s, pg_catalog.pg_control_system() c;

COMMENT ON VIEW snowflake_node IS
'This server''s snowflake_id worker id, layout, state and clock, as snowflake_fleet_check() reads it from every node';

-- Monitoring roles read it (and so run the fleet check) without being
-- superusers: the exporter of contrib/prometheus. Other roles get 42501.
GRANT SELECT ON snowflake_node TO pg_monitor;

CREATE FUNCTION snowflake_fleet_check(
    max_clock_skew interval DEFAULT interval '1 second',
    servers name[] DEFAULT NULL)
RETURNS TABLE (node text, source text, worker_id integer, epoch timestamptz,
               timestamp_bits integer, worker_bits integer, sequence_bits integer,
               clock_offset_ms double precision, state text, problem text)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fleet$
#variable_conflict use_column
DECLARE
    ext_schema name := (SELECT n.nspname FROM pg_extension e
                          JOIN pg_namespace n ON n.oid = e.extnamespace
                         WHERE e.extname = 'snowflake_id');
    cols       constant text := 'worker_id integer, epoch timestamptz, timestamp_bits integer, '
                                'worker_bits integer, sequence_bits integer, state text, '
                                'system_identifier bigint, started_at timestamptz, server_clock timestamptz';
    t0         timestamptz;
    t1         timestamptz;
    r          record;
    j          json;
    ft         text;
    skew_ms    double precision := extract(epoch FROM max_clock_skew) * 1000;
    caller_su  constant boolean := (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user);
BEGIN
    IF max_clock_skew < interval '0' THEN
        RAISE EXCEPTION 'max_clock_skew must not be negative'
              USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF to_regclass('pg_temp.snowflake_fleet_nodes') IS NULL THEN
        CREATE TEMP TABLE snowflake_fleet_nodes (
            node text, source text, worker_id integer, epoch timestamptz, timestamp_bits integer,
            worker_bits integer, sequence_bits integer, state text, system_identifier bigint,
            started_at timestamptz, offset_ms double precision, uncertainty_ms double precision,
            error text) ON COMMIT DROP;
    END IF;
    TRUNCATE snowflake_fleet_nodes;

    -- This server.
    EXECUTE format('INSERT INTO snowflake_fleet_nodes
        SELECT COALESCE(NULLIF(current_setting(''cluster_name''), ''''), ''local''), ''local'',
               worker_id, epoch, timestamp_bits, worker_bits, sequence_bits, state,
               system_identifier, started_at, 0, 0, NULL
          FROM %I.snowflake_node', ext_schema);

    -- Every other node of a Citus cluster.
    IF EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
        t0 := clock_timestamp();
        FOR r IN EXECUTE format(
            $q$SELECT n.nodename || ':' || n.nodeport AS node, c.success, c.result
                 FROM run_command_on_all_nodes(%L) c
                 JOIN pg_dist_node n USING (nodeid)
                WHERE n.groupid <> (SELECT groupid FROM pg_dist_local_group)
                ORDER BY 1$q$,
            format('SELECT row_to_json(n) FROM %I.snowflake_node n', ext_schema))
        LOOP
            t1 := clock_timestamp();
            IF r.success THEN
                j := r.result::json;
                INSERT INTO snowflake_fleet_nodes VALUES (
                    r.node, 'citus', (j->>'worker_id')::integer, (j->>'epoch')::timestamptz,
                    (j->>'timestamp_bits')::integer, (j->>'worker_bits')::integer,
                    (j->>'sequence_bits')::integer, j->>'state', (j->>'system_identifier')::bigint,
                    (j->>'started_at')::timestamptz,
                    extract(epoch FROM (j->>'server_clock')::timestamptz - (t0 + (t1 - t0) / 2)) * 1000,
                    extract(epoch FROM t1 - t0) * 1000 / 2, NULL);
            ELSE
                INSERT INTO snowflake_fleet_nodes (node, source, error)
                VALUES (r.node, 'citus', 'cannot read snowflake_node: ' || r.result);
            END IF;
        END LOOP;
    END IF;

    -- The postgres_fdw servers whose owner the caller can trust: the owner
    -- of a server decides where a connection through it goes and, with a
    -- user mapping for PUBLIC, as which user. postgres_fdw asks a
    -- superuser for no password, so a server owned by anyone but a
    -- superuser would let its owner run her code as a superuser caller
    -- (issue 39, F4). Trusted: servers owned by a superuser, and, for a
    -- caller who is not one, servers owned by a role whose privileges it
    -- has (postgres_fdw makes it connect with credentials it was given).
    -- Without names, the others are skipped; a named one is refused.
    SELECT s.srvname, o.rolname INTO r
      FROM pg_foreign_server s
      JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
      JOIN pg_roles o ON o.oid = s.srvowner
     WHERE w.fdwname = 'postgres_fdw' AND s.srvname = ANY (servers)
       AND NOT (o.rolsuper OR (NOT caller_su AND pg_has_role(current_user, s.srvowner, 'USAGE')))
     ORDER BY s.srvname
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'permission denied to check the fleet through foreign server "%"', r.srvname
              USING ERRCODE = 'insufficient_privilege',
                    DETAIL = CASE WHEN caller_su
                        THEN format('Its owner, role "%s", is not a superuser, and decides where a connection through it goes and as which user; postgres_fdw asks a superuser for no password.', r.rolname)
                        ELSE format('Its owner, role "%s", is neither a superuser nor a role whose privileges you have.', r.rolname) END,
                    HINT = 'Have a superuser own the servers of the fleet (ALTER SERVER ... OWNER TO), or leave this one out.';
    END IF;

    -- Every trusted postgres_fdw server (or the ones named) with a user
    -- mapping. Only the server's owner (and superusers) see the message of
    -- an error: it can come from any host the server names.
    FOR r IN SELECT s.srvname, pg_has_role(current_user, s.srvowner, 'USAGE') AS owner
               FROM pg_foreign_server s
               JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
               JOIN pg_roles o ON o.oid = s.srvowner
              WHERE w.fdwname = 'postgres_fdw'
                AND (servers IS NULL OR s.srvname = ANY (servers))
                AND (o.rolsuper OR (NOT caller_su AND pg_has_role(current_user, s.srvowner, 'USAGE')))
              ORDER BY s.srvname
    LOOP
        ft := 'snowflake_fleet_' || md5(r.srvname);
        BEGIN
            EXECUTE format('CREATE FOREIGN TABLE pg_temp.%I (%s) SERVER %I OPTIONS (schema_name %L, table_name %L)',
                           ft, cols, r.srvname, ext_schema, 'snowflake_node');
            t0 := clock_timestamp();
            EXECUTE format('INSERT INTO snowflake_fleet_nodes
                SELECT %L, ''postgres_fdw'', worker_id, epoch, timestamp_bits, worker_bits,
                       sequence_bits, state, system_identifier, started_at,
                       extract(epoch FROM server_clock - ($1 + (clock_timestamp() - $1) / 2)) * 1000,
                       extract(epoch FROM clock_timestamp() - $1) * 1000 / 2, NULL
                  FROM pg_temp.%I', r.srvname, ft) USING t0;
            EXECUTE format('DROP FOREIGN TABLE pg_temp.%I', ft);
        EXCEPTION WHEN OTHERS THEN
            INSERT INTO snowflake_fleet_nodes (node, source, error)
            VALUES (r.srvname, 'postgres_fdw',
                    CASE WHEN r.owner THEN 'cannot read snowflake_node: ' || SQLERRM
                         ELSE format('cannot read snowflake_node (SQLSTATE %s; the message is shown to the server''s owner)', SQLSTATE) END);
        END;
    END LOOP;
    IF servers IS NOT NULL THEN
        INSERT INTO snowflake_fleet_nodes (node, source, error)
        SELECT s, 'postgres_fdw', 'no postgres_fdw server of this name'
          FROM unnest(servers) s
         WHERE NOT EXISTS (SELECT FROM pg_foreign_server f
                             JOIN pg_foreign_data_wrapper w ON w.oid = f.srvfdw
                            WHERE f.srvname = s AND w.fdwname = 'postgres_fdw');
    END IF;

    -- One row per server: the same server reached twice (the coordinator
    -- through Citus and through a foreign server, say) is one node.
    RETURN QUERY
    WITH nodes AS (
        SELECT string_agg(n.node, ' = ' ORDER BY n.source <> 'local', n.node) AS node,
               min(n.source) FILTER (WHERE n.source = 'local') AS is_local,
               string_agg(DISTINCT n.source, ', ') AS source,
               min(n.worker_id) AS worker_id, min(n.epoch) AS epoch,
               min(n.timestamp_bits) AS timestamp_bits, min(n.worker_bits) AS worker_bits,
               min(n.sequence_bits) AS sequence_bits, min(n.state) AS state,
               min(n.offset_ms) AS offset_ms, min(n.uncertainty_ms) AS uncertainty_ms,
               string_agg(n.error, '; ') AS error
          FROM snowflake_fleet_nodes n
         GROUP BY COALESCE(n.system_identifier::text || '/' || n.started_at::text, n.node)
    ), me AS (
        SELECT * FROM nodes WHERE is_local IS NOT NULL
    )
    SELECT s.node, s.source, s.worker_id, s.epoch, s.timestamp_bits, s.worker_bits,
           s.sequence_bits, round(s.offset_ms::numeric, 1)::double precision, s.state,
           NULLIF(concat_ws('; ',
               s.error,
               CASE WHEN s.error IS NULL AND s.worker_id IS NULL
                    THEN 'snowflake_id.worker_id is not set' END,
               (SELECT format('worker_id %s is also used by %s', s.worker_id,
                              string_agg(o.node, ', ' ORDER BY o.node))
                  FROM nodes o
                 WHERE o.worker_id = s.worker_id AND o.node <> s.node
                HAVING count(*) > 0),
               CASE WHEN s.error IS NULL
                     AND (s.epoch, s.timestamp_bits, s.worker_bits, s.sequence_bits)
                         IS DISTINCT FROM (me.epoch, me.timestamp_bits, me.worker_bits, me.sequence_bits)
                    THEN format('layout differs from %s: epoch %s, %s/%s/%s bits instead of %s, %s/%s/%s',
                                me.node, s.epoch, s.timestamp_bits, s.worker_bits, s.sequence_bits,
                                me.epoch, me.timestamp_bits, me.worker_bits, me.sequence_bits) END,
               CASE WHEN abs(s.offset_ms) - s.uncertainty_ms > skew_ms
                    THEN format('clock is %s ms %s %s (more than %s apart)',
                                round(abs(s.offset_ms)::numeric),
                                CASE WHEN s.offset_ms > 0 THEN 'ahead of' ELSE 'behind' END,
                                me.node, max_clock_skew) END,
               CASE WHEN s.state IS NOT NULL AND s.state <> 'ok'
                    THEN 'cannot mint: ' || s.state END), '')
      FROM nodes s, me
     ORDER BY s.is_local IS NULL, s.node;
END;
$fleet$;

COMMENT ON FUNCTION snowflake_fleet_check(interval, name[]) IS
'Check every node of the fleet (Citus nodes and postgres_fdw servers) for duplicate worker ids, differing layouts, clocks apart and nodes that cannot mint';
