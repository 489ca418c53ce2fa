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
