import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobTableVacuum } from '../src/deliveries/job-table-vacuum.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.stop();
});

async function maintenance() {
  const { rows } = await app.rt.db.pool.query(
    `SELECT vacuum_count::int AS vacuums, analyze_count::int AS analyzes FROM pg_stat_all_tables WHERE schemaname = 'graphile_worker' AND relname = '_private_jobs'`,
  );
  return rows[0] as { vacuums: number; analyzes: number };
}

describe("graphile-worker's job table after a backlog", () => {
  it('is vacuumed and analyzed once 2,000 jobs left it, at most every 2 s', async () => {
    const vacuum = new JobTableVacuum(app.rt.db.pool);
    const before = await maintenance();
    vacuum.noteDeleted(1_999);
    await new Promise((r) => setTimeout(r, 300));
    expect(await maintenance()).toEqual(before);
    vacuum.noteDeleted(1);
    const after = await waitFor(async () => {
      const m = await maintenance();
      return m.vacuums > before.vacuums && m.analyzes > before.analyzes ? m : null;
    }, 10_000);
    expect(after).toEqual({ vacuums: before.vacuums + 1, analyzes: before.analyzes + 1 });
    // A second backlog's worth right away waits for the interval.
    vacuum.noteDeleted(2_000);
    await new Promise((r) => setTimeout(r, 300));
    expect((await maintenance()).vacuums).toBe(after!.vacuums);
  });
});
