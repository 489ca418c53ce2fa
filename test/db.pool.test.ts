import { afterAll, describe, expect, it } from 'vitest';
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
});
