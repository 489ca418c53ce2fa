import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ATTEMPT_TASK } from '../src/deliveries/job.ts';
import { jobStartDelay } from '../src/prom.ts';
import { resumeWebhook } from '../src/webhooks/lifecycle.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { createFixtureWebhook, enqueueFixtureEvent, type FixtureWebhook } from './support/delivery-fixture.ts';
import { sweepPass } from './support/passes.ts';
import { gate, startReceiver } from './support/receiver.ts';

// A drain working through a backlog takes over the jobs of the webhook's queued deliveries
// (takeOverBacklogJobs, batch-run.ts): graphile-worker no longer runs one job per delivery only
// to have it name its delivery to the drain. What it leaves without a job is claimed by the
// drain, handed on by its hand-off job, or given jobs again by the sweep.
// A runner with two job slots: one runs the drain, the other would run the backlog's jobs one by
// one (each waiting 50 ms for the drain to take its delivery up), 20 a second: far too slow to
// empty the job table itself within the test's waits, however loaded the machine.
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: true, config: { WORKER_CONCURRENCY: 2 } });
});
afterAll(async () => {
  await app?.stop();
});

const count = async (sql: string, params: unknown[]) => (await app.rt.db.pool.query(sql, params)).rows[0].n as number;
const succeeded = (webhookId: string) => count(`SELECT count(*)::int AS n FROM deliveries WHERE webhook_id = $1 AND status = 'succeeded'`, [webhookId]);
/** Jobs of the webhook's deliveries, held by a runner (locked) or not. */
const jobs = (webhookId: string, locked: boolean) =>
  count(
    `SELECT count(*)::int AS n FROM graphile_worker._private_jobs j JOIN deliveries d ON j.key = 'del:' || d.id
      WHERE d.webhook_id = $1 AND (j.locked_at IS NOT NULL) = $2`,
    [webhookId, locked],
  );

/** How many delivery attempt jobs the runners of this process have started (the job start delay's count). */
const attemptJobsStarted = async () => (await jobStartDelay.get()).values.find((v) => v.metricName?.endsWith('_count') && v.labels.task === ATTEMPT_TASK)?.value ?? 0;

/** A paused webhook with `events` queued and no job left (the runner ran each, found the webhook paused, and ended it). */
async function pausedBacklog(url: string, events: number, maxInFlight: number): Promise<FixtureWebhook> {
  const { projectId } = await app.project('pro');
  // A timeout longer than the test holds requests open: none is retried meanwhile.
  const wh = await createFixtureWebhook(app.rt, projectId, url, { maxInFlight, status: 'paused', timeoutMs: 30_000 });
  for (let i = 0; i < events; i++) await enqueueFixtureEvent(app.rt, wh, JSON.stringify({ i }));
  await waitFor(async () => (await jobs(wh.id, false)) + (await jobs(wh.id, true)) === 0 || null, 20_000);
  return wh;
}

describe('a backlog drained by one job runner', () => {
  it("has its deliveries' jobs taken over by the drain: none is left waiting for the runner, and every delivery goes out once", async () => {
    const open = gate();
    const receiver = await startReceiver(() => ({ status: 200, until: open.opened }));
    const wh = await pausedBacklog(receiver.url, 1000, 2);
    // Resuming gives each of the 1,000 a job; the first the runner takes starts the drain.
    const startedBefore = await attemptJobsStarted();
    await resumeWebhook(app.rt, wh.projectId, wh.id);
    await waitFor(() => receiver.inFlight === 2 || null, 10_000);
    // The drain's two requests are held open: meanwhile it deleted the jobs of the deliveries
    // waiting, and no job is left but those the runner holds: the one the drain
    // runs in, and one more at most (before, the runner ran every one of the 1,000 while the drain
    // waited, each naming its delivery to the drain).
    await waitFor(async () => ((await jobs(wh.id, false)) === 0 && (await jobs(wh.id, true)) <= 2) || null, 10_000);
    expect(await count(`SELECT count(*)::int AS n FROM deliveries WHERE webhook_id = $1 AND status = 'queued'`, [wh.id])).toBeGreaterThan(900);
    open.open();
    await waitFor(async () => (await succeeded(wh.id)) === 1000 || null, 60_000);
    // What the runner had fetched before the first claim's take-over reached the job table, and
    // the hand-off jobs of drains whose time was up: a few, not the 1,000.
    expect((await attemptJobsStarted()) - startedBefore).toBeLessThan(100);
    const ids = receiver.received.map((r) => r.headers['webhook-id']);
    expect(ids).toHaveLength(1000);
    expect(new Set(ids).size).toBe(1000);
    expect(receiver.maxInFlight).toBe(2);
    await receiver.close();
  });

  it('whose webhook turns one-at-a-time (throttled) while its drain holds the jobs: each waiting delivery gets its job back when the drain ends, and all go out soon', async () => {
    const open = gate();
    const receiver = await startReceiver(() => ({ status: 200, until: open.opened }));
    const wh = await pausedBacklog(receiver.url, 100, 2);
    await resumeWebhook(app.rt, wh.projectId, wh.id);
    await waitFor(() => receiver.inFlight === 2 || null, 10_000);
    await waitFor(async () => ((await jobs(wh.id, false)) === 0 && (await jobs(wh.id, true)) <= 2) || null, 10_000);
    // Throttled: the drain's next claim finds the webhook no longer batchable and ends.
    await app.rt.db.pool.query(`UPDATE webhooks SET throttle_rate_per_second = 100, config_version = config_version + 1 WHERE id = $1`, [wh.id]);
    open.open();
    // Well before the sweep would find them (20 s after they were last queued).
    await waitFor(async () => (await succeeded(wh.id)) === 100 || null, 12_000);
    expect(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size).toBe(100);
    await receiver.close();
  });

  it('left without a job and without a drain (its runner died), is given jobs again by the sweep and delivered', async () => {
    const receiver = await startReceiver();
    const wh = await pausedBacklog(receiver.url, 40, 10);
    // As a drain that took the jobs over leaves it when its runner dies: active, queued, no job,
    // no lease (the sweep gives back the leases of exited runners), queued for a while.
    await app.rt.db.pool.query(`UPDATE webhooks SET status = 'active' WHERE id = $1`, [wh.id]);
    await app.rt.db.pool.query(`UPDATE deliveries SET updated_at = now() - interval '1 minute' WHERE webhook_id = $1`, [wh.id]);
    // (The runner's own sweep, every 5 s, may be the one that finds them.)
    expect(await sweepPass(app.rt)).toBeLessThanOrEqual(40);
    await waitFor(async () => (await succeeded(wh.id)) === 40 || null, 20_000);
    const ids = receiver.received.map((r) => r.headers['webhook-id']);
    expect(new Set(ids).size).toBe(40);
    await receiver.close();
  });
});
