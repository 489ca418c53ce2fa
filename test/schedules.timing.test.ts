// A schedule's ticks on time: the next tick is the first after now, so a runner more than a
// second late skips one by design. Whether none is skipped depends on the machine keeping up:
// this file runs in the project that runs alone (vitest.config.ts). That each tick fires and is
// delivered once is checked in schedules.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { createWebhook } from './support/webhooks.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.stop();
});

describe('schedules, timed', () => {
  it('a six-field every-second schedule skips no second with two runners running', async () => {
    const { apiKey } = await app.project('starter');
    const wh = await createWebhook(app, apiKey);
    const a = await startTestApp({ databaseUrl: app.databaseUrl, api: false, worker: true });
    const b = await startTestApp({ databaseUrl: app.databaseUrl, api: false, worker: true });
    const ticksOf = async (id: string) =>
      (await app.rt.db.pool.query(`SELECT headers->>'x-schedule-tick' AS tick FROM events WHERE headers->>'x-schedule-id' = $1`, [id])).rows.map((r) => Date.parse(r.tick) / 1000);
    try {
      const s = (await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/schedules`, { cron: '* * * * * *', payload: 'ping', contentType: 'text/plain' })).body;
      await waitFor(async () => (await ticksOf(s.id)).length >= 5, 20_000, 100);
      await app.api(apiKey, 'PATCH', `/v1/webhooks/${wh.id}/schedules/${s.id}`, { enabled: false });
      const secs = (await ticksOf(s.id)).sort((x, y) => x - y);
      expect(secs.slice(1).map((t, i) => t - secs[i])).toEqual(Array(secs.length - 1).fill(1));
    } finally {
      await b.stop();
      await a.stop();
    }
  });
});
