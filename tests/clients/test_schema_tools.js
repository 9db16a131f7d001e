// Issue 63: schema tools see no drift. Each tool runs its own sync or
// diff twice against a stock database (st_TOOL_stock, no extension) and
// one with the extension in a schema of its own and the switch on
// (st_TOOL_switch), as the non-superuser database owner `app`: its plan
// must be the same on both, the second run must plan nothing, and rows
// inserted through it then get Snowflake keys of worker 21 on the switch's
// database (and 1, 2, ... on the stock one). Run by run.sh with
// SNOWFLAKE_HOST, SNOWFLAKE_PORT and NODE_PATH_CLIENTS set; tools named on
// the command line (default: all).
//   TypeORM synchronize (increment and identity), drizzle-kit push,
//   MikroORM getUpdateSchemaSQL(), Sequelize sync({ alter: true }), knex
//   migrations.
const assert = require('node:assert/strict');
const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');
const { execFileSync } = require('node:child_process');
const M = process.env.NODE_PATH_CLIENTS;
const need = (m) => require(path.join(M, m));
const host = process.env.SNOWFLAKE_HOST;
const port = Number(process.env.SNOWFLAKE_PORT);
const WORKER = 21n;
const workerOf = (id) => Number((BigInt(id) >> 12n) & 1023n);

// A tool's run on one database: { plans: [first, second], ids: [...] }.
const tools = {
  async typeorm(db) {
    need('reflect-metadata');
    const { DataSource, EntitySchema } = need('typeorm');
    const entities = [
      new EntitySchema({ name: 't_inc', columns: { id: { type: 'bigint', primary: true, generated: 'increment' }, name: { type: 'text' } } }),
      new EntitySchema({ name: 't_ident', columns: { id: { type: 'bigint', primary: true, generated: 'identity' }, name: { type: 'text' } } }),
    ];
    const plans = [];
    let ids = [];
    for (let i = 0; i < 2; i++) {
      const ds = new DataSource({ type: 'postgres', host, port, username: 'app', database: db, entities });
      await ds.initialize();
      plans.push((await ds.driver.createSchemaBuilder().log()).upQueries.map((q) => q.query));
      await ds.synchronize();
      if (i === 1) {
        for (const e of ['t_inc', 't_ident']) ids.push(String((await ds.getRepository(e).save({ name: 'x' })).id));
      }
      await ds.destroy();
    }
    return { plans, ids };
  },

  async drizzle(db) {
    // A bigserial and an identity: drizzle-kit compares an identity's
    // options, MAXVALUE among them (on d982b8f the fence was a MAXVALUE,
    // and its second push planned SET MAXVALUE on the switch's database).
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'drizzle-'));
    fs.writeFileSync(path.join(dir, 'schema.js'),
      "const { pgTable, bigserial, bigint, text } = require('drizzle-orm/pg-core');\n" +
      "exports.dInc = pgTable('d_inc', { id: bigserial('id', { mode: 'number' }).primaryKey(), name: text('name') });\n" +
      "exports.dIdent = pgTable('d_ident', { id: bigint('id', { mode: 'number' }).primaryKey().generatedByDefaultAsIdentity(), name: text('name') });\n");
    const plans = [];
    for (let i = 0; i < 2; i++) {
      const out = execFileSync(path.join(M, '.bin', 'drizzle-kit'),
        ['push', '--dialect=postgresql', '--schema=./schema.js', `--url=postgres://app@${host}:${port}/${db}`, '--verbose', '--force'],
        { cwd: dir, env: { ...process.env, NODE_PATH: M }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
      // The statements it printed (between its warning and "Changes applied").
      const m = out.match(/You are about to execute[^\n]*\n([\s\S]*?)\n\s*\[.\] Changes applied/);
      if (!m && !/No changes detected/.test(out)) throw new Error(`drizzle-kit push said: ${out}`);
      plans.push(m ? m[1].split(';').map((s) => s.trim()).filter(Boolean) : []);
    }
    const { Client } = need('pg');
    const c = new Client({ host, port, user: 'app', database: db });
    await c.connect();
    const ids = [];
    for (const t of ['d_inc', 'd_ident']) ids.push((await c.query(`INSERT INTO ${t} (name) VALUES ('x') RETURNING id::text`)).rows[0].id);
    await c.end();
    return { plans, ids };
  },

  async mikroorm(db) {
    const { MikroORM, EntitySchema } = need('@mikro-orm/postgresql');
    const Inc = new EntitySchema({ name: 'MInc', tableName: 'm_inc', properties: { id: { type: 'bigint', primary: true, autoincrement: true }, name: { type: 'string' } } });
    const plans = [];
    let ids = [];
    for (let i = 0; i < 2; i++) {
      // As with any extension that keeps tables (PostGIS too), MikroORM is
      // told to leave the extension's schemas alone (docs/adopting.md):
      // else its diff drops every table it does not know.
      const orm = await MikroORM.init({ entities: [Inc], dbName: db, host, port, user: 'app', allowGlobalContext: true, debug: false,
        schemaGenerator: { ignoreSchema: ['snowflake', 'snowflake_id_internal'] } });
      const sql = (await orm.schema.getUpdateSchemaSQL({ wrap: false })).trim();
      plans.push(sql ? sql.split(';').map((s) => s.trim()).filter(Boolean) : []);
      if (sql) await orm.schema.updateSchema();
      if (i === 1) {
        const em = orm.em.fork();
        const row = em.create('MInc', { name: 'x' });
        await em.flush();
        ids.push(String(row.id));
      }
      await orm.close(true);
    }
    return { plans, ids };
  },

  async sequelize(db) {
    const { Sequelize, DataTypes } = need('sequelize');
    const plans = [];
    let ids = [];
    for (let i = 0; i < 2; i++) {
      const ddl = [];
      const s = new Sequelize(db, 'app', null, { host, port, dialect: 'postgres', dialectModule: need('pg'),
        logging: (q) => { if (/\b(CREATE|ALTER|DROP)\b/.test(q) && !/^Executing \(default\): SELECT/.test(q)) ddl.push(q.replace(/^Executing \(default\): /, '')); } });
      const Inc = s.define('s_inc', { id: { type: DataTypes.BIGINT, primaryKey: true, autoIncrement: true }, name: DataTypes.TEXT }, { timestamps: false, freezeTableName: true });
      await s.sync({ alter: true });
      plans.push(ddl);
      if (i === 1) ids.push(String((await Inc.create({ name: 'x' })).id));
      await s.close();
    }
    // Sequelize's alter re-states every column each time: the second run
    // changes nothing if the catalog it leaves is the one it found.
    return { plans, ids, restates: true };
  },

  async knex(db) {
    const knex = need('knex')({ client: 'pg', connection: { host, port, user: 'app', database: db } });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knex-'));
    fs.writeFileSync(path.join(dir, '001_k.js'),
      "exports.up = (k) => k.schema.createTable('k_inc', (t) => { t.bigIncrements('id'); t.text('name'); })" +
      ".createTable('k_ident', (t) => { t.bigIncrements('id', { primaryKey: true }); t.text('name'); });\n" +
      "exports.down = (k) => k.schema.dropTable('k_ident').dropTable('k_inc');\n");
    const plans = [];
    for (let i = 0; i < 2; i++) {
      const [, done] = await knex.migrate.latest({ directory: dir });
      plans.push(done.map((f) => path.basename(f)));
    }
    const ids = [String((await knex('k_inc').insert({ name: 'x' }, ['id']))[0].id)];
    await knex.destroy();
    return { plans, ids };
  },
};

module.exports = { tools };
async function main() {
  const names = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(tools);
  for (const name of names) {
    const stock = await tools[name](`st_${name}_stock`);
    const sw = await tools[name](`st_${name}_switch`);
    assert.deepEqual(sw.plans[0], stock.plans[0], `${name}: its first plan differs on the switch's database`);
    assert.deepEqual(sw.plans[1], stock.plans[1], `${name}: its second plan differs on the switch's database (drift)`);
    if (!stock.restates) assert.deepEqual(sw.plans[1], [], `${name}: its second run plans changes`);
    assert.ok(sw.ids.length > 0 && sw.ids.every((id) => workerOf(id) === Number(WORKER) && BigInt(id) > 1n << 40n),
      `${name}: keys on the switch's database are not Snowflake IDs of worker 21: ${sw.ids}`);
    assert.ok(stock.ids.every((id) => BigInt(id) < 1000n), `${name}: the stock database's keys: ${stock.ids}`);
    console.log(`schema tools: ${name}: the same plan on both (${sw.plans[0].length} statements, then ${sw.plans[1].length}); keys ${sw.ids.join(', ')}`);
  }
}
if (require.main === module) main().catch((e) => { console.error(e); process.exit(1); });
