-- The largest high-water mark a database holds for one configuration:
-- $1 worker id, $2 epoch (Unix ms), $3 worker bits, $4 sequence bits.
-- {table} is the extension's table, quoted; src/mint/high_water.rs runs this
-- with search_path pinned, but every operator is qualified anyway.
SELECT pg_catalog.max(mark_ms) FROM {table}
 WHERE worker_id OPERATOR(pg_catalog.=) $1 AND epoch_ms OPERATOR(pg_catalog.=) $2
   AND worker_bits OPERATOR(pg_catalog.=) $3 AND sequence_bits OPERATOR(pg_catalog.=) $4
