import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './support/app.ts';
import { withinOneSecond } from './support/quota-fixtures.ts';
import { createWebhook, ingest } from './support/webhooks.ts';

// Two instances on one database, one with QUOTA_ENFORCEMENT=off: the same Free webhook is
// rate-limited through the one and not through the other.
let on: TestApp;
let off: TestApp;
beforeAll(async () => {
  on = await startTestApp();
  off = await startTestApp({ databaseUrl: on.databaseUrl, config: { QUOTA_ENFORCEMENT: 'off' } });
});
afterAll(async () => {
  await off?.stop();
  await on?.stop();
});

describe('QUOTA_ENFORCEMENT', () => {
  it('off: a Free project is not rate-limited; on (the default): its 4th ingest in a second is 429', async () => {
    const { apiKey } = await on.project('free');
    const wh = await createWebhook(on, apiKey);
    const auth = { 'x-webhook-secret': wh.ingestSecret };

    // Free allows 3 ingests per second; twice that in one second all get in. (withinOneSecond
    // runs the block again when it spilled over a second: count what every run stored.)
    let accepted = 0;
    const unchecked = await withinOneSecond(async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) statuses.push((await ingest(off, wh.publicId, { headers: auth })).status);
      accepted += statuses.filter((s) => s === 202).length;
      return statuses;
    });
    expect(unchecked).toEqual([202, 202, 202, 202, 202, 202]);

    const checked = await withinOneSecond(async () => {
      const out: { status: number; body: any }[] = [];
      for (let i = 0; i < 4; i++) out.push(await ingest(on, wh.publicId, { headers: auth }));
      accepted += out.filter((r) => r.status === 202).length;
      return out;
    });
    expect(checked.map((r) => r.status)).toEqual([202, 202, 202, 429]);
    expect(checked[3].body.error).toMatchObject({ code: 'quota_exceeded', quota: 'ingest_rate', scope: 'project', limit: 3 });

    // Both instances stored every accepted event.
    const { rows } = await on.rt.db.pool.query('SELECT count(*)::int AS n FROM events WHERE webhook_id = $1', [wh.id]);
    expect(rows[0].n).toBe(accepted);
    expect(accepted).toBeGreaterThanOrEqual(9);
  });
});
