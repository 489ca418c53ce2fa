/**
 * Provider packs, each over real HTTP ingest: a valid request is accepted; a tampered body, a
 * wrong secret, a stale timestamp (where the scheme signs one) and a missing signature are 401.
 * Signatures come from the provider's own npm library where one can make them (stripe,
 * @octokit/webhooks-methods, twilio, standardwebhooks), else from the provider's documented
 * algorithm, written out here independently of src/providers.
 */
import { createHash, createHmac, generateKeyPairSync, sign as cryptoSign, type KeyObject } from 'node:crypto';
import { sign as githubSign } from '@octokit/webhooks-methods';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import Stripe from 'stripe';
import twilio from 'twilio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROVIDERS } from '../src/providers/index.ts';
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

const stripe = new Stripe('sk_test_unused');
const hmac = (alg: string, key: string | Buffer, data: string) => createHmac(alg, key).update(data).digest();
const nowSec = () => Math.floor(Date.now() / 1000);

/** What a signer gets: the body, the secret (or private key), when it signs, and the URL the provider calls. */
interface SignInput {
  body: string;
  secret: string;
  /** Unix seconds. */
  at: number;
  url: string;
  privateKey?: KeyObject;
}
/** A request: headers, and optionally another body or path (query) than the one given. */
interface Signed {
  headers: Record<string, string>;
  body?: string;
  path?: string;
  contentType?: string;
}

interface Case {
  /** The secret to configure, and another one that must not verify. */
  secret: () => { secret: string; wrong: string; privateKey?: KeyObject; wrongKey?: KeyObject };
  body: (at: number) => string;
  sign: (input: SignInput) => Signed | Promise<Signed>;
  contentType?: string;
}

const json = (o: unknown) => JSON.stringify(o);
const plain = () => ({ secret: 'provider-secret-1', wrong: 'provider-secret-2' });

function ecdsaPair() {
  const a = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const b = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  // SendGrid shows the verification key as base64 of the DER SubjectPublicKeyInfo.
  return { secret: a.publicKey.export({ format: 'der', type: 'spki' }).toString('base64'), wrong: '', privateKey: a.privateKey, wrongKey: b.privateKey };
}
function ed25519Pair() {
  const a = generateKeyPairSync('ed25519');
  const b = generateKeyPairSync('ed25519');
  // Discord shows the public key as hex of the raw 32 bytes.
  return { secret: a.publicKey.export({ format: 'der', type: 'spki' }).subarray(-32).toString('hex'), wrong: '', privateKey: a.privateKey, wrongKey: b.privateKey };
}
const standard = (): Case => ({
  secret: () => ({ secret: `whsec_${Buffer.alloc(32, 7).toString('base64')}`, wrong: `whsec_${Buffer.alloc(32, 8).toString('base64')}` }),
  body: () => json({ type: 'user.created', data: { id: 'u1' } }),
  sign: ({ body, secret, at }) => {
    const id = 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W';
    return { headers: { 'svix-id': id, 'svix-timestamp': String(at), 'svix-signature': new StandardWebhook(secret).sign(id, new Date(at * 1000), body) } };
  },
});

const CASES: Record<string, Case> = {
  stripe: {
    secret: () => ({ secret: 'whsec_test_secret', wrong: 'whsec_other_secret' }),
    body: () => json({ id: 'evt_test_webhook', object: 'event', type: 'invoice.paid' }),
    sign: ({ body, secret, at }) => ({ headers: { 'stripe-signature': stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp: at }) } }),
  },
  github: {
    secret: plain,
    body: () => json({ action: 'opened', number: 1 }),
    sign: async ({ body, secret }) => ({ headers: { 'x-hub-signature-256': await githubSign(secret, body), 'x-github-event': 'pull_request', 'x-github-delivery': '72d3162e-cc78-11e3-81ab-4c9367dc0958' } }),
  },
  gitlab: {
    secret: plain,
    body: () => json({ object_kind: 'push' }),
    // A token, not a signature: tampering with the body cannot be detected, so that case is skipped below.
    sign: ({ secret }) => ({ headers: { 'x-gitlab-token': secret, 'x-gitlab-event': 'Push Hook', 'x-gitlab-event-uuid': 'b4f8b7d4' } }),
  },
  shopify: {
    secret: plain,
    body: () => json({ id: 820982911946154500, email: 'jon@example.com' }),
    sign: ({ body, secret }) => ({ headers: { 'x-shopify-hmac-sha256': hmac('sha256', secret, body).toString('base64'), 'x-shopify-topic': 'orders/create', 'x-shopify-webhook-id': 'b54557e4' } }),
  },
  slack: {
    secret: () => ({ secret: '8f742231b10e8888abcd99yyyzzz85a5', wrong: '8f742231b10e8888abcd99yyyzzz85a6' }),
    body: () => json({ type: 'event_callback', event_id: 'Ev123', event: { type: 'app_mention' } }),
    sign: ({ body, secret, at }) => ({ headers: { 'x-slack-request-timestamp': String(at), 'x-slack-signature': `v0=${hmac('sha256', secret, `v0:${at}:${body}`).toString('hex')}` } }),
  },
  twilio: {
    secret: () => ({ secret: '12345', wrong: '12346' }),
    contentType: 'application/x-www-form-urlencoded',
    body: () => 'CallSid=CA1234567890ABCDE&Caller=%2B14158675310&Digits=1234&From=%2B14158675310&To=%2B18005551212',
    sign: ({ body, secret, url }) => {
      const params = Object.fromEntries(new URLSearchParams(body));
      return { headers: { 'x-twilio-signature': twilio.getExpectedTwilioSignature(secret, `${url}?foo=1`, params) }, path: '?foo=1' };
    },
  },
  paddle: {
    secret: () => ({ secret: 'pdl_ntfset_01gkpjp8bkm3tm53kdgkx6sms7_6h3qd3uFSi9YCD3OLYAShQI90XTI5vEI', wrong: 'pdl_ntfset_other' }),
    body: () => json({ event_id: 'evt_01h', event_type: 'transaction.completed' }),
    // Two h1 signatures, as while the secret rotates: one valid one is enough.
    sign: ({ body, secret, at }) => ({ headers: { 'paddle-signature': `ts=${at};h1=${'0'.repeat(64)};h1=${hmac('sha256', secret, `${at}:${body}`).toString('hex')}` } }),
  },
  linear: {
    secret: plain,
    body: (at) => json({ action: 'create', type: 'Issue', webhookTimestamp: at * 1000 }),
    sign: ({ body, secret }) => ({ headers: { 'linear-signature': hmac('sha256', secret, body).toString('hex'), 'linear-delivery': '234d1a4e' } }),
  },
  square: {
    secret: plain,
    body: () => json({ type: 'payment.created', event_id: '6a8f5f28' }),
    sign: ({ body, secret, url }) => ({ headers: { 'x-square-hmacsha256-signature': hmac('sha256', secret, url + body).toString('base64') } }),
  },
  zendesk: {
    secret: plain,
    body: () => json({ type: 'zen:event-type:ticket.created' }),
    sign: ({ body, secret, at }) => {
      const ts = new Date(at * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
      return { headers: { 'x-zendesk-webhook-signature-timestamp': ts, 'x-zendesk-webhook-signature': hmac('sha256', secret, ts + body).toString('base64') } };
    },
  },
  intercom: {
    secret: plain,
    body: () => json({ type: 'notification_event', topic: 'conversation.user.created', id: 'notif_1' }),
    sign: ({ body, secret }) => ({ headers: { 'x-hub-signature': `sha1=${hmac('sha1', secret, body).toString('hex')}` } }),
  },
  hubspot: {
    secret: plain,
    body: () => json([{ eventId: 100, subscriptionType: 'contact.creation' }]),
    sign: ({ body, secret, at, url }) => {
      const ms = String(at * 1000);
      return { headers: { 'x-hubspot-request-timestamp': ms, 'x-hubspot-signature-v3': hmac('sha256', secret, `POST${url}${body}${ms}`).toString('base64') } };
    },
  },
  typeform: {
    secret: plain,
    body: () => json({ event_id: '01H', event_type: 'form_response' }),
    sign: ({ body, secret }) => ({ headers: { 'typeform-signature': `sha256=${hmac('sha256', secret, body).toString('base64')}` } }),
  },
  mailgun: {
    secret: plain,
    body: () => '',
    // The signature travels in the body.
    sign: ({ secret, at }) => {
      const token = 'a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0';
      const signature = { timestamp: String(at), token, signature: hmac('sha256', secret, `${at}${token}`).toString('hex') };
      return { headers: {}, body: json({ signature, 'event-data': { event: 'delivered', id: 'CPgfbmQMTCKtHW6uIWtuVe' } }) };
    },
  },
  sendgrid: {
    secret: ecdsaPair,
    body: () => json([{ email: 'a@example.com', event: 'processed', sg_event_id: 'sg1' }]),
    sign: ({ body, at, privateKey }) => ({
      headers: {
        'x-twilio-email-event-webhook-timestamp': String(at),
        'x-twilio-email-event-webhook-signature': cryptoSign('sha256', Buffer.from(`${at}${body}`), privateKey!).toString('base64'),
      },
    }),
  },
  discord: {
    secret: ed25519Pair,
    body: () => json({ id: '123', type: 1 }),
    sign: ({ body, at, privateKey }) => ({
      headers: { 'x-signature-timestamp': String(at), 'x-signature-ed25519': cryptoSign(null, Buffer.from(`${at}${body}`), privateKey!).toString('hex') },
    }),
  },
  vercel: {
    secret: plain,
    body: () => json({ id: 'evt_v', type: 'deployment.created' }),
    sign: ({ body, secret }) => ({ headers: { 'x-vercel-signature': hmac('sha1', secret, body).toString('hex') } }),
  },
  calendly: {
    secret: plain,
    body: () => json({ event: 'invitee.created', payload: { uri: 'https://api.calendly.com/x' } }),
    sign: ({ body, secret, at }) => ({ headers: { 'calendly-webhook-signature': `t=${at},v1=${hmac('sha256', secret, `${at}.${body}`).toString('hex')}` } }),
  },
  jira: {
    secret: plain,
    body: () => json({ webhookEvent: 'jira:issue_created' }),
    sign: ({ body, secret }) => ({ headers: { 'x-hub-signature': `sha256=${hmac('sha256', secret, body).toString('hex')}`, 'x-atlassian-webhook-identifier': '1234' } }),
  },
  svix: standard(),
  clerk: standard(),
  resend: standard(),
};

async function send(publicId: string, c: Case, s: Signed, body: string) {
  return ingest(app, publicId, { body: s.body ?? body, headers: { 'content-type': s.contentType ?? c.contentType ?? 'application/json', ...s.headers }, path: s.path });
}

it('has a case for every provider, and GET /v1/providers lists them all', async () => {
  expect(Object.keys(CASES).sort()).toEqual(PROVIDERS.map((p) => p.id).sort());
  const res = await app.api(apiKey, 'GET', '/v1/providers');
  expect(res.status).toBe(200);
  expect(res.body.items.map((p: { id: string }) => p.id).sort()).toEqual(Object.keys(CASES).sort());
  expect(res.body.items.find((p: { id: string }) => p.id === 'stripe')).toMatchObject({ name: 'Stripe', header: 'Stripe-Signature', toleranceSeconds: 300 });
});

describe.each(PROVIDERS.map((p) => [p.id, p] as const))('%s', (id, provider) => {
  const c = CASES[id]!;
  let wh: Awaited<ReturnType<typeof createWebhook>>;
  let keys: ReturnType<Case['secret']>;
  beforeAll(async () => {
    wh = await createWebhook(app, apiKey, { name: id });
    keys = c.secret();
    const res = await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: id, secret: keys.secret });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ webhookId: wh.id, provider: id, toleranceSeconds: provider.toleranceSeconds });
  });
  const signed = (at = nowSec(), secret = keys.secret, privateKey = keys.privateKey, body = c.body(at)) =>
    Promise.resolve(c.sign({ body, secret, at, url: wh.ingestUrl, privateKey })).then((s) => ({ s, body }));

  it('accepts a valid request', async () => {
    const { s, body } = await signed();
    const res = await send(wh.publicId, c, s, body);
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(res.body.status).toBe('queued');
  });

  it('refuses a tampered body, a wrong secret and a missing signature with 401', async () => {
    if (id !== 'gitlab') {
      const { s, body } = await signed();
      // Mailgun signs its timestamp and token only (the event data is not signed): tamper with the token.
      const tampered = s.body !== undefined ? { ...s, body: s.body.replace('a8ce', 'b8ce') } : s;
      const res = await send(wh.publicId, c, tampered, s.body !== undefined ? body : body.replace(/.$/, ' $&'));
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('unauthorized');
    }
    const wrong = await signed(nowSec(), keys.wrong || keys.secret, keys.wrongKey);
    expect((await send(wh.publicId, c, wrong.s, wrong.body)).status).toBe(401);
    const { body } = await signed();
    expect((await send(wh.publicId, c, { headers: {} }, body || '{}')).status).toBe(401);
  });

  it.runIf(provider.toleranceSeconds !== null)("refuses a timestamp older than the provider's tolerance with 401", async () => {
    const at = nowSec() - provider.toleranceSeconds! - 30;
    const { s, body } = await signed(at);
    expect((await send(wh.publicId, c, s, body)).status).toBe(401);
  });
});

describe('the provider pack beside the other schemes', () => {
  it('keeps the ingest secret working; a webhook without a pack refuses provider signatures', async () => {
    const wh = await createWebhook(app, apiKey);
    const body = json({ id: 'evt_1', type: 'invoice.paid' });
    const header = stripe.webhooks.generateTestHeaderString({ payload: body, secret: 'whsec_x' });
    expect((await ingest(app, wh.publicId, { body, headers: { 'stripe-signature': header } })).status).toBe(401);
    await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'stripe', secret: 'whsec_x' });
    expect((await ingest(app, wh.publicId, { body, headers: { 'stripe-signature': header } })).status).toBe(202);
    expect((await ingest(app, wh.publicId, { body, headers: { 'x-webhook-secret': wh.ingestSecret } })).status).toBe(202);
    // Removed: provider signatures count no more.
    expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: null })).body).toEqual({ webhookId: wh.id, provider: null, toleranceSeconds: null });
    expect((await ingest(app, wh.publicId, { body, headers: { 'stripe-signature': header } })).status).toBe(401);
  });

  it('verifies a Twilio JSON body by bodySHA256, over the URL alone', async () => {
    const wh = await createWebhook(app, apiKey);
    await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'twilio', secret: 'tok' });
    const body = json({ EventType: 'x' });
    const path = `?bodySHA256=${createHash('sha256').update(body).digest('hex')}`;
    const sig = twilio.getExpectedTwilioSignature('tok', wh.ingestUrl + path, {});
    expect(twilio.validateRequestWithBody('tok', sig, wh.ingestUrl + path, body)).toBe(true);
    expect((await ingest(app, wh.publicId, { body, path, headers: { 'x-twilio-signature': sig } })).status).toBe(202);
    expect((await ingest(app, wh.publicId, { body: json({ EventType: 'y' }), path, headers: { 'x-twilio-signature': sig } })).status).toBe(401);
  });

  it('honours a configured tolerance', async () => {
    const wh = await createWebhook(app, apiKey);
    await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'stripe', secret: 'whsec_t', toleranceSeconds: 1000 });
    const body = json({ id: 'evt_2', type: 'invoice.paid' });
    const at = nowSec() - 600;
    expect((await ingest(app, wh.publicId, { body, headers: { 'stripe-signature': stripe.webhooks.generateTestHeaderString({ payload: body, secret: 'whsec_t', timestamp: at }) } })).status).toBe(202);
  });

  it('does not keep GitLab\'s token with the event', async () => {
    const wh = await createWebhook(app, apiKey);
    await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider: 'gitlab', secret: 'tok-123' });
    const res = await ingest(app, wh.publicId, { headers: { 'x-gitlab-token': 'tok-123', 'x-gitlab-event': 'Push Hook' } });
    expect(res.status).toBe(202);
    const { rows } = await app.rt.db.pool.query('SELECT headers FROM events WHERE id = $1', [res.body.eventId]);
    expect(rows[0].headers['x-gitlab-token']).toBeUndefined();
    expect(rows[0].headers['x-gitlab-event']).toBe('Push Hook');
  });
});
