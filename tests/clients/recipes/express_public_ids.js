// Express: public IDs in URLs, internal IDs in the database. The route
// takes the public form, the query turns it back into the key (a
// primary-key index scan), and the response shows the public form only. A
// mistyped or foreign public ID is a 404, not an error page: the server
// refuses it with SQLSTATE 22P02.
const express = require('express');

function ordersApp(pool) {
  const app = express();
  app.get('/orders/:publicId', async (req, res, next) => {
    try {
      const { rows } = await pool.query(
        `SELECT snowflake_to_public(id, 'orders') AS id, item
           FROM js_public_orders WHERE id = snowflake_from_public($1, 'orders')`,
        [req.params.publicId]);
      if (rows.length === 0) return res.status(404).json({ error: 'no such order' });
      return res.json(rows[0]);
    } catch (e) {
      if (e.code === '22P02') return res.status(404).json({ error: 'no such order' });
      return next(e);
    }
  });
  return app;
}

module.exports = { ordersApp };
