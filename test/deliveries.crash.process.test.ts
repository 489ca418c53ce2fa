import { spawn } from 'node:child_process';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { createFixtureWebhook, enqueueFixtureEvent } from './support/delivery-fixture.ts';
import { startReceiver } from './support/receiver.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
});
afterAll(async () => {
  await app?.stop();
});

it('a runner killed with SIGKILL mid-attempt leads to a retry within timeoutMs + 60 s, never a lost or stuck delivery', async () => {
  const receiver = await startReceiver((_r, n) => (n === 1 ? { hang: true } : { status: 200 }));
  const { apiKey, projectId } = await app.project('pro');
  const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, { timeoutMs: 1000 });

  const child = spawn(process.execPath, ['--import', 'tsx', 'src/worker.ts'], {
    env: { ...process.env, DATABASE_URL: app.databaseUrl, LOG_LEVEL: 'silent' },
    stdio: 'ignore',
  });
  try {
    const { deliveryId } = await enqueueFixtureEvent(app.rt, wh);
    await waitFor(() => receiver.received.length === 1, 30_000);
    child.kill('SIGKILL');
    const killedAt = Date.now();
    await new Promise((r) => child.once('exit', r));

    const runner = await startTestApp({ databaseUrl: app.databaseUrl, api: false, worker: true });
    try {
      const d = await waitFor(async () => {
        const res = await app.api(apiKey, 'GET', `/v1/deliveries/${deliveryId}`);
        return res.body.status === 'succeeded' ? res.body : null;
      }, 1000 + 60_000);
      expect(Date.now() - killedAt).toBeLessThan(1000 + 60_000);
      expect(d.attempts).toBe(2);
      expect(receiver.received).toHaveLength(2);
      expect(receiver.received[1].headers['webhook-id']).toBe(receiver.received[0].headers['webhook-id']);
      const attempts = (await app.api(apiKey, 'GET', `/v1/deliveries/${deliveryId}/attempts`)).body.items;
      expect(attempts.map((a: any) => a.outcome)).toEqual(['retry', 'succeeded']);
      expect(attempts[0].error).toMatch(/interrupted/);
    } finally {
      await runner.stop();
    }
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await receiver.close();
  }
}, 90_000);

it('a runner killed mid-attempt gives its slots and claims back to a runner on the same machine at once, not when its lease runs out', async () => {
  // The first request is never answered: the runner is killed while it is open.
  const receiver = await startReceiver((_r, n) => (n === 1 ? { hang: true } : { status: 200 }));
  const { apiKey, projectId } = await app.project('pro');
  // A long timeout: the dead runner's slot lease would run out after 70 s, its claim after 130 s.
  const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, { timeoutMs: 60_000 });

  const child = spawn(process.execPath, ['--import', 'tsx', 'src/worker.ts'], {
    env: { ...process.env, DATABASE_URL: app.databaseUrl, LOG_LEVEL: 'silent' },
    stdio: 'ignore',
  });
  try {
    const first = await enqueueFixtureEvent(app.rt, wh);
    await waitFor(() => receiver.received.length === 1, 30_000);
    const { rows: leases } = await app.rt.db.pool.query('SELECT holder FROM webhook_slot_leases WHERE webhook_id = $1', [wh.id]);
    expect(leases).toHaveLength(1);
    expect(leases[0].holder).toMatch(new RegExp(`:${child.pid}:\\d+$`));
    child.kill('SIGKILL');
    const killedAt = Date.now();
    await new Promise((r) => child.once('exit', r));

    const runner = await startTestApp({ databaseUrl: app.databaseUrl, api: false, worker: true });
    try {
      const second = await enqueueFixtureEvent(app.rt, wh);
      const status = async (id: string) => (await app.api(apiKey, 'GET', `/v1/deliveries/${id}`)).body;
      await waitFor(async () => ((await status(first.deliveryId)).status === 'succeeded' && (await status(second.deliveryId)).status === 'succeeded') || null, 40_000, 250);
      // The sweeper runs every 5 s; the lease alone would have held every slot for 70 s.
      expect(Date.now() - killedAt).toBeLessThan(40_000);
      expect((await status(first.deliveryId)).attempts).toBe(2);
      expect((await status(second.deliveryId)).attempts).toBe(1);
      const attempts = (await app.api(apiKey, 'GET', `/v1/deliveries/${first.deliveryId}/attempts`)).body.items;
      expect(attempts.map((a: any) => a.outcome)).toEqual(['retry', 'succeeded']);
      expect(attempts[0].error).toMatch(/interrupted/);
      expect(receiver.received).toHaveLength(3);
    } finally {
      await runner.stop();
    }
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await receiver.close();
  }
}, 90_000);

it('a runner told to stop (SIGTERM) while an attempt is open ends it at once: exits 0, the attempt recorded as interrupted and retried at once even when it was the last one, its lease given back', async () => {
  const receiver = await startReceiver((_r, n) => (n === 1 ? { hang: true } : { status: 200 }));
  const { apiKey, projectId } = await app.project('pro');
  // One attempt only: a failure would go to the DLQ, an interruption is not the receiver's failure.
  const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, { timeoutMs: 60_000, retryPolicy: { maxAttempts: 1 } });
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/worker.ts'], {
    env: { ...process.env, DATABASE_URL: app.databaseUrl, LOG_LEVEL: 'silent' },
    stdio: 'ignore',
  });
  try {
    const { deliveryId } = await enqueueFixtureEvent(app.rt, wh);
    await waitFor(() => receiver.received.length === 1, 30_000);
    const signalled = Date.now();
    child.kill('SIGTERM');
    const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    // Its stop is bounded at SHUTDOWN_TIMEOUT_MS + 1.5 s (exit 1) however long the receiver takes: this one ended on its own.
    expect(code).toBe(0);
    expect(Date.now() - signalled).toBeLessThan(4_000);
    const d = (await app.api(apiKey, 'GET', `/v1/deliveries/${deliveryId}`)).body;
    expect(d.status).toBe('retrying');
    expect(d.attempts).toBe(1);
    const attempts = (await app.api(apiKey, 'GET', `/v1/deliveries/${deliveryId}/attempts`)).body.items;
    expect(attempts.map((a: any) => [a.outcome, a.error])).toEqual([['retry', expect.stringMatching(/interrupted/)]]);
    const { rows } = await app.rt.db.pool.query('SELECT count(*)::int AS n FROM webhook_slot_leases WHERE webhook_id = $1', [wh.id]);
    expect(rows[0].n).toBe(0);
    // The next runner sends it again at once.
    const runner = await startTestApp({ databaseUrl: app.databaseUrl, api: false, worker: true });
    try {
      const done = await waitFor(async () => {
        const body = (await app.api(apiKey, 'GET', `/v1/deliveries/${deliveryId}`)).body;
        return body.status === 'succeeded' ? body : null;
      }, 20_000, 100);
      expect(done.attempts).toBe(2);
      expect(receiver.received).toHaveLength(2);
    } finally {
      await runner.stop();
    }
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await receiver.close();
  }
}, 90_000);
