// Node.js clients against a running server (worker_id 21): node-postgres
// and Knex. IDs come back as strings, stay exact (BigInt), increase per
// connection, decode here as on the server, and survive JSON through
// snowflake_to_jsonb while row_to_json loses them. Run by run.sh with
// SNOWFLAKE_HOST, SNOWFLAKE_PORT and SNOWFLAKE_DB set.
const assert = require('node:assert/strict');
const path = require('node:path');
const { Client } = require(path.join(process.env.NODE_PATH_CLIENTS, 'pg'));
const knexFactory = require(path.join(process.env.NODE_PATH_CLIENTS, 'knex'));
const { decode, insertOrder, ordersAsJson } = require('./recipes/node_pg.js');

const conn = {
  host: process.env.SNOWFLAKE_HOST, port: Number(process.env.SNOWFLAKE_PORT),
  user: 'postgres', database: process.env.SNOWFLAKE_DB,
};

function increasing(ids) {
  for (let i = 1; i < ids.length; i++) assert.ok(BigInt(ids[i - 1]) < BigInt(ids[i]), 'IDs not increasing');
}

async function main() {
  const client = new Client(conn);
  await client.connect();
  await client.query('CREATE TABLE js_orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text NOT NULL)');
  const ids = [];
  for (let i = 0; i < 200; i++) ids.push(await insertOrder(client, `n${i}`));
  assert.ok(ids.every((id) => typeof id === 'string'), 'int8 must arrive as a string');
  assert.ok(ids.every((id) => BigInt(id) > BigInt(Number.MAX_SAFE_INTEGER)), 'IDs are above 2^53');
  increasing(ids);
  assert.equal(new Set(ids).size, ids.length, 'duplicate IDs');
  // Decoded here as on the server.
  const { rows: server } = await client.query(
    `SELECT id::text AS id, (extract(epoch FROM d.ts) * 1000)::bigint::text AS ms, d.worker_id, d.sequence
       FROM unnest($1::bigint[]) id, snowflake_decode(id) d`, [ids]);
  for (const r of server) {
    const mine = decode(r.id);
    assert.deepEqual([String(mine.ms), mine.workerId, mine.sequence], [r.ms, r.worker_id, r.sequence]);
    assert.equal(mine.workerId, 21);
  }
  // JSON: row_to_json loses the last digits in JSON.parse; snowflake_to_jsonb does not.
  const { rows: raw } = await client.query('SELECT row_to_json(o)::text AS doc FROM js_orders o ORDER BY id');
  const lossy = raw.filter((r, i) => String(JSON.parse(r.doc).id) !== ids[i]).length;
  const docs = await ordersAsJson(client);
  assert.deepEqual(docs.map((d) => d.id), ids, 'snowflake_to_jsonb must keep every ID exact');
  const found = await client.query('SELECT count(*)::int AS n FROM js_orders WHERE id = $1', [docs[7].id]);
  assert.equal(found.rows[0].n, 1, 'a lookup with the JSON id must find the row');
  await client.end();
  console.log(`  node-postgres: ${ids.length} IDs as strings, increasing, decoded with BigInt as on the server; ` +
              `row_to_json lost ${lossy} of ${raw.length} IDs in JSON.parse, snowflake_to_jsonb none`);

  const knex = knexFactory({ client: 'pg', connection: conn, pool: { min: 1, max: 1 } });
  const kids = [];
  for (let i = 0; i < 100; i++) {
    const [row] = await knex('js_orders').insert({ item: `k${i}` }).returning('id');
    kids.push(row.id);
  }
  const many = await knex('js_orders').insert([...Array(50).keys()].map((i) => ({ item: `km${i}` }))).returning('id');
  kids.push(...many.map((r) => r.id));
  assert.ok(kids.every((id) => typeof id === 'string'));
  increasing(kids);
  assert.ok(BigInt(kids[0]) > BigInt(ids[ids.length - 1]));
  const t0 = new Date(decode(kids[0]).ms).toISOString();
  const [{ n }] = await knex('js_orders').count({ n: '*' })
    .whereRaw('id >= snowflake_min_id(?::timestamptz)', [t0]);
  assert.ok(Number(n) >= 150);
  await knex.destroy();
  console.log(`  Knex: ${kids.length} IDs (single and multi-row inserts) as strings, increasing; range query by time`);
  console.log('node clients: ok');
}

main().catch((e) => { console.error(e); process.exit(1); });
