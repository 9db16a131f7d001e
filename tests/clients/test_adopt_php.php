<?php
// PHP PDO in a database with the switch on (issue 57; docs/adopting.md):
// the application reads an inserted key back with lastInsertId(), with
// and without the sequence's name, as it did before the switch. Its new
// bigserial table keeps nextval(seq) as its default (issue 63), whose
// draws are Snowflake IDs, so both return the Snowflake ID the row got; a table of integer identity (left to its
// sequence, with a NOTICE) still gets 1, 2, ... back after an adopted
// draw in the same session. Run by run.sh with SNOWFLAKE_HOST,
// SNOWFLAKE_PORT and SNOWFLAKE_ADOPT_DB set; the server's worker id is 21.

function check(bool $ok, string $what): void
{
    if (!$ok) {
        fwrite(STDERR, "php adopt: FAILED: $what\n");
        exit(1);
    }
}

$dsn = sprintf('pgsql:host=%s;port=%s;dbname=%s', getenv('SNOWFLAKE_HOST'), getenv('SNOWFLAKE_PORT'), getenv('SNOWFLAKE_ADOPT_DB'));
$db = new PDO($dsn, 'postgres', null, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);
$db->exec('SET client_min_messages = warning');
$db->exec('DROP TABLE IF EXISTS php_adopt, php_small');
$db->exec('CREATE TABLE php_adopt (id bigserial PRIMARY KEY, item text NOT NULL)');
$db->exec('CREATE TABLE php_small (id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY, item text NOT NULL)');

$ins = $db->prepare('INSERT INTO php_adopt (item) VALUES (?)');
$keys = [];
for ($i = 0; $i < 20; $i++) {
    $ins->execute(["a$i"]);
    $without = (int) $db->lastInsertId();
    $with = (int) $db->lastInsertId('php_adopt_id_seq');
    $stored = (int) $db->query("SELECT id FROM php_adopt WHERE item = 'a$i'")->fetchColumn();
    check($without === $stored, "lastInsertId() is the key the row got ($without, $stored)");
    check($with === $stored, "lastInsertId('php_adopt_id_seq') is the key the row got ($with, $stored)");
    $keys[] = $stored;
}
$workers = $db->query('SELECT array_agg(DISTINCT snowflake_worker_id(id)) FROM php_adopt')->fetchColumn();
check($workers === '{21}', "every key decodes to worker 21 (got $workers)");
check(count(array_unique($keys)) === 20, 'the keys are distinct');

// An integer identity table beside it: its own values, as before.
$small = $db->prepare('INSERT INTO php_small (item) VALUES (?)');
for ($i = 1; $i <= 3; $i++) {
    $ins->execute(["b$i"]);                 // an adopted draw first
    $small->execute(["s$i"]);
    check($db->lastInsertId() === (string) $i, "lastInsertId() after the identity insert is $i (got {$db->lastInsertId()})");
}
echo "php adopt: lastInsertId() with and without the sequence name is each row's Snowflake ID; an integer identity table's stays 1, 2, 3\n";
