// node-postgres: keep IDs as strings (pg returns int8 as a string by
// default: never parseInt or Number() them), use BigInt for arithmetic,
// and ask the server for JSON with IDs as strings.
const EPOCH_MS = 1704067200000n; // snowflake_id.epoch, 2024-01-01 00:00:00+00

function decode(id) {
  const v = BigInt(id);
  return {
    ms: Number(EPOCH_MS + (v >> 22n)),
    workerId: Number((v >> 12n) & 1023n),
    sequence: Number(v & 4095n),
  };
}

async function insertOrder(client, item) {
  const { rows } = await client.query('INSERT INTO js_orders (item) VALUES ($1) RETURNING id', [item]);
  return rows[0].id; // a string such as '383011532541268040'
}

async function ordersAsJson(client) {
  // snowflake_to_jsonb: whole rows, IDs as strings, safe for JSON.parse.
  const { rows } = await client.query('SELECT snowflake_to_jsonb(o) AS doc FROM js_orders o ORDER BY id');
  return rows.map((r) => r.doc);
}

module.exports = { decode, insertOrder, ordersAsJson };
