import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { startReceiver } from './support/receiver.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: true });
});
afterAll(async () => {
  await app?.stop();
});

describe('webhook writes are audited; resume runs waiting deliveries', () => {
  it('records every management write with the acting key, never a secret', async () => {
    const receiver = await startReceiver();
    const { apiKey } = await app.project('business');
    const created = await app.api(apiKey, 'POST', '/v1/webhooks', { name: 'orders', url: `${receiver.url}/in` });
    expect(created.status).toBe(201);
    const id = created.body.id;
    expect((await app.api(apiKey, 'POST', `/v1/webhooks/${id}/pause`)).status).toBe(200);
    expect((await app.api(apiKey, 'POST', `/v1/webhooks/${id}/rotate-signing-secret`, { graceSeconds: 60 })).status).toBe(200);
    const logs = await app.api(apiKey, 'GET', '/v1/project/audit-logs?limit=100');
    expect(logs.status).toBe(200);
    const actions = logs.body.items.map((e: any) => e.action);
    expect(actions).toEqual(expect.arrayContaining(['webhook.created', 'webhook.paused', 'webhook.signing_secret_rotated']));
    const entry = logs.body.items.find((e: any) => e.action === 'webhook.created');
    expect(entry).toMatchObject({ targetType: 'webhook', targetId: id });
    expect(JSON.stringify(logs.body)).not.toContain(created.body.signingSecret);
    expect(JSON.stringify(logs.body)).not.toContain(created.body.ingestSecret);
    await receiver.close();
  });

  it('deliveries that waited while the webhook was paused run once it is resumed', async () => {
    let hold = true;
    const receiver = await startReceiver(() => (hold ? { status: 503 } : { status: 200 }));
    const { apiKey } = await app.project('enterprise');
    const created = await app.api(apiKey, 'POST', '/v1/webhooks', { name: 'w', url: receiver.url, retryPolicy: { initialDelayMs: 60_000, maxAttempts: 5 } });
    const wh = created.body;
    const ingest = await fetch(`${app.url}/i/${wh.publicId}`, { method: 'POST', headers: { authorization: `Bearer ${wh.ingestSecret}`, 'content-type': 'application/json' }, body: '{"a":1}' });
    expect(ingest.status).toBe(202);
    const { deliveryId } = await ingest.json();
    await waitFor(async () => (await app.api(apiKey, 'GET', `/v1/deliveries/${deliveryId}`)).body.status === 'retrying');
    await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/pause`);
    hold = false;
    await app.rt.db.pool.query(`UPDATE deliveries SET next_attempt_at = now() WHERE id = $1`, [deliveryId]);
    expect((await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/resume`)).status).toBe(200);
    await waitFor(async () => (await app.api(apiKey, 'GET', `/v1/deliveries/${deliveryId}`)).body.status === 'succeeded', 10_000);
    expect(receiver.received).toHaveLength(2);
    await receiver.close();
  });
});
