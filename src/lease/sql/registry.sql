-- The worker-id registry: see src/lease/worker.rs and docs/worker-ids.md.
-- Every database that has the extension has the (empty) tables; the one
-- that servers name in snowflake_id.registry is filled by
-- snowflake_registry_init(). One row per worker id: who holds it (a
-- random token per postmaster start, and a description), an epoch that
-- rises at each claim, reserved_until_ms (Unix ms, only rises: the
-- holder mints no later timestamp, and the next holder starts above it)
-- and the lease's expiry. A lease expires by the registry's monotonic
-- clock, never by its wall clock (issue 47: a step of the registry's
-- wall clock expired every live lease at once): lease_clock names the
-- clock (the registry host's boot), lease_clock_ns is that clock when the
-- lease was granted or renewed, lease_ttl_ms its length. A lease timed by
-- another clock (after a failover of the registry, or a reboot) runs a
-- full TTL from the moment this clock first saw it
-- (snowflake_registry_adopted). lease_expires is the same expiry as a wall time, for people to
-- read. touched_xact is the transaction that last claimed, renewed or
-- released the lease: until it ends, the row is locked whether or not
-- the lease is live, and it counts against its role's limit (issue 56:
-- a member who released every id she claimed in one open transaction,
-- or let each lease run out before claiming the next, kept the whole
-- pool locked). Configuration tables of
-- the extension, so that pg_dump of the registry carries them. Only the
-- extension's owner writes them; servers call the three SECURITY DEFINER
-- functions below, which keep reserved_until rising and bounded.
CREATE TABLE snowflake_id_internal.snowflake_registry_config (
    one           boolean PRIMARY KEY DEFAULT true CHECK (one),
    worker_bits   integer NOT NULL,
    sequence_bits integer NOT NULL,
    epoch_ms      bigint NOT NULL,
    max_ahead_ms  bigint NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE TABLE snowflake_id_internal.snowflake_registry (
    worker_id                integer PRIMARY KEY,
    retired                  boolean NOT NULL DEFAULT false,
    token                    uuid,
    holder_host              text,
    holder_port              integer,
    holder_system_identifier text,
    holder_data_directory    text,
    lease_epoch              bigint NOT NULL DEFAULT 0,
    reserved_until_ms        bigint NOT NULL DEFAULT 0,
    lease_expires            timestamptz,
    claimed_at               timestamptz,
    renewed_at               timestamptz,
    lease_clock              text,
    lease_clock_ns           bigint,
    lease_ttl_ms             integer,
    holder_role              name,
    touched_xact             xid8
);
-- The live leases a login role may hold: one by default
-- (snowflake_registry_role_limit() sets another), so that no member
-- takes the fleet's ids. A claim locks its role's row here, so that two
-- claims of one role cannot both pass the limit.
CREATE TABLE snowflake_id_internal.snowflake_registry_roles (
    rolname    name PRIMARY KEY,
    max_leases integer CHECK (max_leases OPERATOR(pg_catalog.>=) 0::pg_catalog.int4)
);
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_internal.snowflake_registry_roles', '');
REVOKE ALL ON snowflake_id_internal.snowflake_registry_roles FROM PUBLIC;
GRANT SELECT ON snowflake_id_internal.snowflake_registry_roles TO pg_database_owner;
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_internal.snowflake_registry_config', '');
SELECT pg_catalog.pg_extension_config_dump('snowflake_id_internal.snowflake_registry', '');
REVOKE ALL ON snowflake_id_internal.snowflake_registry_config FROM PUBLIC;
REVOKE ALL ON snowflake_id_internal.snowflake_registry FROM PUBLIC;
-- The database's owner may read them, so that her pg_dump works (issue
-- 46, item 8): they are empty but in the registry database, whose owner
-- the servers require to be a superuser with no other member, so the
-- holders' tokens reach no one new.
GRANT SELECT ON snowflake_id_internal.snowflake_registry_config TO pg_database_owner;
GRANT SELECT ON snowflake_id_internal.snowflake_registry TO pg_database_owner;
COMMENT ON TABLE snowflake_id_internal.snowflake_registry IS
'snowflake_id''s worker-id registry: one row per worker id, leased to one server at a time';

CREATE FUNCTION snowflake_registry_init(
    worker_bits integer DEFAULT 10,
    sequence_bits integer DEFAULT 12,
    epoch timestamptz DEFAULT '2024-01-01 00:00:00+00',
    max_ahead interval DEFAULT interval '1 minute')
RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $init$
DECLARE
    cfg snowflake_id_internal.snowflake_registry_config;
    want_epoch bigint := (extract(epoch FROM epoch) * 1000)::bigint;
    want_ahead bigint := (extract(epoch FROM max_ahead) * 1000)::bigint;
    n integer;
BEGIN
    IF worker_bits IS NULL OR worker_bits < 1 OR worker_bits > 16 THEN
        RAISE EXCEPTION 'worker_bits must be between 1 and 16, not %', worker_bits
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A registry hands out at most 65536 worker ids.';
    END IF;
    IF sequence_bits IS NULL OR sequence_bits < 1 OR worker_bits + sequence_bits > 28 THEN
        RAISE EXCEPTION 'sequence_bits must be at least 1, and worker_bits + sequence_bits at most 28'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF want_ahead IS NULL OR want_ahead < 1000 THEN
        RAISE EXCEPTION 'max_ahead must be at least 1 second'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    LOCK TABLE snowflake_id_internal.snowflake_registry_config IN EXCLUSIVE MODE;
    SELECT * INTO cfg FROM snowflake_id_internal.snowflake_registry_config;
    IF FOUND THEN
        IF (cfg.worker_bits, cfg.sequence_bits, cfg.epoch_ms)
           IS DISTINCT FROM (worker_bits, sequence_bits, want_epoch) THEN
            RAISE EXCEPTION 'the snowflake_id registry is already initialized with another layout'
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('It hands out %s worker bits for %s sequence bits and the epoch %s.',
                                      cfg.worker_bits, cfg.sequence_bits,
                                      to_timestamp(cfg.epoch_ms / 1000.0)),
                      HINT = 'Every server that leases from one registry needs the same layout; create another registry database for another layout.';
        END IF;
        UPDATE snowflake_id_internal.snowflake_registry_config SET max_ahead_ms = want_ahead;
    ELSE
        INSERT INTO snowflake_id_internal.snowflake_registry_config
               (worker_bits, sequence_bits, epoch_ms, max_ahead_ms)
        VALUES (worker_bits, sequence_bits, want_epoch, want_ahead);
    END IF;
    INSERT INTO snowflake_id_internal.snowflake_registry (worker_id)
    SELECT g FROM generate_series(0, (1 << worker_bits) - 1) g
    ON CONFLICT DO NOTHING;
    SELECT count(*) INTO n FROM snowflake_id_internal.snowflake_registry;
    RETURN n;
END
$init$;
COMMENT ON FUNCTION snowflake_registry_init(integer, integer, timestamptz, interval) IS
'Make this database a worker-id registry for one layout (superuser only)';
REVOKE ALL ON FUNCTION snowflake_registry_init(integer, integer, timestamptz, interval) FROM PUBLIC;

-- The registry's settings, or 55000 when it was never initialized. In
-- the extension's own schema, where only its owner creates objects: the
-- functions below call it by that name (the extension's schema may be
-- one its database's owner can rename and replace).
CREATE FUNCTION snowflake_id_internal.snowflake_registry_settings()
RETURNS snowflake_id_internal.snowflake_registry_config
LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $settings$
DECLARE
    cfg snowflake_id_internal.snowflake_registry_config;
BEGIN
    SELECT * INTO cfg FROM snowflake_id_internal.snowflake_registry_config;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'this database is not a snowflake_id registry'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Run SELECT snowflake_registry_init() in it as a superuser, or point snowflake_id.registry at the registry database.';
    END IF;
    RETURN cfg;
END
$settings$;
REVOKE ALL ON FUNCTION snowflake_id_internal.snowflake_registry_settings() FROM PUBLIC;

-- The length of a lease a server asks for, as an interval, or 22023
-- when it is out of range: the one rule of claim and renew.
CREATE FUNCTION snowflake_id_internal.snowflake_registry_ttl(ttl_ms integer)
RETURNS interval
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $ttl$
BEGIN
    IF ttl_ms IS NULL OR ttl_ms < 1000 OR ttl_ms > 600000 THEN
        RAISE EXCEPTION 'ttl_ms must be between 1000 and 600000, not %', ttl_ms
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN make_interval(secs => ttl_ms / 1000.0);
END
$ttl$;
REVOKE ALL ON FUNCTION snowflake_id_internal.snowflake_registry_ttl(integer) FROM PUBLIC;

-- The registry host's monotonic clock (src/lease/registry_clock.rs): its
-- name (the boot id) and a reading in ns.
CREATE FUNCTION snowflake_id_internal.snowflake_registry_boot()
RETURNS text LANGUAGE c VOLATILE PARALLEL SAFE STRICT
AS 'MODULE_PATHNAME', 'snowflake_registry_boot_wrapper';
CREATE FUNCTION snowflake_id_internal.snowflake_registry_ns()
RETURNS bigint LANGUAGE c VOLATILE PARALLEL SAFE STRICT
AS 'MODULE_PATHNAME', 'snowflake_registry_ns_wrapper';
REVOKE ALL ON FUNCTION snowflake_id_internal.snowflake_registry_boot() FROM PUBLIC;
REVOKE ALL ON FUNCTION snowflake_id_internal.snowflake_registry_ns() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_id_internal.snowflake_registry_boot() TO pg_monitor;
GRANT EXECUTE ON FUNCTION snowflake_id_internal.snowflake_registry_ns() TO pg_monitor;

-- Leases timed on another clock (the registry failed over to another
-- host, or its host rebooted), as this clock first saw them: one row per
-- registry row, renewal seen (its clock and reading) and clock that saw
-- it, inserted by claims. Inserts take no lock on anyone's row, so a
-- claim that a member holds open in her transaction delays no holder's
-- renewal (a renewal skips a locked row and counts its lease as lost);
-- only committed rows count, and the earliest of them. Not dumped: a
-- restored registry counts such leases as live until a claim sees them.
CREATE TABLE snowflake_id_internal.snowflake_registry_adopted (
    worker_id      integer NOT NULL,
    lease_clock    text NOT NULL,
    lease_clock_ns bigint NOT NULL,
    seen_clock     text NOT NULL,
    seen_ns        bigint NOT NULL
);
CREATE INDEX ON snowflake_id_internal.snowflake_registry_adopted (worker_id);
REVOKE ALL ON snowflake_id_internal.snowflake_registry_adopted FROM PUBLIC;
GRANT SELECT ON snowflake_id_internal.snowflake_registry_adopted TO pg_monitor, pg_database_owner;

-- How long a row's lease may still be in use, in ns, judged by the
-- registry's monotonic clock (boot, ns): a lease timed on this clock
-- until its TTL has passed on it; one timed on another clock until its
-- TTL has passed since this clock first saw it (snowflake_registry_adopted),
-- NULL (live, for as long as no committed claim or renewal has seen it)
-- before then; one never granted, 0. Never shortened by a clock it does
-- not know, never lengthened past one TTL of the clock that first saw it.
CREATE FUNCTION snowflake_id_internal.snowflake_registry_left_ns(
    worker_id integer, lease_clock text, lease_clock_ns bigint, lease_ttl_ms integer,
    boot text, ns bigint)
RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $left$
SELECT CASE WHEN $2 IS NULL OR $4 IS NULL THEN 0::int8
            WHEN $2 = $5 THEN $4::int8 * 1000000 - ($6 - $3)
            ELSE $4::int8 * 1000000
                 - ($6 - (SELECT min(a.seen_ns)
                            FROM snowflake_id_internal.snowflake_registry_adopted a
                           WHERE a.worker_id = $1 AND a.lease_clock = $2
                             AND a.lease_clock_ns = $3 AND a.seen_clock = $5)) END
$left$;
REVOKE ALL ON FUNCTION snowflake_id_internal.snowflake_registry_left_ns(integer, text, bigint, integer, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_id_internal.snowflake_registry_left_ns(integer, text, bigint, integer, text, bigint) TO pg_monitor;

-- Whether a row's lease may still be in use (snowflake_registry_left_ns).
CREATE FUNCTION snowflake_id_internal.snowflake_registry_live(
    worker_id integer, lease_clock text, lease_clock_ns bigint, lease_ttl_ms integer,
    boot text, ns bigint)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $live$
SELECT coalesce(snowflake_id_internal.snowflake_registry_left_ns($1, $2, $3, $4, $5, $6) > 0, true)
$live$;
REVOKE ALL ON FUNCTION snowflake_id_internal.snowflake_registry_live(integer, text, bigint, integer, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION snowflake_id_internal.snowflake_registry_live(integer, text, bigint, integer, text, bigint) TO pg_monitor;

-- Whether (worker_id, token, lease_epoch) names a live lease, as last
-- committed: the unlocked test of renew and release, which lock nothing
-- for a lease that is not live (a retired row holds no token).
CREATE FUNCTION snowflake_id_internal.snowflake_registry_lease_live(
    worker_id integer, token uuid, lease_epoch bigint, boot text, ns bigint)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $lease_live$
SELECT EXISTS (SELECT FROM snowflake_id_internal.snowflake_registry r
                WHERE r.worker_id = $1 AND r.token = $2 AND r.lease_epoch = $3 AND NOT r.retired
                  AND snowflake_id_internal.snowflake_registry_live(r.worker_id, r.lease_clock, r.lease_clock_ns,
                                                                    r.lease_ttl_ms, $4, $5))
$lease_live$;
REVOKE ALL ON FUNCTION snowflake_id_internal.snowflake_registry_lease_live(integer, uuid, bigint, text, bigint) FROM PUBLIC;

-- The clock (boot, ns) sees every lease timed on another clock that it
-- has not seen yet (a failover of the registry, a reboot, a standby in
-- another time namespace): from here on, each runs a full TTL of this
-- clock and no longer. Writes rows of its own, never a lock on a
-- holder's row; and what no row needs any more goes (rows another
-- transaction holds are left for later). Called by every claim, and by
-- the first renewal of each holder on a new clock, so that a crashed
-- holder's lease runs out one TTL after the registry's first renewal
-- on the new clock, whether or not anyone claims. Returns how many
-- leases it saw for the first time.
CREATE FUNCTION snowflake_id_internal.snowflake_registry_see(boot text, ns bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $see$
DECLARE
    n bigint;
BEGIN
    INSERT INTO snowflake_id_internal.snowflake_registry_adopted
           (worker_id, lease_clock, lease_clock_ns, seen_clock, seen_ns)
    SELECT r.worker_id, r.lease_clock, r.lease_clock_ns, boot, ns
      FROM snowflake_id_internal.snowflake_registry r
     WHERE r.lease_clock <> boot
       AND NOT EXISTS (SELECT FROM snowflake_id_internal.snowflake_registry_adopted a
                        WHERE a.worker_id = r.worker_id AND a.lease_clock = r.lease_clock
                          AND a.lease_clock_ns = r.lease_clock_ns AND a.seen_clock = boot);
    GET DIAGNOSTICS n = ROW_COUNT;
    DELETE FROM snowflake_id_internal.snowflake_registry_adopted a
     WHERE a.ctid IN (SELECT o.ctid
                        FROM snowflake_id_internal.snowflake_registry_adopted o
                        JOIN snowflake_id_internal.snowflake_registry r ON r.worker_id = o.worker_id
                       WHERE (r.lease_clock, r.lease_clock_ns) IS DISTINCT FROM (o.lease_clock, o.lease_clock_ns)
                         FOR UPDATE OF o SKIP LOCKED);
    RETURN n;
END
$see$;
REVOKE ALL ON FUNCTION snowflake_id_internal.snowflake_registry_see(text, bigint) FROM PUBLIC;

-- The limit of live leases of the session's login role, with the role's
-- row locked until the transaction ends, so that the claims, renewals
-- and releases of one role are counted one after the other (NULL for a
-- superuser, who has none): one by default, snowflake_registry_role_limit()
-- sets another. In READ COMMITTED only: every count is of what is
-- committed now, and a transaction with an older snapshot (REPEATABLE
-- READ, or one imported with SET TRANSACTION SNAPSHOT) would count none of
-- its role's newer leases (issue 56's second review).
CREATE FUNCTION snowflake_id_internal.snowflake_registry_lock_role()
RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $lock_role$
DECLARE
    max_leases integer;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'the snowflake_id registry''s functions run in READ COMMITTED transactions only'
            USING ERRCODE = 'invalid_transaction_state',
                  DETAIL = format('This transaction is %s: its snapshot may not show the leases committed since it began.',
                                  upper(current_setting('transaction_isolation'))),
                  HINT = 'Call it in a READ COMMITTED transaction (the lease worker always does).';
    END IF;
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = session_user) THEN
        RETURN NULL;
    END IF;
    INSERT INTO snowflake_id_internal.snowflake_registry_roles AS l (rolname)
    VALUES (session_user) ON CONFLICT (rolname) DO NOTHING;
    SELECT coalesce(l.max_leases, 1) INTO max_leases
      FROM snowflake_id_internal.snowflake_registry_roles l
     WHERE l.rolname = session_user FOR UPDATE;
    IF NOT FOUND THEN
        -- Deleted by a superuser since the insert: never read as "no limit".
        RAISE EXCEPTION 'the worker-id limit of role "%" changed during the call', session_user
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Call it again.';
    END IF;
    RETURN max_leases;
END
$lock_role$;
REVOKE ALL ON FUNCTION snowflake_id_internal.snowflake_registry_lock_role() FROM PUBLIC;

CREATE FUNCTION snowflake_registry_claim(
    token uuid, holder_host text, holder_port integer,
    system_identifier text, data_directory text, preferred integer,
    worker_bits integer, sequence_bits integer, epoch_ms bigint,
    ttl_ms integer, frontier_ms bigint)
RETURNS TABLE (worker_id integer, lease_epoch bigint, floor_ms bigint, reserved_until_ms bigint)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $claim$
#variable_conflict use_column
DECLARE
    cfg snowflake_id_internal.snowflake_registry_config := snowflake_id_internal.snowflake_registry_settings();
    now_ts timestamptz := clock_timestamp();
    now_ms bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    ttl interval := snowflake_id_internal.snowflake_registry_ttl(ttl_ms);
    chosen snowflake_id_internal.snowflake_registry;
    new_until bigint;
    boot text;
    ns bigint;
    max_leases integer;
    held bigint;
    left_ms bigint;
    locked bigint;
    seen bigint;
BEGIN
    boot := snowflake_id_internal.snowflake_registry_boot();
    ns := snowflake_id_internal.snowflake_registry_ns();
    IF snowflake_registry_claim.token IS NULL THEN
        RAISE EXCEPTION 'a claim needs a token' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- The holder's description is stored and shown: bounded, so that no
    -- member can fill the registry's WAL and disk with it (issue 56's
    -- third review: claims of her own row with 190 MB strings).
    IF octet_length(snowflake_registry_claim.holder_host) > 1024
       OR octet_length(snowflake_registry_claim.data_directory) > 4096
       OR octet_length(snowflake_registry_claim.system_identifier) > 64 THEN
        RAISE EXCEPTION 'a claim''s holder description is too long'
            USING ERRCODE = 'string_data_right_truncation',
                  DETAIL = 'The host name may have at most 1024 bytes, the data directory 4096, the system identifier 64.';
    END IF;
    IF (cfg.worker_bits, cfg.sequence_bits, cfg.epoch_ms)
       IS DISTINCT FROM (snowflake_registry_claim.worker_bits,
                         snowflake_registry_claim.sequence_bits,
                         snowflake_registry_claim.epoch_ms) THEN
        RAISE EXCEPTION 'the layout of this server is not the registry''s'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The registry hands out worker ids for %s worker bits, %s sequence bits and the epoch %s ms; this server has %s, %s and %s ms.',
                                  cfg.worker_bits, cfg.sequence_bits, cfg.epoch_ms,
                                  snowflake_registry_claim.worker_bits,
                                  snowflake_registry_claim.sequence_bits,
                                  snowflake_registry_claim.epoch_ms);
    END IF;
    IF frontier_ms IS NULL OR frontier_ms > now_ms + cfg.max_ahead_ms THEN
        RAISE EXCEPTION 'this server''s IDs are too far ahead of the registry''s clock'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Its IDs reach %s; the registry''s clock reads %s, and it reserves at most %s ms ahead of it.',
                                  to_timestamp(frontier_ms / 1000.0), now_ts, cfg.max_ahead_ms),
                  HINT = 'Check the clocks of this server and the registry.';
    END IF;
    -- Leases timed by another clock run a full TTL from when this clock
    -- first saw them (snowflake_registry_see).
    seen := snowflake_id_internal.snowflake_registry_see(boot, ns);
    -- The limit of live leases per login role (superusers have none). A
    -- server whose postmaster died and came back (a new token) while its
    -- old lease runs counts that lease too: the holder's name is no proof
    -- that the old one is gone (a clone, a pod beside its replacement).
    -- The role's row is locked first, so two claims (or releases) of one
    -- role are counted one after the other; the count itself comes once
    -- the row is chosen (below).
    max_leases := snowflake_id_internal.snowflake_registry_lock_role();
    -- Chosen and counted in a block of its own: a refusal rolls back the
    -- row it chose (and its lock), and keeps what this clock saw.
    BEGIN
        -- Preference: a row this postmaster holds already (a crash
        -- restart), this holder's previous id, the preferred id, then the
        -- free or expired id with the oldest reservation. Rows another
        -- transaction holds (a claim deciding on it, a release not yet
        -- committed) are skipped.
        SELECT r.* INTO chosen
          FROM snowflake_id_internal.snowflake_registry r
         WHERE NOT r.retired
           AND (r.token = snowflake_registry_claim.token
                OR NOT snowflake_id_internal.snowflake_registry_live(r.worker_id, r.lease_clock, r.lease_clock_ns, r.lease_ttl_ms, boot, ns))
         ORDER BY (r.token = snowflake_registry_claim.token) IS TRUE DESC,
                  (r.holder_host = snowflake_registry_claim.holder_host
                   AND r.holder_port = snowflake_registry_claim.holder_port
                   AND r.holder_system_identifier = snowflake_registry_claim.system_identifier
                   AND r.holder_data_directory = snowflake_registry_claim.data_directory) IS TRUE DESC,
                  (r.worker_id = preferred) IS TRUE DESC,
                  r.reserved_until_ms, r.worker_id
         LIMIT 1
           FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            -- Ids that are not held but were skipped: another transaction
            -- holds their rows (a claim deciding on it, or a release not
            -- yet committed).
            SELECT count(*) INTO locked
              FROM snowflake_id_internal.snowflake_registry r
             WHERE NOT r.retired
               AND NOT snowflake_id_internal.snowflake_registry_live(r.worker_id, r.lease_clock, r.lease_clock_ns, r.lease_ttl_ms, boot, ns);
            IF locked > 0 THEN
                RAISE EXCEPTION 'no worker id of this registry is free now'
                    USING ERRCODE = 'lock_not_available',
                          DETAIL = format('%s worker ids are not held by a live lease, but other transactions hold their rows (claims deciding on them, or releases not committed yet); every other id is held or retired.', locked),
                          HINT = 'The server asks again. A transaction that holds them shows in pg_stat_activity of the registry (idle in transaction, or still running a statement), or in pg_prepared_xacts if it was prepared.';
            END IF;
            -- Every id is held or retired: the server reports it (55000).
            IF seen > 0 THEN
                RETURN QUERY SELECT NULL::integer, NULL::bigint, NULL::bigint, NULL::bigint;
            END IF;
            RETURN;
        END IF;
        -- Every live lease of the role but the row chosen counts, whatever
        -- its token (one token may not hold many rows: a member who reuses
        -- hers, with her rows locked in another session so that the claim
        -- skips them, took every id), and so does every row the role
        -- claimed, renewed or released in this transaction, live or not
        -- (its row stays locked until the transaction ends, and every
        -- other claim skips it). The role's row, locked above, keeps any
        -- other transaction of the role from touching rows meanwhile.
        IF max_leases IS NOT NULL THEN
            SELECT count(*), ceil(min(l.left_ns) FILTER (WHERE l.left_ns > 0) / 1000000.0)::bigint
              INTO held, left_ms
              FROM snowflake_id_internal.snowflake_registry r
             CROSS JOIN LATERAL (SELECT snowflake_id_internal.snowflake_registry_left_ns(
                                     r.worker_id, r.lease_clock, r.lease_clock_ns, r.lease_ttl_ms, boot, ns)
                                 AS left_ns) l
             WHERE r.holder_role = session_user
               AND r.worker_id <> chosen.worker_id
               AND NOT r.retired
               AND ((r.token IS NOT NULL AND coalesce(l.left_ns > 0, true))
                    OR r.touched_xact = pg_current_xact_id());
            IF held >= max_leases THEN
                RAISE EXCEPTION 'role "%" may hold no more worker-id leases of this registry', session_user
                    USING ERRCODE = 'configuration_limit_exceeded',
                          DETAIL = format('It holds %s live leases (or claimed, renewed or released them in this transaction, which has not ended); its limit is %s. A lease of a server whose postmaster stopped without releasing it counts until it runs out.%s',
                                          held, max_leases,
                                          CASE WHEN left_ms IS NOT NULL
                                               THEN format(' The first of them runs out in %s ms unless its holder renews it.', left_ms)
                                               ELSE '' END),
                          HINT = 'Give each server its own login role, or let a superuser raise the limit with snowflake_registry_role_limit().';
            END IF;
        END IF;
    EXCEPTION WHEN configuration_limit_exceeded OR lock_not_available THEN
        -- What this clock saw of other clocks must outlive the refusal:
        -- else no lease of another clock would ever run out while every
        -- claim is refused. Once seen, the refusal is raised again.
        IF seen > 0 THEN
            RETURN QUERY SELECT NULL::integer, NULL::bigint, NULL::bigint, NULL::bigint;
            RETURN;
        END IF;
        RAISE;
    END;
    new_until := greatest(chosen.reserved_until_ms,
                          least(greatest(chosen.reserved_until_ms, frontier_ms) + ttl_ms,
                                now_ms + cfg.max_ahead_ms));
    UPDATE snowflake_id_internal.snowflake_registry r
       SET token = snowflake_registry_claim.token,
           holder_host = snowflake_registry_claim.holder_host,
           holder_port = snowflake_registry_claim.holder_port,
           holder_system_identifier = snowflake_registry_claim.system_identifier,
           holder_data_directory = snowflake_registry_claim.data_directory,
           lease_epoch = r.lease_epoch + 1,
           reserved_until_ms = new_until,
           lease_expires = now_ts + ttl,
           claimed_at = now_ts,
           renewed_at = now_ts,
           lease_clock = boot,
           lease_clock_ns = ns,
           lease_ttl_ms = snowflake_registry_claim.ttl_ms,
           holder_role = session_user,
           touched_xact = pg_current_xact_id()
     WHERE r.worker_id = chosen.worker_id;
    RETURN QUERY SELECT chosen.worker_id, chosen.lease_epoch + 1,
                        chosen.reserved_until_ms, new_until;
END
$claim$;
COMMENT ON FUNCTION snowflake_registry_claim(uuid, text, integer, text, text, integer, integer, integer, bigint, integer, bigint) IS
'Lease a worker id from this registry (called by the servers'' lease workers)';
REVOKE ALL ON FUNCTION snowflake_registry_claim(uuid, text, integer, text, text, integer, integer, integer, bigint, integer, bigint) FROM PUBLIC;

CREATE FUNCTION snowflake_registry_renew(
    worker_id integer, token uuid, lease_epoch bigint, ttl_ms integer, frontier_ms bigint)
RETURNS TABLE (reserved_until_ms bigint)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $renew$
#variable_conflict use_column
DECLARE
    cfg snowflake_id_internal.snowflake_registry_config := snowflake_id_internal.snowflake_registry_settings();
    now_ts timestamptz := clock_timestamp();
    now_ms bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    ttl interval := snowflake_id_internal.snowflake_registry_ttl(ttl_ms);
    boot text;
    ns bigint;
    max_leases integer;
BEGIN
    boot := snowflake_id_internal.snowflake_registry_boot();
    ns := snowflake_id_internal.snowflake_registry_ns();
    -- The first renewal of this holder on a new clock sees every lease of
    -- the old one (snowflake_registry_see): a crashed holder's lease then
    -- runs out one TTL later, whether or not anyone claims.
    IF EXISTS (SELECT FROM snowflake_id_internal.snowflake_registry r
                WHERE r.worker_id = snowflake_registry_renew.worker_id
                  AND r.lease_clock IS DISTINCT FROM boot) THEN
        PERFORM snowflake_id_internal.snowflake_registry_see(boot, ns);
    END IF;
    -- Only a live lease is renewed, and nothing is locked for any other
    -- call: one that ran out, or was released, may be claimed by anyone
    -- (its holder claims anew, usually getting the same id back), and no
    -- transaction may lock a row that is free to claim by renewing it
    -- (issue 56: renewals and releases of dead leases, held open or
    -- prepared, locked the pool).
    IF NOT snowflake_id_internal.snowflake_registry_lease_live(
               snowflake_registry_renew.worker_id, snowflake_registry_renew.token,
               snowflake_registry_renew.lease_epoch, boot, ns) THEN
        RETURN;
    END IF;
    -- Then the role's row, as for a claim: a renewal held open locks its
    -- lease's row, which counts against the role's limit until the
    -- transaction ends (touched_xact), and no other transaction of the
    -- role touches rows meanwhile. Only the role's own transactions ever
    -- wait for it.
    max_leases := snowflake_id_internal.snowflake_registry_lock_role();
    -- Compare-and-set on (token, epoch), of a live lease of the role's
    -- own (a superuser's: any; a leaked token is no key to another
    -- role's row): a row claimed by
    -- anyone since, retired or run out is not renewed, and the holder
    -- stops. A row another transaction has locked is being claimed or
    -- retired right now: the lease is lost as well, rather than waited
    -- for (a member's claim held open would otherwise keep the holder
    -- from minting, and from claiming another id, for as long as she
    -- likes).
    PERFORM FROM snowflake_id_internal.snowflake_registry r
      WHERE r.worker_id = snowflake_registry_renew.worker_id
        AND r.token = snowflake_registry_renew.token
        AND r.lease_epoch = snowflake_registry_renew.lease_epoch
        AND NOT r.retired
        AND (max_leases IS NULL OR r.holder_role = session_user)
        AND snowflake_id_internal.snowflake_registry_live(r.worker_id, r.lease_clock, r.lease_clock_ns,
                                                          r.lease_ttl_ms, boot, ns)
        FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        -- Locked, but still this holder's as last committed: a renewal of
        -- its own that has not ended (its commit waits for a synchronous
        -- standby, or its client gave up on it), or a claim that may fail.
        -- Not lost: an error, which the holder retries until its deadline
        -- (and after it, claims anew), rather than giving the id up now.
        PERFORM FROM snowflake_id_internal.snowflake_registry r
          WHERE r.worker_id = snowflake_registry_renew.worker_id
            AND r.token = snowflake_registry_renew.token
            AND r.lease_epoch = snowflake_registry_renew.lease_epoch
            AND NOT r.retired;
        IF FOUND THEN
            RAISE EXCEPTION 'the lease of worker id % is locked by another transaction', snowflake_registry_renew.worker_id
                USING ERRCODE = 'lock_not_available',
                      DETAIL = 'A renewal of this lease that has not ended yet (its commit may wait for a synchronous standby), or a claim in progress, holds its row.';
        END IF;
        RETURN;
    END IF;
    RETURN QUERY
    UPDATE snowflake_id_internal.snowflake_registry r
       SET lease_expires = now_ts + ttl,
           renewed_at = now_ts,
           lease_clock = boot,
           lease_clock_ns = ns,
           lease_ttl_ms = snowflake_registry_renew.ttl_ms,
           touched_xact = pg_current_xact_id(),
           reserved_until_ms = greatest(r.reserved_until_ms,
                                        least(frontier_ms + ttl_ms, now_ms + cfg.max_ahead_ms))
     WHERE r.worker_id = snowflake_registry_renew.worker_id
       AND r.token = snowflake_registry_renew.token
       AND r.lease_epoch = snowflake_registry_renew.lease_epoch
       AND NOT r.retired
    RETURNING r.reserved_until_ms;
END
$renew$;
COMMENT ON FUNCTION snowflake_registry_renew(integer, uuid, bigint, integer, bigint) IS
'Renew a worker-id lease of this registry; no row: the lease is lost';
REVOKE ALL ON FUNCTION snowflake_registry_renew(integer, uuid, bigint, integer, bigint) FROM PUBLIC;

CREATE FUNCTION snowflake_registry_release(worker_id integer, token uuid, lease_epoch bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $release$
#variable_conflict use_column
DECLARE
    boot text := snowflake_id_internal.snowflake_registry_boot();
    ns bigint := snowflake_id_internal.snowflake_registry_ns();
    max_leases integer;
BEGIN
    PERFORM snowflake_id_internal.snowflake_registry_settings();
    -- Only a live lease of the role's own (a superuser's: any) is
    -- released, and nothing is locked for any other call: a release of a
    -- lease that ran out or was released already returns false, so that
    -- no transaction can lock a row that is free to claim by releasing it
    -- (issue 56's second review: harvested tokens of dead leases, released
    -- in one prepared transaction, locked the pool).
    IF NOT snowflake_id_internal.snowflake_registry_lease_live(
               snowflake_registry_release.worker_id, snowflake_registry_release.token,
               snowflake_registry_release.lease_epoch, boot, ns) THEN
        RETURN false;
    END IF;
    -- A release locks its row until its transaction ends, and every claim
    -- skips a locked row: it counts against its role's limit until then
    -- (touched_xact), and the role's row is locked first, as for a claim
    -- or a renewal, so that one transaction of the role touches rows at a
    -- time. The lease's own row without waiting: one another transaction
    -- holds is not released here.
    max_leases := snowflake_id_internal.snowflake_registry_lock_role();
    PERFORM FROM snowflake_id_internal.snowflake_registry r
      WHERE r.worker_id = snowflake_registry_release.worker_id
        AND r.token = snowflake_registry_release.token
        AND r.lease_epoch = snowflake_registry_release.lease_epoch
        AND (max_leases IS NULL OR r.holder_role = session_user)
        AND snowflake_id_internal.snowflake_registry_live(r.worker_id, r.lease_clock, r.lease_clock_ns,
                                                          r.lease_ttl_ms, boot, ns)
        FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- The reservation stays: the next holder starts above it.
    UPDATE snowflake_id_internal.snowflake_registry r
       SET lease_expires = least(r.lease_expires, clock_timestamp()),
           lease_ttl_ms = 0,
           touched_xact = pg_current_xact_id()
     WHERE r.worker_id = snowflake_registry_release.worker_id
       AND r.token = snowflake_registry_release.token
       AND r.lease_epoch = snowflake_registry_release.lease_epoch;
    RETURN FOUND;
END
$release$;
COMMENT ON FUNCTION snowflake_registry_release(integer, uuid, bigint) IS
'Give a worker-id lease of this registry back (a clean shutdown)';
REVOKE ALL ON FUNCTION snowflake_registry_release(integer, uuid, bigint) FROM PUBLIC;

CREATE FUNCTION snowflake_registry_retire(worker_id integer, retired boolean DEFAULT true)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $retire$
#variable_conflict use_column
BEGIN
    PERFORM snowflake_id_internal.snowflake_registry_settings();
    -- Retiring ends the lease for good: a new epoch fails its holder's
    -- next renewal, and the token and holder are forgotten, so that the
    -- id put back is not its old holder's again. The lease's expiry
    -- stays: nobody is granted the id before its old holder's lease ends.
    UPDATE snowflake_id_internal.snowflake_registry r
       SET retired = snowflake_registry_retire.retired,
           lease_epoch = CASE WHEN snowflake_registry_retire.retired
                              THEN r.lease_epoch + 1 ELSE r.lease_epoch END,
           token = CASE WHEN snowflake_registry_retire.retired THEN NULL ELSE r.token END,
           holder_host = CASE WHEN snowflake_registry_retire.retired THEN NULL ELSE r.holder_host END,
           holder_port = CASE WHEN snowflake_registry_retire.retired THEN NULL ELSE r.holder_port END,
           holder_system_identifier = CASE WHEN snowflake_registry_retire.retired
                                           THEN NULL ELSE r.holder_system_identifier END,
           holder_data_directory = CASE WHEN snowflake_registry_retire.retired
                                        THEN NULL ELSE r.holder_data_directory END
     WHERE r.worker_id = snowflake_registry_retire.worker_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'worker id % is not in the registry', snowflake_registry_retire.worker_id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$retire$;
COMMENT ON FUNCTION snowflake_registry_retire(integer, boolean) IS
'Take a worker id out of the registry''s pool (its holder stops at its next renewal), or put it back (superuser only)';
REVOKE ALL ON FUNCTION snowflake_registry_retire(integer, boolean) FROM PUBLIC;

CREATE FUNCTION snowflake_registry_role_limit(role_name name, max_leases integer DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $limit$
BEGIN
    PERFORM snowflake_id_internal.snowflake_registry_settings();
    IF max_leases < 0 THEN
        RAISE EXCEPTION 'max_leases must be at least 0, not %', max_leases
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO snowflake_id_internal.snowflake_registry_roles AS l (rolname, max_leases)
    VALUES (role_name, snowflake_registry_role_limit.max_leases)
    ON CONFLICT (rolname) DO UPDATE SET max_leases = EXCLUDED.max_leases;
END
$limit$;
COMMENT ON FUNCTION snowflake_registry_role_limit(name, integer) IS
'Set how many live worker-id leases a login role may hold (NULL: the default, 1; superuser only)';
REVOKE ALL ON FUNCTION snowflake_registry_role_limit(name, integer) FROM PUBLIC;

CREATE VIEW snowflake_registry_holders AS
SELECT r.worker_id,
       CASE WHEN r.retired THEN 'retired'
            WHEN snowflake_id_internal.snowflake_registry_live(r.worker_id, r.lease_clock, r.lease_clock_ns,
                                                               r.lease_ttl_ms, c.boot, c.ns)
            THEN CASE WHEN r.token IS NULL THEN 'ending' ELSE 'held' END
            WHEN r.token IS NULL THEN 'free'
            ELSE 'expired' END AS state,
       r.holder_host,
       r.holder_port,
       r.holder_system_identifier AS system_identifier,
       r.holder_data_directory AS data_directory,
       r.holder_role,
       r.lease_epoch,
       pg_catalog.to_timestamp(r.reserved_until_ms::pg_catalog.float8
                               OPERATOR(pg_catalog./) 1000::pg_catalog.float8) AS reserved_until,
       r.lease_expires,
       r.claimed_at,
       r.renewed_at
  FROM snowflake_id_internal.snowflake_registry r
 CROSS JOIN (SELECT snowflake_id_internal.snowflake_registry_boot() AS boot,
                    snowflake_id_internal.snowflake_registry_ns() AS ns) c;
COMMENT ON VIEW snowflake_registry_holders IS
'The worker ids of this snowflake_id registry and who holds them';
REVOKE ALL ON snowflake_registry_holders FROM PUBLIC;
GRANT SELECT ON snowflake_registry_holders TO pg_monitor;
