import pg from 'pg';
import { DRAIN_BUDGET_MS } from '../src/deliveries/batch-run.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { startReceiver } from './support/receiver.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

// Issue 29: a webhook's slots go back when an answer comes, not when its result is written. Here
// no result can be written at all (another transaction holds a lock their statement needs) for
// longer than a drain lasts (5 s), with the API and the runner apart: every event ingested
// meanwhile still reaches the receiver, through the drain running then and the ones after it.
// Once the lock is gone, every result is written. (Before the slot leases, 6f7ebea, the slots
// filled up with unrecorded attempts and the rest waited.)
let api: TestApp;
let runner: TestApp;
beforeAll(async () => {
  api = await startTestApp({ config: { ALLOW_PRIVATE_DESTINATIONS: true } });
  runner = await startTestApp({ databaseUrl: api.databaseUrl, api: false, worker: true, config: { ALLOW_PRIVATE_DESTINATIONS: true } });
});
afterAll(async () => {
  await runner?.stop();
  await api?.stop();
});

/** A drain's budget, with a margin for its last answers. */
const DRAIN_ENDED_MS = DRAIN_BUDGET_MS + 1_500;

describe('deliveries while no result can be written', () => {
  it('keep reaching the receiver for longer than a drain lasts, and their results are written once they can be', async () => {
    // Answers after 80 ms: each drain ends with answers still open.
    const receiver = await startReceiver(() => ({ status: 200, delayMs: 80 }));
    const locker = new pg.Client({ connectionString: api.databaseUrl });
    await locker.connect();
    let sending = true;
    let locked = false;
    const sent: { i: number; at: number }[] = [];
    try {
      const { apiKey } = await ingestingProject(api);
      const wh = await createWebhook(api, apiKey, { url: `${receiver.url}/hook` });
      // A steady stream (one event every 10 ms), so a drain runs until its budget is spent.
      const producer = (async () => {
        for (let i = 0; sending && i < 3_000; i++) {
          const res = await ingest(api, wh.publicId, { body: JSON.stringify({ i }), headers: { 'x-webhook-secret': wh.ingestSecret } });
          expect(res.status).toBe(202);
          sent.push({ i, at: Date.now() });
          await new Promise((r) => setTimeout(r, 10));
        }
      })();
      await waitFor(() => receiver.received.length >= 20 || null, 20_000);
      // From now on no result can be written: the statement that records them inserts attempt rows.
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE delivery_attempts IN SHARE MODE');
      locked = true;
      const lockedAt = Date.now();
      const succeededAtLock = await succeeded();
      // Every drain running when the lock was taken has ended by then (its budget is spent), and
      // every event ingested until then must arrive though none of their results can be written.
      const until = lockedAt + DRAIN_ENDED_MS;
      await new Promise((r) => setTimeout(r, Math.max(0, until - Date.now())));
      const due = sent.filter((s) => s.at <= until).map((s) => s.i);
      const arrived = () => new Set(receiver.received.map((r) => JSON.parse(r.body.toString()).i as number));
      await waitFor(() => due.every((i) => arrived().has(i)) || null, 25_000).catch(() => {});
      const missing = due.filter((i) => !arrived().has(i));
      const succeededWhileLocked = await succeeded();
      await locker.query('COMMIT');
      locked = false;
      sending = false;
      await producer;
      expect(missing, 'events ingested before the drains running at the lock had ended, not delivered while no result could be written').toEqual([]);
      expect(succeededWhileLocked, 'no result was written while the lock was held').toBe(succeededAtLock);
      // Once the lock is gone every result is written: each event delivered, and recorded as such.
      await waitFor(async () => (await succeeded()) === sent.length || null, 30_000);
      expect(arrived().size).toBe(sent.length);
    } finally {
      sending = false;
      if (locked) await locker.query('ROLLBACK').catch(() => {});
      await locker.end();
      await receiver.close();
    }
  }, 120_000);
});

async function succeeded(): Promise<number> {
  return (await api.rt.db.pool.query(`SELECT count(*)::int AS n FROM deliveries WHERE status = 'succeeded'`)).rows[0].n as number;
}
