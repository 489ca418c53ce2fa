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

/**
 * The scene of each test: a webhook (`controls`) whose receiver holds its first request open and
 * answers 200 to the others, and a job runner process (`start:worker`) with that request open.
 */
async function runnerWithOpenAttempt(controls: Parameters<typeof createFixtureWebhook>[3]) {
  const receiver = await startReceiver((_r, n) => (n === 1 ? { hang: true } : { status: 200 }));
  const { apiKey, projectId } = await app.project('pro');
  const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, controls);
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/worker.ts'], {
    env: { ...process.env, DATABASE_URL: app.databaseUrl, LOG_LEVEL: 'silent' },
    stdio: 'ignore',
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const close = async () => {
    if (child.exitCode === null) child.kill('SIGKILL');
    await receiver.close();
  };
  try {
    const { deliveryId } = await enqueueFixtureEvent(app.rt, wh);
    await waitFor(() => receiver.received.length === 1, 30_000);
    return { receiver, apiKey, wh, child, exited, deliveryId, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** `check` with a job runner of this process on the same database running meanwhile. */
async function withRunner<T>(check: () => Promise<T>): Promise<T> {
  const runner = await startTestApp({ databaseUrl: app.databaseUrl, api: false, worker: true });
  try {
    return await check();
  } finally {
    await runner.stop();
  }
}

const delivery = async (apiKey: string, id: string) => (await app.api(apiKey, 'GET', `/v1/deliveries/${id}`)).body;
const attemptsOf = async (apiKey: string, id: string) => (await app.api(apiKey, 'GET', `/v1/deliveries/${id}/attempts`)).body.items as any[];

it('a runner killed with SIGKILL mid-attempt leads to a retry within timeoutMs + 60 s, never a lost or stuck delivery', async () => {
  const { receiver, apiKey, child, exited, deliveryId, close } = await runnerWithOpenAttempt({ timeoutMs: 1000 });
  try {
    child.kill('SIGKILL');
    const killedAt = Date.now();
    await exited;
    await withRunner(async () => {
      const d = await waitFor(async () => {
        const body = await delivery(apiKey, deliveryId);
        return body.status === 'succeeded' ? body : null;
      }, 1000 + 60_000);
      expect(Date.now() - killedAt).toBeLessThan(1000 + 60_000);
      expect(d.attempts).toBe(2);
    });
    expect(receiver.received).toHaveLength(2);
    expect(receiver.received[1].headers['webhook-id']).toBe(receiver.received[0].headers['webhook-id']);
    const attempts = await attemptsOf(apiKey, deliveryId);
    expect(attempts.map((a) => a.outcome)).toEqual(['retry', 'succeeded']);
    expect(attempts[0].error).toMatch(/interrupted/);
  } finally {
    await close();
  }
}, 90_000);

it('a runner killed mid-attempt gives its slots and claims back to a runner on the same machine at once, not when its lease runs out', async () => {
  // A long timeout: the dead runner's slot lease would run out after 70 s, its claim after 130 s.
  const { receiver, apiKey, wh, child, exited, deliveryId: first, close } = await runnerWithOpenAttempt({ timeoutMs: 60_000 });
  try {
    const { rows: leases } = await app.rt.db.pool.query('SELECT holder FROM webhook_slot_leases WHERE webhook_id = $1', [wh.id]);
    expect(leases).toHaveLength(1);
    expect(leases[0].holder).toMatch(new RegExp(`:${child.pid}:\\d+$`));
    child.kill('SIGKILL');
    const killedAt = Date.now();
    await exited;
    await withRunner(async () => {
      const { deliveryId: second } = await enqueueFixtureEvent(app.rt, wh);
      await waitFor(async () => ((await delivery(apiKey, first)).status === 'succeeded' && (await delivery(apiKey, second)).status === 'succeeded') || null, 40_000, 250);
      // The sweeper runs every 5 s; the lease alone would have held every slot for 70 s.
      expect(Date.now() - killedAt).toBeLessThan(40_000);
      expect((await delivery(apiKey, first)).attempts).toBe(2);
      expect((await delivery(apiKey, second)).attempts).toBe(1);
    });
    const attempts = await attemptsOf(apiKey, first);
    expect(attempts.map((a) => a.outcome)).toEqual(['retry', 'succeeded']);
    expect(attempts[0].error).toMatch(/interrupted/);
    expect(receiver.received).toHaveLength(3);
  } finally {
    await close();
  }
}, 90_000);

it('a runner told to stop (SIGTERM) while an attempt is open ends it at once: exits 0, the attempt recorded as interrupted and retried at once even when it was the last one, its lease given back', async () => {
  // One attempt only: a failure would go to the DLQ, an interruption is not the receiver's failure.
  const { receiver, apiKey, wh, child, exited, deliveryId, close } = await runnerWithOpenAttempt({ timeoutMs: 60_000, retryPolicy: { maxAttempts: 1 } });
  try {
    const signalled = Date.now();
    child.kill('SIGTERM');
    // Its stop is bounded at SHUTDOWN_TIMEOUT_MS + 1.5 s (exit 1) however long the receiver takes: this one ended on its own.
    expect(await exited).toBe(0);
    expect(Date.now() - signalled).toBeLessThan(4_000);
    const d = await delivery(apiKey, deliveryId);
    expect(d.status).toBe('retrying');
    expect(d.attempts).toBe(1);
    expect((await attemptsOf(apiKey, deliveryId)).map((a) => [a.outcome, a.error])).toEqual([['retry', expect.stringMatching(/interrupted/)]]);
    const { rows } = await app.rt.db.pool.query('SELECT count(*)::int AS n FROM webhook_slot_leases WHERE webhook_id = $1', [wh.id]);
    expect(rows[0].n).toBe(0);
    // The next runner sends it again at once.
    await withRunner(async () => {
      const done = await waitFor(async () => {
        const body = await delivery(apiKey, deliveryId);
        return body.status === 'succeeded' ? body : null;
      }, 20_000, 100);
      expect(done.attempts).toBe(2);
    });
    expect(receiver.received).toHaveLength(2);
  } finally {
    await close();
  }
}, 90_000);
