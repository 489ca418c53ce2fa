// Browser forms (CONTRACT §12): formAccess and formAllowedOrigins, the CORS preflight, CORS headers
// on every answer, 403 origin_not_allowed; over HTTP, then in Chromium (playwright-core, Debian's
// Chromium; skipped with a notice when it is missing, as test/dashboard.e2e.test.ts) from pages
// served on other loopback origins.
import { existsSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INGEST_TARGETS_TOPIC, ingestTargets } from '../src/ingest/ingest-target-cache.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { createWebhook, ingestingProject } from './support/webhooks.ts';

let app: TestApp;
/** Another API process on the same database: a change made there reaches `app` only by notification. */
let other: TestApp;
let apiKey: string;
/** While true, `app` hears no notification of changed ingest lookups (one not arrived yet). */
let deaf = false;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  other = await startTestApp({ databaseUrl: app.databaseUrl, worker: false });
  ({ apiKey } = await ingestingProject(app));
  const pubsub = app.rt.pubsub as unknown as { dispatch(raw: string): Promise<void> };
  const dispatch = pubsub.dispatch.bind(pubsub);
  pubsub.dispatch = async (raw) => (deaf && raw.includes(`"${INGEST_TARGETS_TOPIC}"`) ? undefined : dispatch(raw));
});
afterAll(async () => {
  await other?.stop();
  await app?.stop();
});

const events = (webhookId: string) => app.rt.db.prisma.event.count({ where: { webhookId } });
const post = (publicId: string, fields: Record<string, string>, headers: Record<string, string> = {}) =>
  fetch(`${app.url}/f/${publicId}`, { method: 'POST', body: new URLSearchParams(fields), headers, redirect: 'manual' });
const preflight = (publicId: string, origin?: string) =>
  fetch(`${app.url}/f/${publicId}`, {
    method: 'OPTIONS',
    headers: { ...(origin ? { origin } : {}), 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type, idempotency-key' },
  });

describe('form controls', () => {
  it('default to secret access and every origin; validate their values with 400', async () => {
    const wh = await createWebhook(app, apiKey);
    expect(wh).toMatchObject({ formAccess: 'secret', formAllowedOrigins: ['*'] });
    for (const [field, value] of [
      ['formAccess', 'open'],
      ['formAllowedOrigins', ['https://example.com/']],
      ['formAllowedOrigins', ['https://example.com/path']],
      ['formAllowedOrigins', ['example.com']],
      ['formAllowedOrigins', ['ftp://example.com']],
      ['formAllowedOrigins', []],
    ] as const) {
      const res = await app.api(apiKey, 'PATCH', `/v1/webhooks/${wh.id}`, { [field]: value });
      expect(res.status, JSON.stringify(value)).toBe(400);
      expect(res.body.error.param).toBe(field);
    }
    const ok = await app.api(apiKey, 'PATCH', `/v1/webhooks/${wh.id}`, { formAccess: 'public', formAllowedOrigins: ['https://www.example.com', 'http://127.0.0.1:8080'] });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ formAccess: 'public', formAllowedOrigins: ['https://www.example.com', 'http://127.0.0.1:8080'] });
    const gql = await app.api(apiKey, 'POST', '/graphql', { query: `{ webhook(id: "${wh.id}") { formAccess formAllowedOrigins } }` });
    expect(gql.body.data.webhook).toEqual({ formAccess: 'public', formAllowedOrigins: ['https://www.example.com', 'http://127.0.0.1:8080'] });
    // GraphQL writes them too, with the same rules.
    const set = await app.api(apiKey, 'POST', '/graphql', { query: `mutation { updateWebhook(id: "${wh.id}", formAccess: "secret", formAllowedOrigins: ["*"]) { formAccess formAllowedOrigins } }` });
    expect(set.body.data.updateWebhook).toEqual({ formAccess: 'secret', formAllowedOrigins: ['*'] });
    const badGql = await app.api(apiKey, 'POST', '/graphql', { query: `mutation { updateWebhook(id: "${wh.id}", formAllowedOrigins: ["https://example.com/"]) { id } }` });
    expect(badGql.body.errors[0].extensions).toMatchObject({ code: 'invalid_request', param: 'formAllowedOrigins' });
  });
});

describe('form CORS over HTTP', () => {
  it('answers the preflight: 204 with the CORS headers for a listed origin, none for another, 404 for an unknown webhook', async () => {
    const wh = await createWebhook(app, apiKey, { formAllowedOrigins: ['https://www.example.com'] });
    const listed = await preflight(wh.publicId, 'https://www.example.com');
    expect(listed.status).toBe(204);
    expect(Object.fromEntries(listed.headers)).toMatchObject({
      'access-control-allow-origin': 'https://www.example.com',
      'access-control-allow-methods': 'POST',
      'access-control-allow-headers': 'content-type, idempotency-key',
      'access-control-max-age': '600',
      vary: 'Origin',
    });
    const other = await preflight(wh.publicId, 'https://evil.test');
    expect(other.status).toBe(204);
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
    expect(other.headers.get('access-control-allow-methods')).toBeNull();
    expect((await preflight('hook_0000000000000000deadbeef', 'https://www.example.com')).status).toBe(404);

    const star = await createWebhook(app, apiKey);
    const any = await preflight(star.publicId, 'https://anywhere.test');
    expect(any.headers.get('access-control-allow-origin')).toBe('*');
    expect(any.headers.get('vary')).toBeNull();
  });

  it('puts the same Access-Control-Allow-Origin on every answer, errors included; refuses an origin not listed with 403', async () => {
    const wh = await createWebhook(app, apiKey, { formAllowedOrigins: ['https://www.example.com'] });
    const origin = { origin: 'https://www.example.com' };
    const ok = await post(wh.publicId, { _secret: wh.ingestSecret, name: 'Ana' }, origin);
    expect(ok.status).toBe(202);
    expect(ok.headers.get('access-control-allow-origin')).toBe('https://www.example.com');
    expect(ok.headers.get('vary')).toBe('Origin');
    const unauthorized = await post(wh.publicId, { name: 'Ana' }, origin);
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.headers.get('access-control-allow-origin')).toBe('https://www.example.com');
    const unsupported = await fetch(`${app.url}/f/${wh.publicId}`, { method: 'POST', body: '{}', headers: { ...origin, 'content-type': 'application/json' } });
    expect(unsupported.status).toBe(415);
    expect(unsupported.headers.get('access-control-allow-origin')).toBe('https://www.example.com');

    const refused = await post(wh.publicId, { _secret: wh.ingestSecret, name: 'Mallory' }, { origin: 'https://evil.test' });
    expect(refused.status).toBe(403);
    expect((await refused.json()).error.code).toBe('origin_not_allowed');
    expect(refused.headers.get('access-control-allow-origin')).toBeNull();
    // Origin: null matches only "*"; no Origin at all (not a browser) is not subject to the list.
    expect((await post(wh.publicId, { _secret: wh.ingestSecret }, { origin: 'null' })).status).toBe(403);
    expect((await post(wh.publicId, { _secret: wh.ingestSecret, name: 'server' })).status).toBe(202);
    expect(await events(wh.id)).toBe(2);
  });

  it('carries the CORS headers on the idempotency and state errors too: 400, 422, 409; checks the origin before the key', async () => {
    const wh = await createWebhook(app, apiKey, { formAllowedOrigins: ['https://www.example.com'] });
    const origin = { origin: 'https://www.example.com' };
    const cors = (res: Response) => [res.headers.get('access-control-allow-origin'), res.headers.get('vary')];
    const badKey = await post(wh.publicId, { _secret: wh.ingestSecret, _idempotency_key: 'é' }, origin);
    expect(badKey.status).toBe(400);
    expect(cors(badKey)).toEqual(['https://www.example.com', 'Origin']);
    expect((await post(wh.publicId, { _secret: wh.ingestSecret, _idempotency_key: 'k1', name: 'Ana' }, origin)).status).toBe(202);
    const reused = await post(wh.publicId, { _secret: wh.ingestSecret, _idempotency_key: 'k1', name: 'Bo' }, origin);
    expect(reused.status).toBe(422);
    expect(cors(reused)).toEqual(['https://www.example.com', 'Origin']);
    // The origin is checked before the key: a retry of k1 from an origin not listed is 403, not a duplicate.
    const elsewhere = await post(wh.publicId, { _secret: wh.ingestSecret, _idempotency_key: 'k1', name: 'Ana' }, { origin: 'https://evil.test' });
    expect(elsewhere.status).toBe(403);
    expect((await elsewhere.json()).error.code).toBe('origin_not_allowed');
    expect((await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/pause`)).status).toBe(200);
    const paused = await post(wh.publicId, { _secret: wh.ingestSecret, name: 'Cy' }, origin);
    expect(paused.status).toBe(409);
    expect((await paused.json()).error.code).toBe('webhook_paused');
    expect(cors(paused)).toEqual(['https://www.example.com', 'Origin']);
    expect(await events(wh.id)).toBe(1);
  });

  it('public access needs no secret (the publicId is the credential), and the origin list still applies', async () => {
    const wh = await createWebhook(app, apiKey, { formAccess: 'public', formAllowedOrigins: ['https://www.example.com'] });
    expect((await post(wh.publicId, { name: 'Ana' }, { origin: 'https://www.example.com' })).status).toBe(202);
    expect((await post(wh.publicId, { name: 'Bo' })).status).toBe(202);
    expect((await post(wh.publicId, { name: 'Mallory' }, { origin: 'https://evil.test' })).status).toBe(403);
    // The honeypot still applies; from an origin not listed it is refused like any post.
    expect((await post(wh.publicId, { name: 'bot', _honeypot: 'x' })).status).toBe(202);
    expect((await post(wh.publicId, { name: 'bot', _honeypot: 'x' }, { origin: 'https://evil.test' })).status).toBe(403);
    expect(await events(wh.id)).toBe(2);
    // HTTP ingest still needs the secret.
    expect((await fetch(`${app.url}/i/${wh.publicId}`, { method: 'POST', body: '{}' })).status).toBe(401);
    // Back to secret: the secret is needed again, from the very next post.
    await app.api(apiKey, 'PATCH', `/v1/webhooks/${wh.id}`, { formAccess: 'secret' });
    expect((await post(wh.publicId, { name: 'Ana' }, { origin: 'https://www.example.com' })).status).toBe(401);
  });
});

describe('form origins changed in another process, not yet heard of here', () => {
  // `app` keeps the webhook's lookup from before the change. The post is decided again on a fresh
  // lookup (a refusal on the kept one is retried; the ingest statement sends an out-of-date one
  // there too), and its answer carries the CORS headers of the lookup it was decided on.
  const keptHere = (wh: { publicId: string }) => ingestTargets(app.rt).has(wh.publicId);
  const A = 'https://a.example.com';
  const B = 'https://b.example.com';
  const cors = (res: Response) => [res.headers.get('access-control-allow-origin'), res.headers.get('vary')];
  /** A webhook listing `A`, its lookup kept by `app`, then `formAllowedOrigins` set to `origins` by `other` while `app` hears nothing. */
  async function changedElsewhere(origins: string[], run: (wh: Awaited<ReturnType<typeof createWebhook>>) => Promise<void>) {
    const wh = await createWebhook(app, apiKey, { formAllowedOrigins: [A] });
    expect((await post(wh.publicId, { _secret: wh.ingestSecret, name: 'first' }, { origin: A })).status).toBe(202);
    expect(keptHere(wh)).toBe(true);
    deaf = true;
    try {
      expect((await other.api(apiKey, 'PATCH', `/v1/webhooks/${wh.id}`, { formAllowedOrigins: origins })).status).toBe(200);
      expect(keptHere(wh), 'the lookup from before the change is still kept here').toBe(true);
      await run(wh);
    } finally {
      deaf = false;
    }
  }

  it('an origin added elsewhere: 202 with its Access-Control-Allow-Origin (the browser can read the answer)', async () => {
    await changedElsewhere([A, B], async (wh) => {
      const ok = await post(wh.publicId, { _secret: wh.ingestSecret, name: 'Bo' }, { origin: B });
      expect(ok.status).toBe(202);
      expect(cors(ok)).toEqual([B, 'Origin']);
      expect(await events(wh.id)).toBe(2);
    });
  });

  it('an origin removed elsewhere: 403 origin_not_allowed without Access-Control-Allow-Origin', async () => {
    await changedElsewhere([B], async (wh) => {
      const refused = await post(wh.publicId, { _secret: wh.ingestSecret, name: 'Ana' }, { origin: A });
      expect(refused.status).toBe(403);
      expect((await refused.json()).error.code).toBe('origin_not_allowed');
      expect(cors(refused)).toEqual([null, 'Origin']);
      expect(await events(wh.id)).toBe(1);
    });
  });

  it('the honeypot alike: an origin added elsewhere gets the accepted answer with its Access-Control-Allow-Origin, nothing stored', async () => {
    await changedElsewhere([A, B], async (wh) => {
      const bot = await post(wh.publicId, { _secret: wh.ingestSecret, name: 'bot', _honeypot: 'x' }, { origin: B });
      expect(bot.status).toBe(202);
      expect(cors(bot)).toEqual([B, 'Origin']);
      expect(await events(wh.id)).toBe(1);
    });
  });
});

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find((p) => p && existsSync(p));
if (!CHROMIUM) {
  if (process.env.CI) throw new Error('[browser forms] no Chromium found, and CI is set (apt-get install -y chromium, or set CHROMIUM_PATH).');
  console.warn('\n[browser forms] SKIPPED: no Chromium found (apt-get install -y chromium, or set CHROMIUM_PATH).\n');
}

/** A page server on its own loopback origin, answering every path with `html`. */
async function pageServer(html: (origin: string) => string) {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(html(origin));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { origin, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe.skipIf(!CHROMIUM)('browser forms in Chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('a page on a listed origin posts with fetch (preflighted by its Idempotency-Key) and reads the answer; a third origin is refused', async () => {
    let action = '';
    const page = (origin: string) => `<!doctype html><title>${origin}</title>
<form method="post" action="${action}"><input name="name" value="Ana"><input type="hidden" name="_redirect" value="${origin}/thanks"><button>Send</button></form>`;
    const allowed = await pageServer(page);
    const third = await pageServer(page);
    const wh = await createWebhook(app, apiKey, { formAccess: 'public', formAllowedOrigins: [allowed.origin] });
    action = `${app.url}/f/${wh.publicId}`;
    const context = await browser.newContext();
    try {
      const tab = await context.newPage();
      const send = (key: string) =>
        tab.evaluate(
          async ({ url, key }) => {
            const body = new FormData();
            body.append('name', 'Ana');
            try {
              const res = await fetch(url, { method: 'POST', body, headers: { 'idempotency-key': key } });
              return { status: res.status, body: await res.json() };
            } catch (e) {
              return { error: String(e) };
            }
          },
          { url: action, key },
        );
      await tab.goto(allowed.origin);
      const first = await send('browser-1');
      expect(first).toMatchObject({ status: 202, body: { status: 'queued' } });
      // The browser retries with a new multipart boundary: the same body.
      const retry = await send('browser-1');
      expect(retry).toMatchObject({ status: 202, body: { status: 'duplicate', eventId: (first as any).body.eventId } });

      await tab.goto(third.origin);
      const refused = await send('browser-2');
      expect(refused).toMatchObject({ error: expect.stringMatching(/Failed to fetch/) });
      expect(await events(wh.id)).toBe(1);

      // A plain HTML form with _redirect still works: 303 to the thank-you page.
      await tab.goto(allowed.origin);
      await Promise.all([tab.waitForURL(`${allowed.origin}/thanks`), tab.getByRole('button', { name: 'Send' }).click()]);
      expect(await events(wh.id)).toBe(2);
      // From the third origin the post is refused (no redirect, nothing stored).
      await tab.goto(third.origin);
      const [response] = await Promise.all([tab.waitForResponse((r) => r.url() === action), tab.getByRole('button', { name: 'Send' }).click()]);
      expect(response.status()).toBe(403);
      expect(await events(wh.id)).toBe(2);
    } finally {
      await context.close();
      await allowed.close();
      await third.close();
    }
  });
});
