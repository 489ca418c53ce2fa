// Baseline "insert": one durable transaction per request — BEGIN; INSERT the request body
// (~1 KB) as a row; COMMIT (synchronous_commit on, so each COMMIT waits for the WAL flush).
import { readBody, sendJson, serveBare } from './bare-server.ts';

await serveBare(
  async (pool) => {
    await pool.query(`CREATE SCHEMA IF NOT EXISTS bench_baseline`);
    await pool.query(`CREATE TABLE IF NOT EXISTS bench_baseline.inserted_rows (
      id bigserial PRIMARY KEY,
      created_at timestamptz NOT NULL DEFAULT now(),
      body text NOT NULL
    )`);
  },
  async (req, res, pool) => {
    const body = await readBody(req, 1024 * 1024);
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query<{ id: string }>('INSERT INTO bench_baseline.inserted_rows (body) VALUES ($1) RETURNING id', [body]);
      await client.query('COMMIT');
      sendJson(res, 202, { id: rows[0].id });
    } catch (e) {
      await client.query('ROLLBACK').catch(() => {});
      throw e;
    } finally {
      client.release();
    }
  },
);
