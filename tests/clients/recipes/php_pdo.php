<?php
// PHP PDO (pdo_pgsql): read the key back with INSERT ... RETURNING id, or
// with snowflake_lastval() where code asked lastInsertId(): PDO runs
// lastval() or currval('seq') there, which snowflake_nextval() does not
// set. PHP's int is 64-bit, but json_encode writes it as a number that
// JavaScript rounds: send IDs to browsers as strings.
const SNOWFLAKE_EPOCH_MS = 1704067200000; // snowflake_id.epoch, 2024-01-01 00:00:00+00

function insert_order(PDO $db, string $item): int
{
    $st = $db->prepare('INSERT INTO php_orders (item) VALUES (?) RETURNING id');
    $st->execute([$item]);
    return (int) $st->fetchColumn();
}

// Where a framework inserts and then calls $db->lastInsertId():
function last_inserted_id(PDO $db): int
{
    return (int) $db->query('SELECT snowflake_lastval()')->fetchColumn();
}

// Keys for a bulk load, in one round trip.
function bulk_keys(PDO $db, int $n): array
{
    $st = $db->prepare('SELECT snowflake_nextval(?::bigint)');
    $st->execute([$n]);
    return array_map('intval', $st->fetchAll(PDO::FETCH_COLUMN));
}

function decode_id(int $id): array
{
    return [
        'ms' => SNOWFLAKE_EPOCH_MS + ($id >> 22),
        'worker_id' => ($id >> 12) & 1023,
        'sequence' => $id & 4095,
    ];
}

// JSON for JavaScript: IDs as strings.
function order_json(array $order): string
{
    return json_encode(['id' => (string) $order['id']] + $order);
}
