import { afterAll, describe, expect, it } from 'vitest';
import { evaluateAlerts } from '../src/alerts/evaluate.ts';
import { runRetention } from '../src/retention/run.ts';
import { startTestApp, type TestApp } from './support/app.ts';

const apps: TestApp[] = [];
afterAll(async () => {
  await Promise.all(apps.map((a) => a.stop()));
});

describe('connection pools', () => {
  it('open the connections DATABASE_POOL_MIN asks for before the service answers, and keep them', async () => {
    const app = await startTestApp({ worker: true, config: { DATABASE_POOL_MIN: 3 } });
    apps.push(app);
    // Open already, idle: a burst later takes them instead of making PostgreSQL start backends.
    expect(app.rt.db.pool.totalCount).toBe(3);
    expect(app.rt.db.relaxedPool.totalCount).toBeGreaterThanOrEqual(3);
    const res = await fetch(`${app.url}/readyz`);
    expect(res.status).toBe(200);
    expect(app.rt.db.pool.totalCount).toBe(3);
  });

  it('open none ahead with DATABASE_POOL_MIN=0', async () => {
    const app = await startTestApp({ config: { DATABASE_POOL_MIN: 0 } });
    apps.push(app);
    expect(app.rt.db.pool.totalCount).toBeLessThanOrEqual(1);
  });

  it('never lend the session-lock connections from the pool: two lock-holding jobs at once finish on a pool of 2', async () => {
    // The alerts evaluation and a retention pass each hold a connection for their advisory lock
    // and run their statements on the pool. Were the lock connections the pool's, the two would
    // hold both of a pool of 2 and each wait for a third: neither would ever finish.
    const app = await startTestApp({ config: { DATABASE_POOL_SIZE: 2, DATABASE_POOL_MIN: 0 } });
    apps.push(app);
    const both = Promise.all([evaluateAlerts(app.rt), runRetention(app.rt)]);
    const stuck = new Promise<'stuck'>((r) => setTimeout(() => r('stuck'), 20_000).unref());
    const outcome = await Promise.race([both, stuck]);
    expect(outcome).not.toBe('stuck');
    const [alerts, retention] = outcome as Awaited<typeof both>;
    expect(alerts.ran).toBe(true);
    expect(retention.ran).toBe(true);
    expect(app.rt.db.direct).not.toBe(app.rt.db.pool);
  }, 30_000);
});
