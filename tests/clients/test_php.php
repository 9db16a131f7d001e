<?php
// PHP PDO against a running server (worker_id 21): single inserts with
// RETURNING, a batch in one statement, a bulk load from
// snowflake_nextval(count); lastInsertId() with and without a sequence
// name (both wrong after a conversion) and snowflake_lastval(); decoding
// in PHP as on the server; the JSON pitfall. Run by run.sh with
// SNOWFLAKE_HOST, SNOWFLAKE_PORT and SNOWFLAKE_DB set.
require __DIR__ . '/recipes/php_pdo.php';

function check(bool $ok, string $what): void
{
    if (!$ok) {
        fwrite(STDERR, "php: FAILED: $what\n");
        exit(1);
    }
}

function increasing(array $ids): bool
{
    for ($i = 1; $i < count($ids); $i++) {
        if ($ids[$i - 1] >= $ids[$i]) {
            return false;
        }
    }
    return true;
}

$dsn = sprintf('pgsql:host=%s;port=%s;dbname=%s', getenv('SNOWFLAKE_HOST'), getenv('SNOWFLAKE_PORT'), getenv('SNOWFLAKE_DB'));
$db = new PDO($dsn, 'postgres', null, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);
// A table converted from serial: the sequence is still there, no longer the default.
$db->exec('CREATE TABLE php_orders (id serial PRIMARY KEY, item text NOT NULL)');
$db->exec('ALTER TABLE php_orders ALTER id TYPE bigint, ALTER id SET DEFAULT snowflake_nextval()');

$ids = [];
for ($i = 0; $i < 100; $i++) {
    $ids[] = insert_order($db, "p$i");
}
check(is_int($ids[0]), 'RETURNING id comes back as a PHP int');
// A batch: one multi-row INSERT.
$st = $db->query("INSERT INTO php_orders (item) SELECT 'batch ' || g FROM generate_series(1, 50) g RETURNING id");
$batch = array_map('intval', $st->fetchAll(PDO::FETCH_COLUMN));
check(count($batch) === 50, 'the batch returned 50 keys');
$ids = array_merge($ids, $batch);
// A bulk load with keys taken up front.
$keys = bulk_keys($db, 500);
$ins = $db->prepare('INSERT INTO php_orders (id, item) VALUES (?, ?)');
$db->beginTransaction();
foreach ($keys as $n => $k) {
    $ins->execute([$k, "bulk $n"]);
}
$db->commit();
$ids = array_merge($ids, $keys);
check(count(array_unique($ids)) === count($ids), 'IDs are unique');
check(increasing($ids), 'IDs increase on this connection');

// lastInsertId() after an insert whose key is snowflake_nextval():
$db->exec("INSERT INTO php_orders (item) VALUES ('last')");
$key = (int) $db->query("SELECT id FROM php_orders WHERE item = 'last'")->fetchColumn();
function sqlstate_of(callable $f): string
{
    try {
        return 'no error: ' . var_export($f(), true);
    } catch (PDOException $e) {
        return $e->getCode();
    }
}
// With the sequence name PDO runs currval('php_orders_id_seq'), without
// one lastval(): neither was set by this session's snowflake_nextval().
$withName = sqlstate_of(fn () => $db->lastInsertId('php_orders_id_seq'));
$without = sqlstate_of(fn () => $db->lastInsertId());
check($withName === '55000', "lastInsertId(seq) failed with 55000 (got $withName)");
check($without === '55000', "lastInsertId() failed with 55000 (got $without)");
check(last_inserted_id($db) === $key, 'snowflake_lastval() is the key just inserted');

// Decoded in PHP as on the server, with this server's worker id.
$st = $db->prepare("SELECT id, (extract(epoch FROM d.ts) * 1000)::bigint AS ms, d.worker_id, d.sequence
                      FROM unnest(?::bigint[]) id, snowflake_decode(id) d");
$st->execute(['{' . implode(',', $ids) . '}']);
$n = 0;
foreach ($st->fetchAll(PDO::FETCH_ASSOC) as $r) {
    $mine = decode_id((int) $r['id']);
    check($mine === ['ms' => (int) $r['ms'], 'worker_id' => (int) $r['worker_id'], 'sequence' => (int) $r['sequence']],
          "decode of {$r['id']}");
    check($mine['worker_id'] === 21, 'worker id 21');
    $n++;
}

// JSON: a bare number loses digits in JavaScript's JSON.parse (a double);
// the string form keeps them.
// The first ID a double cannot hold (1 in 64 of them it can: multiples of its spacing).
$inexact = array_values(array_filter($ids, fn ($v) => (int) (float) $v !== $v));
check(count($inexact) > 0, 'a double holds every ID exactly');
$id = $inexact[0];
check((int) (float) $id !== $id, 'a double cannot hold the ID');
$fixed = json_decode(order_json(['id' => $id, 'item' => 'x']), true);
check($fixed['id'] === (string) $id, 'order_json keeps the ID exact as a string');
printf("  PDO: %d IDs (RETURNING, a batch, a bulk load of %d), unique, increasing, decoded in PHP as on the server;" .
       " lastInsertId('seq') and lastInsertId() %s and %s, snowflake_lastval() the key; as a JSON number, %d reads %.0f\n",
       count($ids), count($keys), $withName, $without, $id, (float) $id);
