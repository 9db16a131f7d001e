-- Raise the high-water mark of one configuration to $5 (Unix ms) in this
-- database: every row of the configuration ($1 worker id, $2 epoch,
-- $3 worker bits, $4 sequence bits), or a new row when there is none.
-- Never lowers a mark. {table} is the extension's table, quoted.
WITH raised AS (
    UPDATE {table} SET mark_ms = $5, written_at = pg_catalog.now()
     WHERE worker_id OPERATOR(pg_catalog.=) $1 AND epoch_ms OPERATOR(pg_catalog.=) $2
       AND worker_bits OPERATOR(pg_catalog.=) $3 AND sequence_bits OPERATOR(pg_catalog.=) $4
       AND mark_ms OPERATOR(pg_catalog.<) $5
    RETURNING 1
)
INSERT INTO {table} (worker_id, epoch_ms, worker_bits, sequence_bits, mark_ms)
SELECT $1, $2, $3, $4, $5
 WHERE NOT EXISTS (SELECT FROM raised)
   AND NOT EXISTS (SELECT FROM {table}
                    WHERE worker_id OPERATOR(pg_catalog.=) $1 AND epoch_ms OPERATOR(pg_catalog.=) $2
                      AND worker_bits OPERATOR(pg_catalog.=) $3 AND sequence_bits OPERATOR(pg_catalog.=) $4)
