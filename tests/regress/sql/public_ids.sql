-- Public IDs: snowflake_to_public / snowflake_from_public, FF1 with
-- AES-256 under the keys in $PGDATA/snowflake_id.public_keys (known
-- answers pinned here and in core/src/public.rs), the text form's check
-- symbol, key rotation and refusals. The key secrecy tests are in
-- tests/security/public_keys.sql.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS snowflake_id;
RESET client_min_messages;
CREATE FUNCTION public_ids_err(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE st text; msg text; det text; hin text;
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                            det = PG_EXCEPTION_DETAIL, hin = PG_EXCEPTION_HINT;
    RETURN st || ': ' || msg
        || CASE WHEN det <> '' THEN E'\n  DETAIL: ' || det ELSE '' END
        || CASE WHEN hin <> '' THEN E'\n  HINT: ' || hin ELSE '' END;
END $$;
-- Each key change replaces the keys file of the data directory as the
-- docs say (a new file, mode 0600, moved over the old one; the program
-- runs in the data directory); the next transaction reads it. The pause
-- lets the file's modification time move on.
\set write_keys 'umask 077 && cat > snowflake_id.public_keys.new && mv snowflake_id.public_keys.new snowflake_id.public_keys'
-- No key configured: 55000 with a HINT.
SELECT public_ids_err($q$SELECT snowflake_to_public(1)$q$);
SELECT public_ids_err($q$SELECT snowflake_from_public('1DQSYMPVFE544GX')$q$);

\set keys '1:2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94'
COPY (SELECT :'keys') TO PROGRAM :'write_keys';
SELECT pg_sleep(0.05);
-- Known answers (also pinned in core/src/public.rs, whose FF1 is checked
-- against the fpe crate's, itself checked against NIST's samples).
SELECT id, domain, snowflake_to_public(id, domain) AS public_id
  FROM (VALUES (0::bigint, ''), (1, ''), (383465699634401301, 'orders'), (383465699634401301, 'users'),
               (9223372036854775807, ''), (-1, '')) v(id, domain);
SELECT snowflake_to_public(42) = snowflake_to_public(42, '') AS default_domain_is_empty;
-- Round trips: the edges, lower case, 100000 consecutive IDs (a million in
-- the core tests), all distinct and fixed-length.
SELECT id, snowflake_from_public(snowflake_to_public(id, 'orders'), 'orders') = id AS round_trip,
       snowflake_from_public(lower(snowflake_to_public(id, 'orders')), 'orders') = id AS lower_case
  FROM (VALUES (0::bigint), (1), (9223372036854775807), (-9223372036854775808), (-1)) v(id);
SELECT count(*) AS ids, count(DISTINCT p) AS distinct_forms,
       count(*) FILTER (WHERE snowflake_from_public(p, 'orders') <> id) AS bad_round_trips,
       min(length(p)) AS min_len, max(length(p)) AS max_len,
       count(*) FILTER (WHERE p !~ '^[0-9A-HJKMNP-TV-Z]{15}$') AS not_url_safe
  FROM (SELECT id, snowflake_to_public(id, 'orders') AS p
          FROM generate_series(383465699634401301, 383465699634501300) id) s;
-- Public forms do not sort like the IDs.
SELECT corr(rk_id, rk_public) BETWEEN -0.05 AND 0.05 AS ranks_uncorrelated
  FROM (SELECT rank() OVER (ORDER BY id) AS rk_id, rank() OVER (ORDER BY p COLLATE "C") AS rk_public
          FROM (SELECT id, snowflake_to_public(id, 'orders') AS p
                  FROM generate_series(383465699634401301, 383465699634411300) id) s) r;

-- A lookup by public ID is a primary-key index scan.
CREATE TABLE public_orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);
INSERT INTO public_orders (item) SELECT 'item ' || i FROM generate_series(1, 1000) i;
ANALYZE public_orders;
-- Order 383465699634401301's public form is a known answer above.
INSERT INTO public_orders VALUES (383465699634401301, 'the known one');
EXPLAIN (COSTS OFF) SELECT item FROM public_orders WHERE id = snowflake_from_public('16DDKKXRJE6YAHJ', 'orders');
SELECT item FROM public_orders WHERE id = snowflake_from_public('16ddkkxrje6yahj', 'orders');
SELECT count(*) AS found_by_public_form
  FROM public_orders o WHERE o.id = snowflake_from_public(snowflake_to_public(o.id, 'orders'), 'orders');

-- Refusals (22P02): a mistyped symbol, two swapped neighbours, the wrong
-- length, a symbol outside the alphabet, the wrong domain's form is a
-- different ID (no error: the domain is not in the text).
SELECT public_ids_err($q$SELECT snowflake_from_public('1DQSYMPVFE545GX')$q$);
SELECT public_ids_err($q$SELECT snowflake_from_public('1DQSYMPVEF544GX')$q$);
SELECT public_ids_err($q$SELECT snowflake_from_public('1DQSYMPVFE544G')$q$);
SELECT public_ids_err($q$SELECT snowflake_from_public('1DQSYMPVFE544G!')$q$);
SELECT snowflake_from_public(snowflake_to_public(42, 'orders'), 'users') <> 42 AS other_domain_other_id;

-- Rotation: a new key (version 2) encodes; version 1 still decodes.
SELECT snowflake_to_public(42, 'orders') AS made_with_v1 \gset
\set keys '2:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f, 1:2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94'
COPY (SELECT :'keys') TO PROGRAM :'write_keys';
SELECT pg_sleep(0.05);
SELECT left(snowflake_to_public(42, 'orders'), 1) AS new_version,
       snowflake_from_public(:'made_with_v1', 'orders') AS old_form_still_decodes;
-- Version 1 removed: its forms are refused with a DETAIL.
\set keys '2:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f'
COPY (SELECT :'keys') TO PROGRAM :'write_keys';
SELECT pg_sleep(0.05);
SELECT public_ids_err(format('SELECT snowflake_from_public(%L, %L)', :'made_with_v1', 'orders'));
-- Malformed keys: 55000 naming the entry, never the key.
\set keys '2:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f, 3:abc'
COPY (SELECT :'keys') TO PROGRAM :'write_keys';
SELECT pg_sleep(0.05);
SELECT public_ids_err($q$SELECT snowflake_to_public(1)$q$);
\set keys '1:2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94, 1:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f'
COPY (SELECT :'keys') TO PROGRAM :'write_keys';
SELECT pg_sleep(0.05);
SELECT public_ids_err($q$SELECT snowflake_to_public(1)$q$);

DROP TABLE public_orders;
-- A keys file every OS user can read is refused.
COPY (SELECT '1:2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94')
  TO PROGRAM 'cat > snowflake_id.public_keys && chmod 644 snowflake_id.public_keys';
SELECT pg_sleep(0.05);
SELECT public_ids_err($q$SELECT snowflake_to_public(1)$q$);
-- A file without keys: 55000 again.
COPY (SELECT '# no keys') TO PROGRAM :'write_keys';
SELECT pg_sleep(0.05);
SELECT public_ids_err($q$SELECT snowflake_to_public(1)$q$);
DROP FUNCTION public_ids_err(text);
