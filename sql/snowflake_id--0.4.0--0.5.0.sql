/* snowflake_id 0.4.0 -> 0.5.0: the fleet check and JavaScript-safe JSON.
 * Adds the snowflake_node view and snowflake_fleet_check(), which checks
 * every node of a Citus cluster and every postgres_fdw server for
 * duplicate worker ids, differing layouts, clocks apart and nodes that
 * cannot mint; and snowflake_js_safe(jsonb) and snowflake_to_jsonb(), JSON
 * with IDs as strings. Their source is src/sql/fleet_check.sql and
 * src/sql/js_safe.sql; this is a copy.
 * No restart needed: install the 0.5.0 library and run
 * ALTER EXTENSION snowflake_id UPDATE on every node.
 */
\echo Use "ALTER EXTENSION snowflake_id UPDATE TO '0.5.0'" to load this file. \quit


-- What one server tells the fleet check about itself. A view, so that
-- postgres_fdw can read it as a foreign table.
CREATE VIEW snowflake_node AS
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

    -- Every postgres_fdw server (or the ones named) with a user mapping.
    FOR r IN SELECT s.srvname
               FROM pg_foreign_server s
               JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
              WHERE w.fdwname = 'postgres_fdw'
                AND (servers IS NULL OR s.srvname = ANY (servers))
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
            VALUES (r.srvname, 'postgres_fdw', 'cannot read snowflake_node: ' || SQLERRM);
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


CREATE FUNCTION snowflake_js_safe(j jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $js$
SELECT CASE jsonb_typeof(j)
    WHEN 'object' THEN
        (SELECT coalesce(jsonb_object_agg(e.key, @extschema@.snowflake_js_safe(e.value)), '{}'::jsonb)
           FROM jsonb_each(j) e)
    WHEN 'array' THEN
        (SELECT coalesce(jsonb_agg(@extschema@.snowflake_js_safe(a.value) ORDER BY a.n), '[]'::jsonb)
           FROM jsonb_array_elements(j) WITH ORDINALITY a(value, n))
    WHEN 'number' THEN
        CASE WHEN scale(j::numeric) = 0 AND abs(j::numeric) > 9007199254740991
                  AND j::numeric BETWEEN -9223372036854775808 AND 9223372036854775807
             THEN to_jsonb(j::numeric::text)
             ELSE j END
    ELSE j
END
$js$;

COMMENT ON FUNCTION snowflake_js_safe(jsonb) IS
'Replace every bigint beyond JavaScript''s exact range (2^53 - 1) in a JSON document with its decimal string';

CREATE FUNCTION snowflake_to_jsonb(r anyelement) RETURNS jsonb
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $js$
SELECT @extschema@.snowflake_js_safe(to_jsonb(r))
$js$;

COMMENT ON FUNCTION snowflake_to_jsonb(anyelement) IS
'to_jsonb() of a row or value, with every bigint beyond JavaScript''s exact range as a decimal string';
