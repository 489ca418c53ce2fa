import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { createFixtureWebhook, enqueueFixtureEvent } from './support/delivery-fixture.ts';
import { gate, startReceiver } from './support/receiver.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: true });
});
afterAll(async () => {
  await app?.stop();
});

async function deliveryOf(apiKey: string, id: string) {
  return (await app.api(apiKey, 'GET', `/v1/deliveries/${id}`)).body;
}
async function settled(apiKey: string, id: string, statuses = ['succeeded', 'failed'], timeoutMs = 15_000) {
  return waitFor(async () => {
    const d = await deliveryOf(apiKey, id);
    return statuses.includes(d.status) ? d : null;
  }, timeoutMs);
}

describe('HTTP delivery', () => {
  it('sends the payload byte for byte, signed the Standard Webhooks way, and records the attempt', async () => {
    const receiver = await startReceiver();
    const { apiKey, projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, `${receiver.url}/hook`, { customHeaders: { 'X-Team': 'blue' } });
    const payload = '{"id": 1,  "text":"héllo"}';
    const { deliveryId, eventId } = await enqueueFixtureEvent(app.rt, wh, payload);
    const d = await settled(apiKey, deliveryId);
    expect(d).toMatchObject({ id: deliveryId, webhookId: wh.id, eventId, status: 'succeeded', attempts: 1, replayOf: null });
    expect(d.lastAttempt).toMatchObject({ statusCode: 200 });
    expect(receiver.received).toHaveLength(1);
    const r = receiver.received[0];
    expect(r.body.toString()).toBe(payload);
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['x-team']).toBe('blue');
    expect(r.headers['webhook-id']).toBe(eventId);
    const verified = new Webhook(wh.signingSecret).verify(r.body.toString(), r.headers as Record<string, string>);
    expect(verified).toEqual(JSON.parse(payload));
    const attempts = await app.api(apiKey, 'GET', `/v1/deliveries/${deliveryId}/attempts`);
    expect(attempts.body.items).toHaveLength(1);
    expect(attempts.body.items[0]).toMatchObject({ number: 1, statusCode: 200, outcome: 'succeeded' });
    await receiver.close();
  });

  it('retries retryable failures by the policy and honours Retry-After', async () => {
    const receiver = await startReceiver((_r, n) => (n === 1 ? { status: 503 } : n === 2 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 200 }));
    const { apiKey, projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, { retryPolicy: { initialDelayMs: 100, jitter: false } });
    const { deliveryId } = await enqueueFixtureEvent(app.rt, wh);
    const d = await settled(apiKey, deliveryId);
    expect(d.status).toBe('succeeded');
    expect(d.attempts).toBe(3);
    expect(receiver.received.map((r) => r.headers['webhook-id'])).toEqual(Array(3).fill(d.eventId));
    expect(receiver.received[2].at - receiver.received[1].at).toBeGreaterThanOrEqual(950);
    const attempts = (await app.api(apiKey, 'GET', `/v1/deliveries/${deliveryId}/attempts`)).body.items;
    expect(attempts.map((a: any) => [a.statusCode, a.outcome])).toEqual([[503, 'retry'], [429, 'retry'], [200, 'succeeded']]);
    await receiver.close();
  });

  it('moves terminal failures and exhausted retries to the DLQ', async () => {
    const receiver = await startReceiver((r) => (r.url === '/bad' ? { status: 400, body: 'nope' } : { status: 500 }));
    const { apiKey, projectId } = await app.project('pro');
    const terminal = await createFixtureWebhook(app.rt, projectId, `${receiver.url}/bad`);
    const exhausted = await createFixtureWebhook(app.rt, projectId, `${receiver.url}/down`, { retryPolicy: { maxAttempts: 2, initialDelayMs: 100 } });
    const a = await enqueueFixtureEvent(app.rt, terminal);
    const b = await enqueueFixtureEvent(app.rt, exhausted);
    const da = await settled(apiKey, a.deliveryId);
    const db = await settled(apiKey, b.deliveryId);
    expect(da).toMatchObject({ status: 'failed', attempts: 1, lastAttempt: { statusCode: 400 } });
    expect(db).toMatchObject({ status: 'failed', attempts: 2, lastAttempt: { statusCode: 500 } });
    const attempt = (await app.api(apiKey, 'GET', `/v1/deliveries/${a.deliveryId}/attempts`)).body.items[0];
    expect(attempt.responseSnippet).toBe('nope');
    const dlq = await app.api(apiKey, 'GET', '/v1/dlq');
    expect(dlq.body.items.map((e: any) => e.deliveryId).sort()).toEqual([a.deliveryId, b.deliveryId].sort());
    await receiver.close();
  });

  it('records timeouts, resets, garbage and redirects as failed attempts', async () => {
    const receiver = await startReceiver((r) =>
      r.url === '/slow' ? { hang: true } : r.url === '/reset' ? { reset: true } : r.url === '/garbage' ? { garbage: true } : { status: 302, headers: { location: 'http://example.com/' } },
    );
    const { apiKey, projectId } = await app.project('pro');
    const policy = { maxAttempts: 1 };
    const cases = await Promise.all(
      ['/slow', '/reset', '/garbage', '/redirect'].map(async (path) => {
        const wh = await createFixtureWebhook(app.rt, projectId, receiver.url + path, { retryPolicy: policy, timeoutMs: 1000 });
        return { path, ...(await enqueueFixtureEvent(app.rt, wh)) };
      }),
    );
    for (const c of cases) {
      const d = await settled(apiKey, c.deliveryId);
      expect(d.status, c.path).toBe('failed');
      if (c.path === '/slow') expect(d.lastAttempt.error).toMatch(/timed out/);
      if (c.path === '/redirect') expect(d.lastAttempt).toMatchObject({ statusCode: 302, error: expect.stringMatching(/redirect/) });
      if (c.path === '/reset' || c.path === '/garbage') expect(d.lastAttempt.error).toBeTruthy();
    }
    expect(receiver.received.filter((r) => r.url === '/redirect')).toHaveLength(1);
    await receiver.close();
  });

  it('records answers PostgreSQL cannot store as text (NUL bytes) without losing the batch', async () => {
    const receiver = await startReceiver((r) => (r.url === '/nul' ? { status: 500, body: 'bad\u0000bytes' } : { status: 200 }));
    const { apiKey, projectId } = await app.project('pro');
    const nul = await createFixtureWebhook(app.rt, projectId, receiver.url + '/nul', { retryPolicy: { maxAttempts: 1 } });
    const ok = await createFixtureWebhook(app.rt, projectId, receiver.url + '/ok');
    const [a, b] = await Promise.all([enqueueFixtureEvent(app.rt, nul), enqueueFixtureEvent(app.rt, ok)]);
    expect((await settled(apiKey, a.deliveryId)).status).toBe('failed');
    expect((await settled(apiKey, b.deliveryId)).status).toBe('succeeded');
    const attempts = await app.api(apiKey, 'GET', `/v1/deliveries/${a.deliveryId}/attempts`);
    expect(attempts.body.items).toHaveLength(1);
    expect(attempts.body.items[0]).toMatchObject({ statusCode: 500, responseSnippet: 'bad\uFFFDbytes' });
    await receiver.close();
  });

  it('signs with both secrets during a signing-secret rotation', async () => {
    const receiver = await startReceiver();
    const { apiKey, projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url);
    const { newWebhookSecret } = await import('./support/delivery-fixture.ts');
    const { encryptSecret } = await import('../src/encryption.ts');
    const second = newWebhookSecret();
    await app.rt.db.prisma.webhookSecret.updateMany({ where: { webhookId: wh.id, kind: 'signing' }, data: { expiresAt: new Date(Date.now() + 60_000) } });
    await app.rt.db.prisma.webhookSecret.create({ data: { id: `whs_${Date.now()}`, projectId, webhookId: wh.id, kind: 'signing', version: 2, secretEnc: encryptSecret(second) } });
    const { deliveryId } = await enqueueFixtureEvent(app.rt, wh);
    await settled(apiKey, deliveryId);
    const r = receiver.received[0];
    expect(String(r.headers['webhook-signature']).split(' ')).toHaveLength(2);
    for (const secret of [wh.signingSecret, second]) expect(() => new Webhook(secret).verify(r.body.toString(), r.headers as any)).not.toThrow();
    await receiver.close();
  });

  it('applies a JSONata transform and keeps the transformed dispatch snapshot', async () => {
    const receiver = await startReceiver();
    const { apiKey, projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, { transform: { kind: 'jsonata', expression: '{"name": user.first & " " & user.last}' } });
    const { deliveryId } = await enqueueFixtureEvent(app.rt, wh, JSON.stringify({ user: { first: 'Ada', last: 'Lovelace' } }));
    await settled(apiKey, deliveryId);
    expect(JSON.parse(receiver.received[0].body.toString())).toEqual({ name: 'Ada Lovelace' });
    const row = await app.rt.db.prisma.delivery.findUnique({ where: { id: deliveryId } });
    expect(Buffer.from(row!.dispatchBody!).toString()).toBe(receiver.received[0].body.toString());
    await receiver.close();
  });

  it('parallel: an event arriving while a slow attempt is in flight goes out while it is still in flight (one runner, whose drain waits on that attempt)', async () => {
    // The first attempt's answer is held until the test opens the gate.
    const held = gate();
    const receiver = await startReceiver((r) => (JSON.parse(r.body.toString()).n === 0 ? { status: 200, until: held.opened } : { status: 200 }));
    const { projectId } = await app.project('pro');
    const wh = await createFixtureWebhook(app.rt, projectId, receiver.url, { maxInFlight: 5 });
    await enqueueFixtureEvent(app.rt, wh, JSON.stringify({ n: 0 }));
    // The slow attempt is in flight (a drain of this webhook waits for it).
    await waitFor(async () => (receiver.received.length === 1 ? true : null), 10_000, 20);
    await enqueueFixtureEvent(app.rt, wh, JSON.stringify({ n: 1 }));
    await waitFor(async () => (receiver.received.length === 2 ? true : null), 10_000, 20).catch(() => {});
    // The second arrived while the first was still unanswered.
    expect(receiver.received.map((r) => JSON.parse(r.body.toString()).n)).toEqual([0, 1]);
    held.open();
        await receiver.close();
  });
});
