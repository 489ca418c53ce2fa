import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activeSigningSecrets } from '../src/webhook-config/secrets.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

let app: TestApp;
let apiKey: string;
beforeAll(async () => {
  app = await startTestApp();
  ({ apiKey } = await ingestingProject(app));
});
afterAll(async () => {
  await app?.stop();
});

const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;

async function expireGrace(webhookId: string, kind: string) {
  await app.rt.db.pool.query(`UPDATE webhook_secrets SET expires_at = now() - interval '1 second' WHERE webhook_id = $1 AND kind = $2 AND expires_at IS NOT NULL`, [webhookId, kind]);
}

describe('secret rotation', () => {
  it('rotates the ingest secret: new secret shown once, old one accepted during the grace period only', async () => {
    const wh = await createWebhook(app, apiKey);
    const before = Date.now();
    const rotated = await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/rotate-ingest-secret`, { graceSeconds: 3600 });
    expect(rotated.status).toBe(200);
    expect(rotated.body.ingestSecret).toMatch(SECRET);
    expect(rotated.body.ingestSecret).not.toBe(wh.ingestSecret);
    expect(rotated.body).toMatchObject({ webhookId: wh.id, kind: 'ingest', version: 2 });
    expect(rotated.body).not.toHaveProperty('signingSecret');
    const graceEnd = new Date(rotated.body.previousExpiresAt).getTime();
    expect(graceEnd).toBeGreaterThanOrEqual(before + 3600_000 - 1000);
    expect(graceEnd).toBeLessThanOrEqual(Date.now() + 3600_000 + 1000);

    const versions = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/secrets`);
    expect(versions.body.items.filter((v: any) => v.kind === 'ingest')).toEqual([
      { kind: 'ingest', version: 2, createdAt: expect.any(String), expiresAt: null, state: 'current' },
      { kind: 'ingest', version: 1, createdAt: expect.any(String), expiresAt: new Date(graceEnd).toISOString(), state: 'grace' },
    ]);
    expect(JSON.stringify(versions.body)).not.toContain('whsec_');

    expect((await ingest(app, wh.publicId, { headers: { 'x-webhook-secret': rotated.body.ingestSecret } })).status).toBe(202);
    expect((await ingest(app, wh.publicId, { headers: { 'x-webhook-secret': wh.ingestSecret } })).status).toBe(202);

    await expireGrace(wh.id, 'ingest');
    expect((await ingest(app, wh.publicId, { headers: { 'x-webhook-secret': wh.ingestSecret } })).status).toBe(401);
    expect((await ingest(app, wh.publicId, { headers: { 'x-webhook-secret': rotated.body.ingestSecret } })).status).toBe(202);
    const after = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/secrets`);
    expect(after.body.items.find((v: any) => v.kind === 'ingest' && v.version === 1).state).toBe('expired');
  });

  it('rotates the signing secret: deliveries sign with both during the grace period', async () => {
    const wh = await createWebhook(app, apiKey);
    expect(await activeSigningSecrets(app.rt, wh.id)).toEqual([wh.signingSecret]);
    const rotated = await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/rotate-signing-secret`, {});
    expect(rotated.status).toBe(200);
    expect(rotated.body.signingSecret).toMatch(SECRET);
    expect(rotated.body).not.toHaveProperty('ingestSecret');
    expect(rotated.body).toMatchObject({ kind: 'signing', version: 2 });
    // Default grace: one day.
    expect(new Date(rotated.body.previousExpiresAt).getTime() - Date.now()).toBeGreaterThan(86_400_000 - 60_000);

    const active = await activeSigningSecrets(app.rt, wh.id);
    expect(active).toEqual([rotated.body.signingSecret, wh.signingSecret]);
    // Both signatures, space-separated, verify with either secret (Standard Webhooks).
    const id = 'evt_1';
    const ts = new Date();
    const signature = active.map((s) => new Webhook(s).sign(id, ts, '{}')).join(' ');
    const headers = { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(ts.getTime() / 1000)), 'webhook-signature': signature };
    for (const s of [wh.signingSecret, rotated.body.signingSecret]) expect(() => new Webhook(s).verify('{}', headers)).not.toThrow();

    await expireGrace(wh.id, 'signing');
    expect(await activeSigningSecrets(app.rt.db.pool, wh.id)).toEqual([rotated.body.signingSecret]);
    // The ingest secret is untouched by a signing rotation.
    expect((await ingest(app, wh.publicId, { headers: { 'x-webhook-secret': wh.ingestSecret } })).status).toBe(202);
  });

  it('keeps one current version per kind across repeated rotations; graceSeconds 0 ends the old one at once', async () => {
    const wh = await createWebhook(app, apiKey);
    const r1 = await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/rotate-ingest-secret`, { graceSeconds: 0 });
    const r2 = await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/rotate-ingest-secret`, { graceSeconds: 600 });
    expect(r2.body.version).toBe(3);
    const items = (await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/secrets`)).body.items.filter((v: any) => v.kind === 'ingest');
    expect(items.map((v: any) => [v.version, v.state])).toEqual([
      [3, 'current'],
      [2, 'grace'],
      [1, 'expired'],
    ]);
    expect((await ingest(app, wh.publicId, { headers: { 'x-webhook-secret': wh.ingestSecret } })).status).toBe(401);
    expect((await ingest(app, wh.publicId, { headers: { 'x-webhook-secret': r1.body.ingestSecret } })).status).toBe(202);
    expect((await ingest(app, wh.publicId, { headers: { 'x-webhook-secret': r2.body.ingestSecret } })).status).toBe(202);
  });

  it('validates graceSeconds and hides other projects’ webhooks', async () => {
    const wh = await createWebhook(app, apiKey);
    for (const graceSeconds of [-1, 2_592_001]) {
      const res = await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/rotate-signing-secret`, { graceSeconds });
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'graceSeconds' });
    }
    expect((await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/rotate-signing-secret`, { graceSeconds: 'soon' })).status).toBe(400);
    const other = await app.project('free');
    expect((await app.api(other.apiKey, 'POST', `/v1/webhooks/${wh.id}/rotate-ingest-secret`, {})).status).toBe(404);
    expect((await app.api(other.apiKey, 'GET', `/v1/webhooks/${wh.id}/secrets`)).status).toBe(404);
  });
});
