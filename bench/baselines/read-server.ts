// Baseline "read": one indexed read per request — the 10 newest rows of one scope
// (WHERE scope_id = $1 ORDER BY id DESC LIMIT 10 on a (scope_id, id) index), as JSON.
import { sendJson, serveBare } from './bare-server.ts';

const SCOPES = 100;
const ROWS_PER_SCOPE = 50;
let next = 0;

await serveBare(
  async (pool) => {
    await pool.query(`CREATE SCHEMA IF NOT EXISTS bench_baseline`);
    await pool.query(`CREATE TABLE IF NOT EXISTS bench_baseline.read_rows (
      id bigserial PRIMARY KEY,
      scope_id integer NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      body text NOT NULL
    )`);
    await pool.query(`CREATE INDEX IF NOT EXISTS read_rows_scope_id ON bench_baseline.read_rows (scope_id, id)`);
    const { rows } = await pool.query(`SELECT 1 FROM bench_baseline.read_rows LIMIT 1`);
    if (rows.length === 0) {
      // ~200-byte bodies: the size of a short chat message with its metadata.
      await pool.query(
        `INSERT INTO bench_baseline.read_rows (scope_id, body)
         SELECT (n % $1) + 1, repeat(md5(n::text), 6) FROM generate_series(1, $2) AS n`,
        [SCOPES, SCOPES * ROWS_PER_SCOPE],
      );
      await pool.query(`ANALYZE bench_baseline.read_rows`);
    }
  },
  async (_req, res, pool) => {
    // Rotate over the scopes so the reads are not all served from one hot set of pages.
    next = (next % SCOPES) + 1;
    const { rows } = await pool.query('SELECT id, scope_id, created_at, body FROM bench_baseline.read_rows WHERE scope_id = $1 ORDER BY id DESC LIMIT 10', [next]);
    sendJson(res, 200, { items: rows });
  },
);
