import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXACT_RATE_LIMIT } from '../src/projects/quotas/limits.ts';
import { setProjectQuota } from '../src/projects/service.ts';
import { createWebhookRow, simulateIngest, withinOneSecond } from './support/quota-fixtures.ts';
import { startTestApp, type TestApp } from './support/app.ts';

// Two API processes on one database: the ingest rate limit is one budget across both.
let a: TestApp;
let b: TestApp;
beforeAll(async () => {
  a = await startTestApp();
  b = await startTestApp({ databaseUrl: a.databaseUrl });
  // Warm both instances (connections, prepared statements) so timed sequences fit in one second.
  const { projectId } = await a.project('pro');
  const wh = await createWebhookRow(a.rt, projectId);
  for (const app of [a, b]) await simulateIngest(app.rt, projectId, wh.id);
});
afterAll(async () => {
  await b?.stop();
  await a?.stop();
});

const outcome = (r: any) => (r?.deliveryId ? 'ok' : r?.details?.quota ?? String(r));

describe('ingest rate limit shared by two server instances', () => {
  it('counts requests to either instance against one per-second budget', async () => {
    const { projectId } = await a.project('free');
    const wh = await createWebhookRow(a.rt, projectId);
    const results = await withinOneSecond(async () => {
      const out: unknown[] = [];
      for (const app of [a, b, a, b, a]) out.push(await simulateIngest(app.rt, projectId, wh.id).catch((e) => e));
      return out;
    });
    expect(results.map(outcome)).toEqual(['ok', 'ok', 'ok', 'ingest_rate', 'ingest_rate']);
    expect((results[3] as any).toBody().error).toMatchObject({ quota: 'ingest_rate', scope: 'project', limit: 3, current: 3, delta: 1, retryAfterSec: 1 });
  });

  it('lets exactly the limit through when both instances receive a burst at once', async () => {
    const { projectId } = await a.project('free'); // 3 req/s
    const wh = await createWebhookRow(a.rt, projectId);
    const results = await withinOneSecond(() =>
      Promise.all(Array.from({ length: 10 }, (_, i) => simulateIngest((i % 2 ? a : b).rt, projectId, wh.id).catch((e) => e))),
    );
    expect(results.filter((r) => outcome(r) === 'ok')).toHaveLength(3);
    expect(results.filter((r) => outcome(r) === 'ingest_rate')).toHaveLength(7);
  });

  it('shares the budget of a high custom rate, counted on sharded rows', async () => {
    const { projectId } = await a.project('enterprise');
    const limit = EXACT_RATE_LIMIT + 100;
    await setProjectQuota(a.rt, projectId, 'ingest_rate', String(limit));
    const wh = await createWebhookRow(a.rt, projectId);
    const results = await withinOneSecond(async () => {
      // Requests already counted this second by other connections (any shard) count too.
      await a.rt.db.pool.query(
        `INSERT INTO rate_limit_windows (project_id, key, shard, window_start, count) VALUES ($3, $1, 1000, floor(extract(epoch FROM now())), $2)
         ON CONFLICT (key, shard) DO UPDATE SET window_start = excluded.window_start, count = excluded.count`,
        [`ingest:p:${projectId}`, limit - 2, projectId],
      );
      const out: unknown[] = [];
      for (const app of [a, b, a]) out.push(await simulateIngest(app.rt, projectId, wh.id).catch((e) => e));
      return out;
    });
    expect(results.map(outcome)).toEqual(['ok', 'ok', 'ingest_rate']);
    expect((results[2] as any).details).toMatchObject({ limit, current: limit, delta: 1, scope: 'project' });
  });
});
