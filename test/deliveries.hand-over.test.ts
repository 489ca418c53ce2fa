import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { gate, startReceiver } from './support/receiver.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

// API and runner in one process (npm start): ingest hands a due delivery to its webhook's drain
// running here, without waking any runner. The runner polls once a minute here, so a delivery
// handed over and then lost would wait a minute.
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: true, config: { ALLOW_PRIVATE_DESTINATIONS: true, WORKER_POLL_INTERVAL_MS: 60_000 } });
});
afterAll(async () => {
  await app?.stop();
});

describe('ingest handing deliveries to a drain in the same process', () => {
  it('goes straight to the running drain: no runner is woken, each goes out once, and no job row is left', async () => {
    const held = gate();
    const receiver = await startReceiver((r) => (JSON.parse(r.body.toString()).n === 0 ? { status: 200, until: held.opened } : { status: 200 }));
    try {
      const { apiKey } = await ingestingProject(app);
      const wh = await createWebhook(app, apiKey, { url: `${receiver.url}/hook` });
      const send = async (n: number) => expect((await ingest(app, wh.publicId, { body: JSON.stringify({ n }), headers: { 'x-webhook-secret': wh.ingestSecret } })).status).toBe(202);
      // The first event wakes the runner; its drain stays while the receiver holds the answer.
      await send(0);
      await waitFor(() => receiver.received.length === 1 || null, 20_000);
      let nudges = 0;
      const nudge = app.rt.runners.nudge.bind(app.rt.runners);
      app.rt.runners.nudge = (count?: number) => {
        nudges++;
        nudge(count);
      };
      try {
        for (let n = 1; n <= 5; n++) await send(n);
        await waitFor(() => receiver.received.length === 6 || null, 20_000);
      } finally {
        app.rt.runners.nudge = nudge;
      }
      expect(nudges, 'runners woken for deliveries handed to the drain').toBe(0);
      const count = async (sql: string) => (await app.rt.db.pool.query(sql)).rows[0].n as number;
      // The drain still runs (the first answer is held) and the runner polls once a minute: the
      // claims that took the handed-over deliveries deleted their job rows.
      await waitFor(async () => (await count(`SELECT count(*)::int AS n FROM deliveries WHERE webhook_id = '${wh.id}' AND status = 'succeeded'`)) === 5 || null, 20_000);
      const handed = (await app.rt.db.pool.query(`SELECT id FROM deliveries WHERE webhook_id = $1 AND status = 'succeeded'`, [wh.id])).rows.map((r) => `del:${r.id}`);
      expect(handed).toHaveLength(5);
      expect(await count(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE key = ANY('{${handed.join(',')}}'::text[])`)).toBe(0);
      held.open();
      await waitFor(async () => (await count(`SELECT count(*)::int AS n FROM deliveries WHERE webhook_id = '${wh.id}' AND status = 'succeeded'`)) === 6 || null, 20_000);
      await waitFor(async () => (await count(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE key LIKE 'del:%'`)) === 0 || null, 20_000);
      expect(receiver.received.map((r) => JSON.parse(r.body.toString()).n).sort()).toEqual([0, 1, 2, 3, 4, 5]);
    } finally {
      held.open();
      await receiver.close();
    }
  });
});
