import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requeueWebhookAttemptJobs } from '../src/deliveries/job.ts';
import { sweepDeliveries } from '../src/deliveries/sweep.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { createFixtureWebhook, enqueueFixtureEvent } from './support/delivery-fixture.ts';
import { sweepPass } from './support/passes.ts';
import { gate, startReceiver } from './support/receiver.ts';

// Two job runners on one database, plus the API instance that owns the HTTP server.
let app: TestApp;
let second: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: true });
  second = await startTestApp({ databaseUrl: app.databaseUrl, api: false, worker: true });
});
afterAll(async () => {
  await second?.stop();
  await app?.stop();
});

async function allSettled(apiKey: string, ids: string[], timeoutMs = 20_000) {
  return waitFor(async () => {
    const res = await app.api(apiKey, 'GET', `/v1/deliveries?limit=100`);
    const byId = new Map(res.body.items.map((d: any) => [d.id, d]));
    const done = ids.every((id) => ['succeeded', 'failed'].includes((byId.get(id) as any)?.status));
    return done ? ids.map((id) => byId.get(id) as any) : null;
  }, timeoutMs);
}

describe('ordering and concurrency across two runners', () => {
  it('strict_fifo: delivery N+1 is never attempted before N succeeded or reached the DLQ', async () => {
    let failuresLeft = 3;
    const receiver = await startReceiver((r) => {
      const n = JSON.parse(r.body.toString()).n;
      if (n === 2 && failuresLeft-- > 0) return { status: 500 };
      if (n === 5) return { status: 400 };
      return { status: 200, delayMs: 5 };
    });
    const { apiKey, projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, { deliveryMode: 'strict_fifo', retryPolicy: { initialDelayMs: 100, jitter: false } });
    const ids: string[] = [];
    for (let n = 0; n < 10; n++) ids.push((await enqueueFixtureEvent(app.rt, wh, JSON.stringify({ n }))).deliveryId);
    const results = (await allSettled(apiKey, ids))!;
    expect(results.map((d) => d.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded', 'succeeded', 'failed', ...Array(4).fill('succeeded')]);
    const order = receiver.received.map((r) => JSON.parse(r.body.toString()).n);
    expect(order).toEqual([0, 1, 2, 2, 2, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(receiver.maxInFlight).toBe(1);
    await receiver.close();
  });

  it('parallel: at most maxInFlight attempts of one webhook at once, and a slow webhook does not hold up another', async () => {
    // The slow receiver answers nothing until the test opens its gate.
    const held = gate();
    const slow = await startReceiver(() => ({ status: 200, until: held.opened }));
    const fast = await startReceiver(() => ({ status: 200 }));
    const { apiKey, projectId } = await app.project('pro');
    const slowWh = await createFixtureWebhook(app.rt, projectId, slow.url, { maxInFlight: 2 });
    const fastWh = await createFixtureWebhook(app.rt, projectId, fast.url);
    const slowIds: string[] = [];
    for (let i = 0; i < 8; i++) slowIds.push((await enqueueFixtureEvent(app.rt, slowWh)).deliveryId);
    await waitFor(() => slow.received.length === 2, 10_000);
    const fastIds: string[] = [];
    for (let i = 0; i < 5; i++) fastIds.push((await enqueueFixtureEvent(app.rt, fastWh)).deliveryId);
    // Every fast delivery goes out while the slow webhook's two attempts are held open.
    const fastDone = (await allSettled(apiKey, fastIds))!;
    expect(fastDone.map((d) => d.status)).toEqual(Array(5).fill('succeeded'));
    expect(slow.received).toHaveLength(2);
    expect(slow.inFlight).toBe(2);
    held.open();
    await allSettled(apiKey, slowIds);
    expect(slow.received).toHaveLength(8);
    expect(slow.maxInFlight).toBe(2);
    await slow.close();
    await fast.close();
  });

  it('parallel: a backlog is drained in batches by both runners, each delivery sent once, within maxInFlight', async () => {
    const receiver = await startReceiver(() => ({ status: 200, delayMs: 5 }));
    const { projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, { maxInFlight: 20 });
    const ids: string[] = [];
    for (let i = 0; i < 300; i++) ids.push((await enqueueFixtureEvent(app.rt, wh, JSON.stringify({ i }))).deliveryId);
    await waitFor(async () => {
      const { rows } = await app.rt.db.pool.query(`SELECT count(*)::int AS n FROM deliveries WHERE webhook_id = $1 AND status = 'succeeded'`, [wh.id]);
      return rows[0].n === ids.length || null;
    }, 30_000);
    expect(receiver.received).toHaveLength(ids.length);
    expect(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size).toBe(ids.length);
    expect(receiver.maxInFlight).toBeLessThanOrEqual(20);
    expect(receiver.maxInFlight).toBeGreaterThan(1);
    // The in-flight slots are given back just after the results are recorded.
    const counts = await waitFor(async () => {
      const { rows } = await app.rt.db.pool.query(
        `SELECT (SELECT count(*)::int FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.webhook_id = $1) AS attempts,
                (SELECT max(attempts) FROM deliveries WHERE webhook_id = $1) AS most,
                (SELECT in_flight FROM webhooks WHERE id = $1) AS in_flight`,
        [wh.id],
      );
      return rows[0].in_flight === 0 ? rows[0] : null;
    }, 5_000);
    expect(counts).toEqual({ attempts: ids.length, most: 1, in_flight: 0 });
    // Jobs of deliveries a batch took were deleted or ran: none is left to do the work again.
    const left = await waitFor(async () => {
      const { rows: jobs } = await app.rt.db.pool.query(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE key = ANY($1::text[])`, [ids.map((id) => `del:${id}`)]);
      return jobs[0].n === 0 || null;
    }, 10_000);
    expect(left).toBe(true);
    await receiver.close();
  });

  it('throttleRatePerSecond paces outbound requests by scheduling, not sleeping', async () => {
    const receiver = await startReceiver();
    const { apiKey, projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, { throttleRatePerSecond: 5 });
    const ids: string[] = [];
    const before = Date.now();
    for (let i = 0; i < 11; i++) ids.push((await enqueueFixtureEvent(app.rt, wh)).deliveryId);
    await allSettled(apiKey, ids);
    expect(receiver.received).toHaveLength(11);
    const times = receiver.received.map((r) => r.at).sort((a, b) => a - b);
    // Sends are at least an interval (200 ms, less 2 ms of slack) apart when they leave, the first
    // after the events came in; a send may leave late, never early. So however late any of them
    // was, the k-th to arrive arrived no sooner than k intervals after the first event came in.
    const early = times.map((t, k) => ({ k, t: t - before, notBefore: k * 198 })).filter((x) => x.t < x.notBefore);
    expect(early).toEqual([]);
    await receiver.close();
  });

  it('scheduled deliveries run at their time, not before', async () => {
    const receiver = await startReceiver();
    const { apiKey, projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url);
    const runAt = new Date(Date.now() + 1500);
    const { deliveryId, status } = await enqueueFixtureEvent(app.rt, wh, '{}', { runAt });
    expect(status).toBe('scheduled');
    expect((await app.api(apiKey, 'GET', `/v1/deliveries/${deliveryId}`)).body.status).toBe('scheduled');
    await allSettled(apiKey, [deliveryId]);
    expect(receiver.received[0].at).toBeGreaterThanOrEqual(runAt.getTime() - 5);
    await receiver.close();
  });

  it('the sweeper gives back in-flight slots leaked by a runner that died between two statements', async () => {
    const { projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, 'http://127.0.0.1:9/', { maxInFlight: 2 });
    await app.rt.db.pool.query('UPDATE webhooks SET in_flight = 2 WHERE id = $1', [wh.id]);
    const inFlight = async () => (await app.rt.db.pool.query('SELECT in_flight FROM webhooks WHERE id = $1', [wh.id])).rows[0].in_flight as number;
    expect(await inFlight()).toBe(2);
    await sweepPass(app.rt);
    expect(await inFlight(), 'slots left taken after the sweep').toBe(0);
  });

  it('a leaked in-flight slot is given back while events keep arriving, and the held-back deliveries go out', async () => {
    const receiver = await startReceiver();
    const { apiKey, projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, { maxInFlight: 1 });
    // The one slot is taken by no attempt (a leak): nothing can be claimed.
    await app.rt.db.pool.query('UPDATE webhooks SET in_flight = 1 WHERE id = $1', [wh.id]);
    const ids: string[] = [];
    // Events keep arriving (the webhook never goes quiet) while the sweeper runs.
    const deadline = Date.now() + 15_000;
    let healed = false;
    while (Date.now() < deadline && !healed) {
      ids.push((await enqueueFixtureEvent(app.rt, wh, JSON.stringify({ n: ids.length }))).deliveryId);
      await sweepDeliveries(app.rt);
      const { rows } = await app.rt.db.pool.query(
        `SELECT in_flight, (SELECT count(*)::int FROM deliveries WHERE webhook_id = $1 AND status = 'delivering') AS delivering FROM webhooks WHERE id = $1`,
        [wh.id],
      );
      healed = rows[0].in_flight === rows[0].delivering;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(healed).toBe(true);
    const settled = (await allSettled(apiKey, ids))!;
    expect(settled.every((d) => d.status === 'succeeded')).toBe(true);
    // Results give their slot back in the statement that records them: nothing is left taken.
    const { rows } = await app.rt.db.pool.query('SELECT in_flight FROM webhooks WHERE id = $1', [wh.id]);
    expect(rows[0].in_flight).toBe(0);
    await receiver.close();
  });

  it('deliveries of a paused webhook wait and run after it is active again', async () => {
    const receiver = await startReceiver();
    const { apiKey, projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, { status: 'paused' });
    const { deliveryId } = await enqueueFixtureEvent(app.rt, wh);
    await new Promise((r) => setTimeout(r, 800));
    expect(receiver.received).toHaveLength(0);
    expect((await app.api(apiKey, 'GET', `/v1/deliveries/${deliveryId}`)).body.status).toBe('queued');
    await app.rt.db.prisma.webhook.update({ where: { id: wh.id }, data: { status: 'active' } });
    await requeueWebhookAttemptJobs(app.rt.db.pool, wh.id);
    const [d] = (await allSettled(apiKey, [deliveryId]))!;
    expect(d.status).toBe('succeeded');
    await receiver.close();
  });
});
