/**
 * Provider packs beyond the signature checks: the tier gate, the configuration routes (the
 * secret never shown, sealed at rest), Slack's documented example, routing by eventType, the
 * lookup version, and inbound deduplication (within and after the window, across two API
 * processes on one database).
 */
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { providerSigned } from '../src/providers/index.ts';
import { encryptSecret } from '../src/encryption.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
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

const stripe = new Stripe('sk_test_unused');
const SECRET = 'whsec_test_secret';
function stripeRequest(event: Record<string, unknown>) {
  const body = JSON.stringify({ object: 'event', ...event });
  return { body, headers: { 'stripe-signature': stripe.webhooks.generateTestHeaderString({ payload: body, secret: SECRET }) } };
}
async function stripeWebhook(extra: Record<string, unknown> = {}) {
  const wh = await createWebhook(app, apiKey, extra);
  expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'stripe', secret: SECRET })).status).toBe(200);
  return wh;
}

describe('configuration', () => {
  it('is 403 tier_required on Free, after 404 for an unknown webhook', async () => {
    const free = await app.project('free');
    const wh = await createWebhook(app, free.apiKey);
    const res = await app.api(free.apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'stripe', secret: SECRET });
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ code: 'tier_required', feature: 'provider_packs', requiredTier: 'starter' });
    expect((await app.api(free.apiKey, 'PUT', '/v1/webhooks/wh_unknown/provider', { provider: 'stripe', secret: SECRET })).status).toBe(404);
    const starter = await app.project('starter');
    const wh2 = await createWebhook(app, starter.apiKey);
    expect((await app.api(starter.apiKey, 'PUT', `/v1/webhooks/${wh2.id}/provider`, { provider: 'stripe', secret: SECRET })).status).toBe(200);
  });

  it('never shows the secret, keeps it sealed, and validates with 400 and param', async () => {
    const wh = await createWebhook(app, apiKey);
    expect((await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/provider`)).body).toEqual({ webhookId: wh.id, provider: null, toleranceSeconds: null });
    const set = await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'slack', secret: 'slack-signing-secret', toleranceSeconds: 120 });
    expect(set.body).toEqual({ webhookId: wh.id, provider: 'slack', toleranceSeconds: 120 });
    const got = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/provider`);
    expect(got.body).toEqual({ webhookId: wh.id, provider: 'slack', toleranceSeconds: 120 });
    expect(JSON.stringify(got.body)).not.toContain('slack-signing-secret');
    const { rows } = await app.rt.db.pool.query('SELECT provider_pack::text AS pack FROM webhooks WHERE id = $1', [wh.id]);
    expect(rows[0].pack).not.toContain('slack-signing-secret');
    // Left out, the secret is kept while the provider stays the same.
    expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'slack' })).status).toBe(200);
    for (const [body, param] of [
      [{}, 'provider'],
      [{ provider: 'nope', secret: 'x' }, 'provider'],
      [{ provider: 'github' }, 'secret'],
      [{ provider: 'github', secret: '' }, 'secret'],
      [{ provider: 'github', secret: 'x', toleranceSeconds: 10 }, 'toleranceSeconds'],
      [{ provider: 'stripe', secret: 'x', toleranceSeconds: 0 }, 'toleranceSeconds'],
      [{ provider: null, secret: 'x' }, 'secret'],
    ] as const) {
      const res = await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param });
    }
  });

  it("raises the webhook's lookup version when the provider pack or the dedupe window changes", async () => {
    const wh = await createWebhook(app, apiKey);
    const version = async () => (await app.rt.db.pool.query('SELECT config_version FROM webhooks WHERE id = $1', [wh.id])).rows[0].config_version as number;
    const v0 = await version();
    await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'stripe', secret: SECRET });
    const v1 = await version();
    expect(v1).toBeGreaterThan(v0);
    await app.api(apiKey, 'PATCH', `/v1/webhooks/${wh.id}`, { dedupeWindowSeconds: 60 });
    expect(await version()).toBeGreaterThan(v1);
    // A lookup this process keeps is not trusted after the change: a provider-signed request is accepted at once.
    const r = stripeRequest({ id: 'evt_v', type: 'x' });
    expect((await ingest(app, wh.publicId, r)).status).toBe(202);
  });

  it('shows and validates dedupeWindowSeconds on the webhook', async () => {
    const wh = await createWebhook(app, apiKey, { dedupeWindowSeconds: 3600 });
    expect(wh.dedupeWindowSeconds).toBe(3600);
    expect((await createWebhook(app, apiKey)).dedupeWindowSeconds).toBe(0);
    const bad = await app.api(apiKey, 'PATCH', `/v1/webhooks/${wh.id}`, { dedupeWindowSeconds: 604_801 });
    expect(bad.status).toBe(400);
    expect(bad.body.error.param).toBe('dedupeWindowSeconds');
  });
});

describe('verification', () => {
  it("matches Slack's documented example (api.slack.com/authentication/verifying-requests-from-slack)", () => {
    const body = Buffer.from(
      'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c',
    );
    const req = {
      method: 'POST',
      url: 'http://localhost/i/hook',
      headers: { 'x-slack-request-timestamp': '1531420618', 'x-slack-signature': 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503' },
      body,
    };
    const pack = { provider: 'slack', secretEnc: encryptSecret('8f742231b10e8888abcd99yyyzzz85a5'), toleranceSeconds: null };
    expect(providerSigned(pack, req, 1531420618_000)).toBe(true);
    expect(providerSigned(pack, req, (1531420618 + 301) * 1000)).toBe(false);
    expect(providerSigned(pack, { ...req, body: Buffer.concat([body, Buffer.from('x')]) }, 1531420618_000)).toBe(false);
  });
});

describe('routing by eventType', () => {
  it('sends invoice.paid one way and customer.created the other', async () => {
    const wh = await stripeWebhook();
    const dest = await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/destinations`, { name: 'billing', type: 'webhook', config: { url: 'https://example.com/billing' } });
    expect(dest.status, JSON.stringify(dest.body)).toBe(201);
    const rules = [{ name: 'paid', priority: 1, match: { provider: 'stripe', eventType: 'invoice.paid' }, destinationId: dest.body.id }];
    expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/routing`, { rules })).status).toBe(200);
    const paid = await ingest(app, wh.publicId, stripeRequest({ id: 'evt_paid', type: 'invoice.paid' }));
    const created = await ingest(app, wh.publicId, stripeRequest({ id: 'evt_created', type: 'customer.created' }));
    expect([paid.status, created.status]).toEqual([202, 202]);
    const destinationOf = async (deliveryId: string) => (await app.api(apiKey, 'GET', `/v1/deliveries/${deliveryId}`)).body.destination.config.url;
    expect(await destinationOf(paid.body.deliveryId)).toBe('https://example.com/billing');
    expect(await destinationOf(created.body.deliveryId)).toBe('https://example.com/hook');
  });
});

describe('inbound deduplication', () => {
  const count = async (webhookId: string) => Number((await app.rt.db.pool.query('SELECT count(*) FROM events WHERE webhook_id = $1', [webhookId])).rows[0].count);

  it('answers a retry within the window with the original eventId, stored nowhere', async () => {
    const wh = await stripeWebhook({ dedupeWindowSeconds: 3600 });
    const first = await ingest(app, wh.publicId, stripeRequest({ id: 'evt_dup', type: 'invoice.paid' }));
    expect(first.body.status).toBe('queued');
    // Stripe retries with a new signature and timestamp, the same event id.
    const again = await ingest(app, wh.publicId, stripeRequest({ id: 'evt_dup', type: 'invoice.paid' }));
    expect(again.status).toBe(202);
    expect(again.body).toEqual({ eventId: first.body.eventId, deliveryId: first.body.deliveryId, status: 'duplicate' });
    expect(await count(wh.id)).toBe(1);
    expect((await ingest(app, wh.publicId, stripeRequest({ id: 'evt_other', type: 'invoice.paid' }))).body.status).toBe('queued');
    expect(await count(wh.id)).toBe(2);
  });

  it('dedupes by the Standard Webhooks webhook-id without a provider pack, and not at all with the window off', async () => {
    const wh = await createWebhook(app, apiKey, { dedupeWindowSeconds: 60 });
    const headers = { 'x-webhook-secret': wh.ingestSecret, 'webhook-id': 'msg_1' };
    const a = await ingest(app, wh.publicId, { headers });
    expect((await ingest(app, wh.publicId, { headers })).body).toMatchObject({ eventId: a.body.eventId, status: 'duplicate' });
    const off = await stripeWebhook();
    const r = stripeRequest({ id: 'evt_same', type: 'x' });
    expect((await ingest(app, off.publicId, r)).body.status).toBe('queued');
    expect((await ingest(app, off.publicId, r)).body.status).toBe('queued');
  });

  it('accepts the delivery id again after the window', async () => {
    const wh = await stripeWebhook({ dedupeWindowSeconds: 1 });
    const first = await ingest(app, wh.publicId, stripeRequest({ id: 'evt_late', type: 'x' }));
    expect((await ingest(app, wh.publicId, stripeRequest({ id: 'evt_late', type: 'x' }))).body.status).toBe('duplicate');
    const later = await waitFor(async () => {
      const res = await ingest(app, wh.publicId, stripeRequest({ id: 'evt_late', type: 'x' }));
      return res.body.status === 'queued' ? res : null;
    }, 5000, 200);
    expect(later!.body.eventId).not.toBe(first.body.eventId);
    expect(await count(wh.id)).toBe(2);
  });

  it('is exact across two API processes on one database', async () => {
    const other = await startTestApp({ databaseUrl: app.databaseUrl });
    try {
      const wh = await stripeWebhook({ dedupeWindowSeconds: 3600 });
      for (let i = 0; i < 5; i++) {
        const results = await Promise.all(
          [app, other, app, other].map((a) => fetch(`${a.url}/i/${wh.publicId}`, { method: 'POST', headers: { 'content-type': 'application/json', ...stripeRequest({ id: `evt_race_${i}`, type: 'x' }).headers }, body: stripeRequest({ id: `evt_race_${i}`, type: 'x' }).body }).then((r) => r.json() as Promise<{ eventId: string; status: string }>)),
        );
        // Signatures differ per call only by timestamp; each request is signed over its own body.
        expect(results.filter((r) => r.status === 'queued')).toHaveLength(1);
        expect(new Set(results.map((r) => r.eventId)).size).toBe(1);
      }
      expect(await count(wh.id)).toBe(5);
    } finally {
      await other.stop();
    }
  });
});
