import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { startReceiver } from './support/receiver.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';
import { ATTEMPT_TASK } from '../src/deliveries/job.ts';

// Ingest writes its job rows without a NOTIFY inside its commit and wakes the runners after it
// (JobRunnerNudge). A runner that polls only once a minute must still attempt new deliveries
// at once, when it runs in another process than the API that took the event in.
let api: TestApp;
let runner: TestApp;
beforeAll(async () => {
  api = await startTestApp({ config: { ALLOW_PRIVATE_DESTINATIONS: true } });
  runner = await startTestApp({ databaseUrl: api.databaseUrl, api: false, worker: true, config: { ALLOW_PRIVATE_DESTINATIONS: true, WORKER_POLL_INTERVAL_MS: 60_000 } });
});
afterAll(async () => {
  await runner?.stop();
  await api?.stop();
});

describe('waking job runners after ingest', () => {
  it('delivers events ingested by another process long before the runner’s next poll (it polls once a minute): the API wakes it', async () => {
    const receiver = await startReceiver();
    try {
      const { apiKey } = await ingestingProject(api);
      const wh = await createWebhook(api, apiKey, { url: `${receiver.url}/hook` });
      // Let the runner's first poll (at start) pass: what follows can only be found through a nudge.
      await new Promise((r) => setTimeout(r, 300));
      for (let i = 0; i < 5; i++) {
        const res = await ingest(api, wh.publicId, { body: JSON.stringify({ i }), headers: { 'x-webhook-secret': wh.ingestSecret } });
        expect(res.status, JSON.stringify(res.body)).toBe(202);
        // Within 20 s, a third of the poll interval: only a wake-up can have found it.
        await waitFor(() => receiver.received.length > i || null, 20_000).catch(() => {});
        expect(receiver.received, `event ${i} delivered before the runner's next poll`).toHaveLength(i + 1);
      }
      expect(receiver.received.map((r) => JSON.parse(r.body.toString()).i)).toEqual([0, 1, 2, 3, 4]);
      const count = async (sql: string, values: unknown[] = []) => (await api.rt.db.pool.query(sql, values)).rows[0].n as number;
      // Each delivery succeeded once, and every job row ingest wrote was run and completed. (Only
      // the attempt jobs: a recurring job the runner's cron adds on the minute may still be there.)
      await waitFor(async () => (await count(`SELECT count(*)::int AS n FROM deliveries WHERE status = 'succeeded'`)) === 5 || null, 5_000);
      const attemptJobs = `SELECT count(*)::int AS n FROM graphile_worker._private_jobs j JOIN graphile_worker._private_tasks t ON t.id = j.task_id WHERE t.identifier = $1`;
      await waitFor(async () => (await count(attemptJobs, [ATTEMPT_TASK])) === 0 || null, 5_000);
      expect(receiver.received).toHaveLength(5);
    } finally {
      await receiver.close();
    }
  });
});
