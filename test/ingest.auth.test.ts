import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './support/app.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

let app: TestApp;
let apiKey: string;
let wh: Awaited<ReturnType<typeof createWebhook>>;
beforeAll(async () => {
  app = await startTestApp();
  ({ apiKey } = await ingestingProject(app));
  wh = await createWebhook(app, apiKey);
});
afterAll(async () => {
  await app?.stop();
});

function signed(secret: string, body: string, at = new Date(), id = `msg_${Math.random().toString(36).slice(2)}`) {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(id, at, body),
  };
}

function expect401(res: { status: number; body: any }) {
  expect(res.status).toBe(401);
  expect(res.body.error.code).toBe('unauthorized');
}

describe('ingest producer authentication', () => {
  it('accepts the secret in x-webhook-secret', async () => {
    const res = await ingest(app, wh.publicId, { headers: { 'x-webhook-secret': wh.ingestSecret } });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ eventId: expect.stringMatching(/^evt_/), deliveryId: expect.stringMatching(/^del_/), status: 'queued' });
  });

  it('accepts the secret as a Bearer token', async () => {
    expect((await ingest(app, wh.publicId, { headers: { authorization: `Bearer ${wh.ingestSecret}` } })).status).toBe(202);
  });

  it('accepts a Standard Webhooks signature made with the ingest secret, over the exact body', async () => {
    const body = '{"signed":true}';
    expect((await ingest(app, wh.publicId, { body, headers: signed(wh.ingestSecret, body) })).status).toBe(202);
    // Several signatures, space-separated: one valid one is enough.
    const h = signed(wh.ingestSecret, body);
    h['webhook-signature'] = `v1,${Buffer.alloc(32).toString('base64')} ${h['webhook-signature']}`;
    expect((await ingest(app, wh.publicId, { body, headers: h })).status).toBe(202);
  });

  it('refuses everything else with 401', async () => {
    const body = '{"signed":true}';
    expect401(await ingest(app, wh.publicId));
    expect401(await ingest(app, wh.publicId, { headers: { 'x-webhook-secret': 'whsec_wrong' } }));
    expect401(await ingest(app, wh.publicId, { headers: { 'x-webhook-secret': wh.signingSecret } }));
    expect401(await ingest(app, wh.publicId, { headers: { authorization: `Bearer ${wh.ingestSecret}x` } }));
    expect401(await ingest(app, wh.publicId, { headers: { authorization: `Basic ${wh.ingestSecret}` } }));
    // Signed with the wrong secret, over another body, or too old.
    expect401(await ingest(app, wh.publicId, { body, headers: signed(wh.signingSecret, body) }));
    expect401(await ingest(app, wh.publicId, { body: '{"signed":false}', headers: signed(wh.ingestSecret, body) }));
    expect401(await ingest(app, wh.publicId, { body, headers: signed(wh.ingestSecret, body, new Date(Date.now() - 10 * 60_000)) }));
    const partial = signed(wh.ingestSecret, body) as Record<string, string>;
    delete partial['webhook-id'];
    expect401(await ingest(app, wh.publicId, { body, headers: partial }));
    // Another webhook's secret.
    const other = await createWebhook(app, apiKey);
    expect401(await ingest(app, wh.publicId, { headers: { 'x-webhook-secret': other.ingestSecret } }));
  });

  it('accepts both ingest secret versions during a rotation’s grace period, then only the new one', async () => {
    const hook = await createWebhook(app, apiKey);
    const rotated = (await app.api(apiKey, 'POST', `/v1/webhooks/${hook.id}/rotate-ingest-secret`, { graceSeconds: 60 })).body.ingestSecret;
    const body = '{"n":1}';
    for (const secret of [hook.ingestSecret, rotated]) {
      expect((await ingest(app, hook.publicId, { headers: { 'x-webhook-secret': secret } })).status).toBe(202);
      expect((await ingest(app, hook.publicId, { headers: { authorization: `Bearer ${secret}` } })).status).toBe(202);
      expect((await ingest(app, hook.publicId, { body, headers: signed(secret, body) })).status).toBe(202);
    }
    await app.rt.db.pool.query(`UPDATE webhook_secrets SET expires_at = now() - interval '1 second' WHERE webhook_id = $1 AND version = 1`, [hook.id]);
    expect401(await ingest(app, hook.publicId, { headers: { 'x-webhook-secret': hook.ingestSecret } }));
    expect401(await ingest(app, hook.publicId, { body, headers: signed(hook.ingestSecret, body) }));
    expect((await ingest(app, hook.publicId, { body, headers: signed(rotated, body) })).status).toBe(202);
  });

  it('does not store the shown secret with the event', async () => {
    const res = await ingest(app, wh.publicId, { headers: { authorization: `Bearer ${wh.ingestSecret}`, 'x-trace': 't1' } });
    const { rows } = await app.rt.db.pool.query('SELECT headers FROM events WHERE id = $1', [res.body.eventId]);
    expect(rows[0].headers['x-trace']).toBe('t1');
    expect(JSON.stringify(rows[0].headers)).not.toContain(wh.ingestSecret);
  });
});
