// Every table that holds a project's data carries `project_id`: the distribution column of a future
// Citus cluster (DESIGN, "Past one machine"; issue 31). The migrated database's public tables are
// listed; a table without the column must be named below, with why.
import pg from 'pg';
import { expect, it } from 'vitest';
import { createTestDatabase } from './support/database.ts';

/** Global or reference tables: no project's data, or the tenant itself. */
const GLOBAL: Record<string, string> = {
  _prisma_migrations: 'the migration ledger',
  projects: 'the tenants themselves (their id is the distribution value)',
  dashboard_login_limits: 'sign-in attempt limits by address and by e-mail, before any project is known',
};

it('every public table carries project_id, but the global ones', async () => {
  const c = new pg.Client({ connectionString: await createTestDatabase() });
  await c.connect();
  try {
    // Tables and partitioned tables; a partition is checked through its parent.
    const { rows } = await c.query<{ table: string; has: boolean }>(`
      SELECT t.relname AS table, EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = t.oid AND a.attname = 'project_id' AND NOT a.attisdropped) AS has
        FROM pg_class t JOIN pg_namespace n ON n.oid = t.relnamespace
       WHERE n.nspname = 'public' AND t.relkind IN ('r', 'p') AND NOT t.relispartition
       ORDER BY 1`);
    expect(rows.length).toBeGreaterThan(20);
    const without = rows.filter((r) => !r.has).map((r) => r.table);
    expect(without.filter((t) => !(t in GLOBAL)), 'a table without project_id: add the column, or name it in GLOBAL with why').toEqual([]);
    expect(Object.keys(GLOBAL).filter((t) => !rows.some((r) => r.table === t)), 'named here but no longer in the database').toEqual([]);
  } finally {
    await c.end();
  }
});
