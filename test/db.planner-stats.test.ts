import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../src/db/migrate.ts';
import { ATTEMPT_TASK } from '../src/deliveries/job.ts';
import { ensureHistoryPartitions } from '../src/retention/partitions.ts';
import { createTestDatabase } from './support/database.ts';

// Tables PostgreSQL never analyzed are planned as a few pages of unknown rows: the delivery
// statements then scan partitions instead of using their primary keys until autovacuum comes.
let pool: pg.Pool;
const neverAnalyzed = async () =>
  (
    await pool.query<{ t: string }>(
      `SELECT c.oid::regclass::text AS t FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname IN ('public', 'graphile_worker') AND c.relkind = 'r' AND c.reltuples < 0 ORDER BY 1`,
    )
  ).rows.map((r) => r.t);

beforeAll(async () => {
  const url = await createTestDatabase();
  pool = new pg.Pool({ connectionString: url, max: 2 });
  // The file's database is dropped (WITH FORCE) right after pool.end(): a connection still
  // closing then gets 57P01, which must not surface as an unhandled error of the run.
  pool.on('error', () => {});
  // A database as a fresh install finds it: every table just made, none analyzed yet.
  await pool.query(`DROP SCHEMA public CASCADE; CREATE SCHEMA public; DROP SCHEMA IF EXISTS graphile_worker CASCADE`);
  await migrate(url, [ATTEMPT_TASK]);
});
afterAll(async () => {
  await pool?.end();
});

describe('planner statistics', () => {
  it('a migrated fresh database has statistics for every table (analyzed empty)', async () => {
    expect(await pool.query(`SELECT count(*)::int AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'`).then((r) => r.rows[0].n)).toBeGreaterThan(40);
    expect(await neverAnalyzed()).toEqual([]);
  });

  it('the partition job analyzes the days it makes', async () => {
    const made = await ensureHistoryPartitions(pool, new Date(Date.now() + 20 * 86_400_000), 1);
    expect(made.length).toBeGreaterThanOrEqual(8);
    const { rows } = await pool.query<{ t: string; reltuples: number }>(`SELECT oid::regclass::text AS t, reltuples FROM pg_class WHERE oid::regclass::text = ANY ($1::text[])`, [made]);
    expect(rows.map((r) => r.t).sort()).toEqual([...made].sort());
    expect(rows.filter((r) => r.reltuples < 0)).toEqual([]);
  });
});
