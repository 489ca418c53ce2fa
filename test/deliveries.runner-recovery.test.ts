import { EventEmitter } from 'node:events';
import type { WorkerEvents } from 'graphile-worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runnerDeath } from '../src/app.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { gate, startReceiver } from './support/receiver.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

// graphile-worker stops a runner's pool when it cannot complete a batch of jobs (a deadlock, the
// database going away), and the runner must be started again, or that process runs no job any
// more. With its local queue holding jobs no worker was free for, the pool's shutdown fails
// ("Cannot background something when the queue is already released"); under a burst its run
// promise then never settled (reproduced with 21,000 events, not in a test): the runner counts as
// dead from graphile-worker's events too (runnerDeath).
let api: TestApp;
let runner: TestApp | undefined;
beforeAll(async () => {
  api = await startTestApp({ config: { ALLOW_PRIVATE_DESTINATIONS: true } });
});
afterAll(async () => {
  await runner?.stop();
  await api?.stop();
});

describe('a job runner whose pool hit a fatal error', () => {
  it('is started again after a failed job completion stopped its pool with jobs in its local queue, and delivers every event once', async () => {
    // Six webhooks whose receiver holds each answer until the test opens that webhook's gate.
    const gates = Array.from({ length: 6 }, () => gate());
    const receiver = await startReceiver((r) => (r.url.startsWith('/slow/') ? { status: 200, until: gates[Number(r.url.slice(6))]!.opened } : { status: 200 }));
    const db = api.rt.db.pool;
    // Completing jobs fails while test_refuse_completion has a row.
    await db.query(`CREATE TABLE test_refuse_completion (x int);
      CREATE FUNCTION test_refuse_completion() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF EXISTS (SELECT 1 FROM test_refuse_completion) THEN RAISE EXCEPTION 'completion refused by the test'; END IF; RETURN OLD; END $$;
      CREATE TRIGGER test_refuse_completion BEFORE DELETE ON graphile_worker._private_jobs FOR EACH ROW EXECUTE FUNCTION test_refuse_completion();`);
    const count = async (sql: string) => (await db.query(sql)).rows[0].n as number;
    try {
      const { apiKey } = await ingestingProject(api);
      const slow = [];
      for (let i = 0; i < 6; i++) slow.push(await createWebhook(api, apiKey, { url: `${receiver.url}/slow/${i}` }));
      for (const wh of slow) expect((await ingest(api, wh.publicId, { headers: { 'x-webhook-secret': wh.ingestSecret } })).status).toBe(202);
      // A runner started now fetches as many jobs as it has workers (2), and two more at once for
      // its local queue: its two workers each wait for an answer, its local queue holds two jobs.
      runner = await startTestApp({ databaseUrl: api.databaseUrl, api: false, worker: true, config: { ALLOW_PRIVATE_DESTINATIONS: true, WORKER_CONCURRENCY: 2 } });
      await waitFor(() => receiver.received.length >= 2 || null, 20_000);
      await waitFor(async () => (await count(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE locked_at IS NOT NULL`)) >= 4 || null, 20_000);
      // One answer comes; its job finishes and its completion fails: the pool stops while its
      // local queue still holds jobs no worker is free for.
      await db.query('INSERT INTO test_refuse_completion VALUES (1)');
      const first = Number(receiver.received[0]!.url.slice(6));
      gates[first]!.open();
      await waitFor(async () => (await count(`SELECT count(*)::int AS n FROM deliveries WHERE status = 'succeeded'`)) >= 1 || null, 20_000);
      await new Promise((r) => setTimeout(r, 1_000));
      await db.query('DELETE FROM test_refuse_completion');
      for (const g of gates) g.open();

      // The runner is back: every delivery goes out once, the held ones and one ingested now.
      const fast = await createWebhook(api, apiKey, { url: `${receiver.url}/fast` });
      expect((await ingest(api, fast.publicId, { headers: { 'x-webhook-secret': fast.ingestSecret } })).status).toBe(202);
      await waitFor(() => receiver.received.some((r) => r.url === '/fast') || null, 30_000).catch(() => {});
      expect(receiver.received.filter((r) => r.url === '/fast'), 'the event ingested after the fatal error was delivered').toHaveLength(1);
      await waitFor(async () => (await count(`SELECT count(*)::int AS n FROM deliveries WHERE status = 'succeeded'`)) === 7 || null, 30_000).catch(() => {});
      expect((await db.query(`SELECT status, count(*)::int AS n FROM deliveries GROUP BY status`)).rows).toEqual([{ status: 'succeeded', n: 7 }]);
      expect(receiver.received.map((r) => r.url).sort()).toEqual(['/fast', ...slow.map((_, i) => `/slow/${i}`)].sort());
    } finally {
      for (const g of gates) g.open();
      // The next test's job must go to its own runner: one left running here could take it (its
      // completion refused, this one's pool would stop, and that test's runner would wait in vain).
      await runner?.stop();
      runner = undefined;
      await db.query('DROP TRIGGER IF EXISTS test_refuse_completion ON graphile_worker._private_jobs; DROP FUNCTION IF EXISTS test_refuse_completion(); DROP TABLE IF EXISTS test_refuse_completion');
      await receiver.close();
    }
  }, 120_000);
});

describe('a job runner told to stop after its pool stopped on its own', () => {
  it('stops cleanly before it is started again (graphile-worker refuses to stop a stopped runner)', async () => {
    const receiver = await startReceiver(() => ({ status: 200 }));
    const db = api.rt.db.pool;
    await db.query(`CREATE TABLE test_refuse_completion2 (x int);
      CREATE FUNCTION test_refuse_completion2() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'completion refused by the test'; END $$;
      CREATE TRIGGER test_refuse_completion2 BEFORE DELETE ON graphile_worker._private_jobs FOR EACH ROW EXECUTE FUNCTION test_refuse_completion2();`);
    let second: TestApp | undefined;
    try {
      second = await startTestApp({ databaseUrl: api.databaseUrl, api: false, worker: true, config: { ALLOW_PRIVATE_DESTINATIONS: true, WORKER_CONCURRENCY: 1 } });
      const { apiKey } = await ingestingProject(api);
      const wh = await createWebhook(api, apiKey, { url: `${receiver.url}/once` });
      expect((await ingest(api, wh.publicId, { headers: { 'x-webhook-secret': wh.ingestSecret } })).status).toBe(202);
      // The job runs; its completion fails; the pool stops and the run promise settles.
      const outcome = await Promise.race([second.runner!.promise.then(() => 'stopped', () => 'stopped'), new Promise((r) => setTimeout(() => r('running'), 30_000))]);
      expect(outcome).toBe('stopped');
      // Stopped at once, before the runner is started again: the stop ends, and without error.
      const stopping = second.stop();
      second = undefined;
      await expect(stopping).resolves.toBeUndefined();
    } finally {
      await second?.stop();
      await db.query('DROP TRIGGER IF EXISTS test_refuse_completion2 ON graphile_worker._private_jobs; DROP FUNCTION IF EXISTS test_refuse_completion2(); DROP TABLE IF EXISTS test_refuse_completion2');
      await receiver.close();
    }
  }, 60_000);
});

describe('runnerDeath: when a runner counts as dead whatever its run promise does', () => {
  const settled = (p: Promise<unknown>, ms: number) => Promise.race([p.then((v) => ({ v })), new Promise((r) => setTimeout(() => r('pending'), ms))]);

  it('at once when its forceful shutdown failed', async () => {
    const events: WorkerEvents = new EventEmitter();
    const dead = runnerDeath(events, 60_000);
    expect(await settled(dead, 50)).toBe('pending');
    const error = new Error('Errors occurred whilst deactivating queue');
    events.emit('pool:forcefulShutdown:error', { error } as never);
    expect(await settled(dead, 50)).toEqual({ v: error });
  });

  it('a while after a fatal error, should no shutdown say more', async () => {
    const events: WorkerEvents = new EventEmitter();
    const dead = runnerDeath(events, 300);
    const error = new Error('Failed to complete jobs');
    events.emit('pool:fatalError', { error } as never);
    expect(await settled(dead, 100)).toBe('pending');
    expect(await settled(dead, 2_000)).toEqual({ v: error });
  });

  it('never while its pool reports nothing fatal', async () => {
    const events: WorkerEvents = new EventEmitter();
    const dead = runnerDeath(events, 10);
    events.emit('pool:gracefulShutdown', { message: 'stop' } as never);
    expect(await settled(dead, 200)).toBe('pending');
  });
});
