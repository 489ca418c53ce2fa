// Slack's URL verification answered inline, and provider secret rotation with a grace period
// (CONTRACT §10, §12), over real HTTP on a real PostgreSQL.
import { createHmac } from 'node:crypto';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ingestEvents } from '../src/prom.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

let app: TestApp;
let apiKey: string;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  ({ apiKey } = await ingestingProject(app));
});
afterAll(async () => {
  await app?.stop();
});

const SLACK_SECRET = 'slack-signing-secret';
function slackSigned(body: string, secret = SLACK_SECRET) {
  const ts = String(Math.floor(Date.now() / 1000));
  const sig = `v0=${createHmac('sha256', secret).update(`v0:${ts}:${body}`).digest('hex')}`;
  return { 'x-slack-request-timestamp': ts, 'x-slack-signature': sig };
}
const counted = async () => (await ingestEvents.get()).values.reduce((n, v) => n + v.value, 0);

describe("Slack's URL verification", () => {
  it('answers a correctly signed challenge 200 at once; nothing is stored, delivered or counted', async () => {
    const wh = await createWebhook(app, apiKey);
    expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'slack', secret: SLACK_SECRET })).status).toBe(200);
    const body = JSON.stringify({ token: 'Jhj5dZrVaK7ZwHHjRyZWjbDl', challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P', type: 'url_verification' });
    const before = await counted();
    const res = await ingest(app, wh.publicId, { body, headers: slackSigned(body) });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P' });
    expect(await counted()).toBe(before);
    expect(await app.rt.db.prisma.event.count({ where: { webhookId: wh.id } })).toBe(0);
    expect(await app.rt.db.prisma.delivery.count({ where: { webhookId: wh.id } })).toBe(0);

    // A bad signature is 401 as before; so is an unsigned challenge.
    const bad = await ingest(app, wh.publicId, { body, headers: slackSigned(body, 'wrong') });
    expect(bad.status).toBe(401);
    expect((await ingest(app, wh.publicId, { body })).status).toBe(401);
    // A signed event that is not a challenge is ingested as usual.
    const event = JSON.stringify({ type: 'event_callback', event_id: 'Ev1', event: { type: 'message' } });
    const accepted = await ingest(app, wh.publicId, { body: event, headers: slackSigned(event) });
    expect(accepted.status).toBe(202);
  });

  it('is no handshake on a webhook without the slack pack: the body is an event like any other', async () => {
    const wh = await createWebhook(app, apiKey);
    const body = JSON.stringify({ type: 'url_verification', challenge: 'c' });
    const res = await ingest(app, wh.publicId, { body, headers: { 'x-webhook-secret': wh.ingestSecret } });
    expect(res.status).toBe(202);
    expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'stripe', secret: 'whsec_x' })).status).toBe(200);
    expect((await ingest(app, wh.publicId, { body, headers: slackSigned(body) })).status).toBe(401);
  });
});

describe('provider secret rotation', () => {
  const stripe = new Stripe('sk_test_unused');
  const stripeHeaders = (body: string, secret: string) => ({ 'stripe-signature': stripe.webhooks.generateTestHeaderString({ payload: body, secret }) });
  let n = 0;
  const send = (publicId: string, secret: string) => {
    const body = JSON.stringify({ object: 'event', id: `evt_${++n}`, type: 'charge.succeeded' });
    return ingest(app, publicId, { body, headers: stripeHeaders(body, secret) });
  };

  it('keeps the previous secret for graceSeconds (default a day): both verify; versions are listed without the secrets', async () => {
    const wh = await createWebhook(app, apiKey);
    expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'stripe', secret: 'whsec_one' })).status).toBe(200);
    expect((await send(wh.publicId, 'whsec_one')).status).toBe(202);
    expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'stripe', secret: 'whsec_two' })).status).toBe(200);
    expect((await send(wh.publicId, 'whsec_two')).status).toBe(202);
    expect((await send(wh.publicId, 'whsec_one')).status).toBe(202);
    expect((await send(wh.publicId, 'whsec_nope')).status).toBe(401);

    const secrets = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/secrets`);
    const provider = secrets.body.items.filter((s: any) => s.kind === 'provider');
    expect(provider.map((s: any) => [s.version, s.state])).toEqual([
      [2, 'current'],
      [1, 'grace'],
    ]);
    const graceEnds = Date.parse(provider[1].expiresAt) - Date.now();
    expect(graceEnds).toBeGreaterThan(86_300_000);
    expect(graceEnds).toBeLessThanOrEqual(86_400_000);
    expect(JSON.stringify(secrets.body)).not.toMatch(/whsec_one|whsec_two|secretEnc/);

    // graceSeconds 0 drops the previous one at once.
    expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'stripe', secret: 'whsec_three', graceSeconds: 0 })).status).toBe(200);
    expect((await send(wh.publicId, 'whsec_three')).status).toBe(202);
    expect((await send(wh.publicId, 'whsec_two')).status).toBe(401);
    // whsec_one's grace ran on: only the version rotated out with graceSeconds 0 expired.
    expect((await send(wh.publicId, 'whsec_one')).status).toBe(202);
    const states = (await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/secrets`)).body.items.filter((s: any) => s.kind === 'provider').map((s: any) => [s.version, s.state]);
    expect(states).toEqual([
      [3, 'current'],
      [2, 'expired'],
      [1, 'grace'],
    ]);
    // Out of range: 400 with param.
    const bad = await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'stripe', secret: 'whsec_four', graceSeconds: -1 });
    expect(bad.status).toBe(400);
    expect(bad.body.error.param).toBe('graceSeconds');
  });

  it('another provider, or none, drops the old secrets at once', async () => {
    const wh = await createWebhook(app, apiKey);
    await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'stripe', secret: 'whsec_a' });
    await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'stripe', secret: 'whsec_b' });
    expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'slack', secret: SLACK_SECRET })).status).toBe(200);
    expect((await send(wh.publicId, 'whsec_a')).status).toBe(401);
    expect((await send(wh.publicId, 'whsec_b')).status).toBe(401);
    const listed = (await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/secrets`)).body.items.filter((s: any) => s.kind === 'provider');
    expect(listed.map((s: any) => [s.version, s.state])).toEqual([[1, 'current']]);
    expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: null })).status).toBe(200);
    expect((await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/secrets`)).body.items.filter((s: any) => s.kind === 'provider')).toEqual([]);
  });

  it('a pack set before secrets had versions: its secret becomes the previous version on rotation', async () => {
    const wh = await createWebhook(app, apiKey);
    await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'stripe', secret: 'whsec_legacy' });
    await app.rt.db.pool.query(`DELETE FROM webhook_secrets WHERE webhook_id = $1 AND kind = 'provider'`, [wh.id]);
    expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'stripe', secret: 'whsec_new' })).status).toBe(200);
    expect((await send(wh.publicId, 'whsec_legacy')).status).toBe(202);
    expect((await send(wh.publicId, 'whsec_new')).status).toBe(202);
  });
});
