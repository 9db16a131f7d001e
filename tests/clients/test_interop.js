// Interop: IDs made by other generators' own libraries, from npm, decoded
// by the server field by field as the library decodes them. Pinned:
// @sapphire/snowflake (Discord's and Twitter's layouts) and sonyflake
// (milliseconds since an epoch it is given, then 8 bits of sequence, then
// 16 of machine). Also the range bounds: every ID lies within the bounds
// of its own tick. Run by run.sh with SNOWFLAKE_HOST, SNOWFLAKE_PORT and
// SNOWFLAKE_DB set.
const assert = require('node:assert/strict');
const path = require('node:path');
const { Client } = require(path.join(process.env.NODE_PATH_CLIENTS, 'pg'));
const { DiscordSnowflake, TwitterSnowflake } = require(path.join(process.env.NODE_PATH_CLIENTS, '@sapphire/snowflake'));
const { Sonyflake, Epoch } = require(path.join(process.env.NODE_PATH_CLIENTS, 'sonyflake'));

const conn = {
  host: process.env.SNOWFLAKE_HOST, port: Number(process.env.SNOWFLAKE_PORT),
  user: 'postgres', database: process.env.SNOWFLAKE_DB,
};

// The server's decode of each ID: [ms since 1970, worker_id, sequence] as
// strings, and whether the ID lies within its tick's bounds. `layout` is
// the SQL after the ID: a preset name or a description.
async function serverDecode(client, ids, layout, args = []) {
  const { rows } = await client.query(
    `SELECT id::text AS id, (extract(epoch FROM d.ts) * 1000)::bigint::text AS ms,
            d.worker_id, d.sequence,
            id BETWEEN snowflake_min_id(d.ts, ${layout}) AND snowflake_max_id(d.ts, ${layout}) AS in_bounds
       FROM unnest($1::bigint[]) WITH ORDINALITY AS t(id, n), snowflake_decode(id, ${layout}) d
      ORDER BY n`, [ids, ...args]);
  return rows;
}

async function main() {
  const client = new Client(conn);
  await client.connect();
  const checks = [];

  // @sapphire/snowflake: ID = (ms - epoch) << 22 | workerId << 17 | processId << 12 | increment.
  for (const [name, gen] of [['discord', DiscordSnowflake], ['twitter', TwitterSnowflake]]) {
    const made = [];
    for (let i = 0; i < 100; i++) {
      made.push(gen.generate({ workerId: BigInt(i % 32), processId: BigInt((i * 7) % 32) }).toString());
    }
    // A timestamp of the past, and the largest fields.
    made.push(gen.generate({ timestamp: Date.UTC(2016, 3, 30, 11, 18, 25, 796), workerId: 31n, processId: 31n, increment: 4095n }).toString());
    const server = await serverDecode(client, made, `'${name}'`);
    for (const r of server) {
      const d = gen.deconstruct(r.id);
      assert.deepEqual([r.ms, r.worker_id, r.sequence, r.in_bounds],
        [String(d.timestamp), Number(d.workerId * 32n + d.processId), Number(d.increment), true], `${name} ${r.id}`);
    }
    checks.push(`@sapphire/snowflake ${name}: ${server.length} IDs`);
  }

  // sonyflake (npm): milliseconds since the epoch given, sequence above machine.
  const sf = new Sonyflake({ epoch: Epoch.DISCORD, machineId: 0x2a7b });
  const sfIds = [];
  for (let i = 0; i < 300; i++) sfIds.push(sf.nextId());
  const described = `'2015-01-01+00', 39, 16, 8, '1 ms', 'time,sequence,worker'`;
  const server = await serverDecode(client, sfIds, described);
  for (const r of server) {
    const d = Sonyflake.decompose(r.id, { epoch: Epoch.DISCORD });
    assert.deepEqual([r.ms, r.worker_id, r.sequence, r.in_bounds],
      [String(d.timestamp), d.machineId, d.sequence, true], `sonyflake ${r.id}`);
  }
  assert.ok(server.some((r) => r.sequence > 0), 'no two sonyflake IDs shared a millisecond: the sequence went untested');
  checks.push(`npm sonyflake (Discord epoch, described): ${server.length} IDs`);

  await client.end();
  console.log(`  ${checks.join('; ')}: every field as the library decodes it, each ID within its tick's bounds`);
}

main().catch((e) => { console.error(e); process.exit(1); });
