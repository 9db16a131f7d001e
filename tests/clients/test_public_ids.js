// Public IDs with Express (recipes/express_public_ids.js) against a running
// server with a keys file: every order is found through its public form in
// the URL, in either case; the response carries no internal ID; a
// mistyped public ID and one of another domain are 404s. Run by run.sh
// with SNOWFLAKE_HOST, SNOWFLAKE_PORT and SNOWFLAKE_DB set.
const assert = require('node:assert/strict');
const path = require('node:path');
const { Pool } = require(path.join(process.env.NODE_PATH_CLIENTS, 'pg'));
const Module = require('node:module');

// The recipe requires 'express' by name: resolve it from the client cache.
process.env.NODE_PATH = process.env.NODE_PATH_CLIENTS;
Module._initPaths();
const { ordersApp } = require('./recipes/express_public_ids.js');

async function main() {
  const pool = new Pool({
    host: process.env.SNOWFLAKE_HOST, port: Number(process.env.SNOWFLAKE_PORT),
    user: 'postgres', database: process.env.SNOWFLAKE_DB, max: 2,
  });
  await pool.query('CREATE TABLE js_public_orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text NOT NULL)');
  const { rows } = await pool.query(
    `INSERT INTO js_public_orders (item) SELECT 'order ' || g FROM generate_series(1, 50) g
     RETURNING id, snowflake_to_public(id, 'orders') AS public_id, snowflake_to_public(id, 'users') AS other_domain, item`);
  const server = ordersApp(pool).listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const base = `http://127.0.0.1:${server.address().port}`;
  for (const [i, r] of rows.entries()) {
    const url = `${base}/orders/${i % 2 ? r.public_id.toLowerCase() : r.public_id}`;
    const res = await fetch(url);
    assert.equal(res.status, 200, url);
    const body = await res.text();
    assert.deepEqual(JSON.parse(body), { id: r.public_id, item: r.item });
    assert.ok(!body.includes(r.id), 'the response holds the internal ID');
  }
  const one = rows[0].public_id;
  const typo = one.slice(0, 5) + (one[5] === 'X' ? 'Y' : 'X') + one.slice(6);
  assert.equal((await fetch(`${base}/orders/${typo}`)).status, 404, 'a mistyped public ID');
  assert.equal((await fetch(`${base}/orders/${rows[0].other_domain}`)).status, 404, "another domain's public ID");
  server.close();
  await pool.end();
  console.log(`  Express: ${rows.length} orders found by the public ID in the URL (either case), no internal ID in a response; ` +
              'a mistyped public ID and one of another domain are 404s');
}

main().catch((e) => { console.error(e); process.exit(1); });
