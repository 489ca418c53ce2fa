// `relay listen` (CONTRACT §13) as a child process, against the service split as `start:api` and
// `start:worker` run it (two apps on one database, sharing nothing else: the hand-off goes through
// PostgreSQL), with outbound private addresses refused: only the developer's machine reaches the
// loopback receivers. The receivers verify the Standard Webhooks signature with `standardwebhooks`.
import { mkdtemp, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createClient } from 'graphql-ws';
import { Webhook } from 'standardwebhooks';
import WebSocket from 'ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { startReceiver, type Received } from './support/receiver.ts';
import { runRelay, startRelay, type RelayProcess } from './support/relay.ts';
import { ingest, ingestingProject } from './support/webhooks.ts';

let api: TestApp;
let worker: TestApp;
const running: RelayProcess[] = [];
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  api = await startTestApp({ worker: false, config: { ALLOW_PRIVATE_DESTINATIONS: false } });
  worker = await startTestApp({ databaseUrl: api.databaseUrl, api: false, worker: true, config: { ALLOW_PRIVATE_DESTINATIONS: false } });
});

afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => p.stop()));
  await Promise.all(closers.splice(0).map((c) => c()));
});

afterAll(async () => {
  await worker?.stop();
  await api?.stop();
});

interface CliWebhook {
  id: string;
  publicId: string;
  ingestSecret: string;
  signingSecret: string;
}

async function cliWebhook(apiKey: string, controls: Record<string, unknown> = {}): Promise<CliWebhook> {
  const res = await api.api(apiKey, 'POST', '/v1/webhooks', { name: 'local', destination: { type: 'cli', config: {} }, ...controls });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body;
}

async function receiver(reply?: Parameters<typeof startReceiver>[0]) {
  const r = await startReceiver(reply);
  closers.push(() => r.close());
  return r;
}

async function listenTo(apiKey: string, webhookId: string, forwardTo: string, extra: string[] = [], baseUrl = api.url): Promise<RelayProcess> {
  const p = startRelay(['listen', webhookId, '--forward-to', forwardTo, '--json', ...extra], { RELAY_BASE_URL: baseUrl, RELAY_API_KEY: apiKey });
  running.push(p);
  await p.waitLine((l) => l.type === 'ready');
  return p;
}

async function stopListen(p: RelayProcess) {
  const code = await p.stop();
  running.splice(running.indexOf(p), 1);
  return code;
}

const send = (wh: CliWebhook, body = '{"hello":"local"}') => ingest(api, wh.publicId, { body, headers: { authorization: `Bearer ${wh.ingestSecret}` } });

async function delivery(apiKey: string, id: string) {
  return (await api.api(apiKey, 'GET', `/v1/deliveries/${id}`)).body;
}

async function attempts(apiKey: string, id: string): Promise<any[]> {
  return (await api.api(apiKey, 'GET', `/v1/deliveries/${id}/attempts`)).body.items;
}

/** Waits (bounded) until the delivery is in `status`. */
function reaches(apiKey: string, id: string, status: string, timeoutMs = 15_000) {
  return waitFor(async () => {
    const d = await delivery(apiKey, id);
    return d.status === status ? d : null;
  }, timeoutMs);
}

async function listenerConnected(apiKey: string, webhookId: string): Promise<boolean> {
  const res = await api.api(apiKey, 'GET', `/v1/webhooks/${webhookId}/destinations`);
  expect(res.status).toBe(200);
  return res.body.items.find((d: any) => d.type === 'cli').listenerConnected;
}

function verifies(secret: string, r: Received): boolean {
  try {
    new Webhook(secret).verify(r.body.toString('utf8'), r.headers as Record<string, string>);
    return true;
  } catch {
    return false;
  }
}

const FAST_RETRIES = { maxAttempts: 10, backoff: 'fixed', initialDelayMs: 300, jitter: false };

describe('relay listen: forwarding', () => {
  it("forwards each delivery to the local URL as the server would send it (body, content type, custom headers, a signature standardwebhooks verifies), and records the attempt", async () => {
    const local = await receiver();
    const { apiKey } = await api.project('starter');
    const wh = await cliWebhook(apiKey, { customHeaders: { 'x-team': 'payments' } });
    expect(await listenerConnected(apiKey, wh.id)).toBe(false);
    const listen = await listenTo(apiKey, wh.id, `${local.url}/hooks?from=relay`);
    expect(await listenerConnected(apiKey, wh.id)).toBe(true);

    const small = (await send(wh)).body;
    // Larger than a NOTIFY can carry: handed over through listen_handoffs.
    const bigBody = JSON.stringify({ blob: 'x'.repeat(60_000) });
    const big = (await send(wh, bigBody)).body;
    await reaches(apiKey, small.deliveryId, 'succeeded');
    await reaches(apiKey, big.deliveryId, 'succeeded');

    expect(local.received).toHaveLength(2);
    const byBody = new Map(local.received.map((r) => [r.body.toString(), r]));
    for (const [body, event] of [['{"hello":"local"}', small], [bigBody, big]] as const) {
      const r = byBody.get(body)!;
      expect(r, 'the body arrives byte for byte').toBeDefined();
      expect(r).toMatchObject({ method: 'POST', url: '/hooks?from=relay' });
      expect(r.headers).toMatchObject({ 'content-type': 'application/json', 'x-team': 'payments', 'webhook-id': event.eventId });
      expect(r.headers['user-agent']).toMatch(/webhook-service/);
      expect(verifies(wh.signingSecret, r)).toBe(true);
    }
    expect(verifies('whsec_' + Buffer.alloc(32, 1).toString('base64'), local.received[0])).toBe(false);

    const lines = listen.lines.filter((l) => l.type === 'delivery');
    expect(lines.map((l) => l.deliveryId).sort()).toEqual([small.deliveryId, big.deliveryId].sort());
    expect(lines[0]).toMatchObject({ method: 'POST', path: '/hooks?from=relay', statusCode: 200, error: null });
    expect(typeof lines[0].durationMs).toBe('number');
    expect((await attempts(apiKey, small.deliveryId)).map((a) => [a.statusCode, a.outcome])).toEqual([[200, 'succeeded']]);
    expect((await delivery(apiKey, small.deliveryId)).destination).toMatchObject({ type: 'cli' });
    const { rows } = await api.rt.db.pool.query('SELECT count(*)::int AS n FROM listen_handoffs');
    expect(rows[0].n).toBe(0);

    expect(await stopListen(listen)).toBe(0);
    expect(listen.lines.at(-1)).toMatchObject({ type: 'summary', deliveries: 2, succeeded: 2, failed: 0, errors: 0 });
    expect(await listenerConnected(apiKey, wh.id)).toBe(false);
  });

  it('prints one line per delivery without --json: time, delivery id, method and local path, status, duration', async () => {
    const local = await receiver();
    const { apiKey } = await api.project();
    const wh = await cliWebhook(apiKey);
    const listen = startRelay(['listen', wh.id, '--forward-to', `${local.url}/in`], { RELAY_BASE_URL: api.url, RELAY_API_KEY: apiKey });
    running.push(listen);
    await waitFor(() => listen.stdout().includes('Ready'), 15_000);
    const { deliveryId } = (await send(wh)).body;
    await reaches(apiKey, deliveryId, 'succeeded');
    await waitFor(() => listen.stdout().includes(deliveryId), 5_000);
    const line = listen.stdout().split('\n').find((l) => l.includes(deliveryId))!;
    expect(line).toMatch(new RegExp(`^\\d\\d:\\d\\d:\\d\\d\\.\\d{3}  ${deliveryId}  POST /in  200  \\d+ ms$`));
    expect(await stopListen(listen)).toBe(0);
    expect(listen.stdout()).toMatch(/1 delivery forwarded in \d+ s: 1 answered 2xx/);
  });

  it('a receiver answering 500 gets the retries, which listen forwards again (same webhook-id) until it answers 200', async () => {
    const local = await receiver((_r, n) => (n <= 2 ? { status: 500, body: 'down' } : { status: 200 }));
    const { apiKey } = await api.project('starter');
    const wh = await cliWebhook(apiKey, { retryPolicy: FAST_RETRIES });
    const listen = await listenTo(apiKey, wh.id, local.url);
    const { deliveryId, eventId } = (await send(wh)).body;
    const done = await reaches(apiKey, deliveryId, 'succeeded');
    expect(done.attempts).toBe(3);
    expect(local.received.map((r) => r.headers['webhook-id'])).toEqual([eventId, eventId, eventId]);
    expect(local.received.every((r) => verifies(wh.signingSecret, r))).toBe(true);
    expect((await attempts(apiKey, deliveryId)).map((a) => [a.statusCode, a.outcome, a.responseSnippet])).toEqual([
      [500, 'retry', 'down'],
      [500, 'retry', 'down'],
      [200, 'succeeded', ''],
    ]);
    expect(listen.lines.filter((l) => l.type === 'delivery' && l.deliveryId === deliveryId).map((l) => l.statusCode)).toEqual([500, 500, 200]);
  });

  it("keeps the first bytes of a long answer as the attempt's snippet, however many bytes their escaping takes, NUL as U+FFFD", async () => {
    const body = 'a\u0000' + '\u0001'.repeat(4096);
    const local = await receiver(() => ({ status: 201, body }));
    const { apiKey } = await api.project();
    const wh = await cliWebhook(apiKey);
    await listenTo(apiKey, wh.id, local.url);
    const { deliveryId } = (await send(wh)).body;
    await reaches(apiKey, deliveryId, 'succeeded');
    const [attempt] = await attempts(apiKey, deliveryId);
    expect(attempt.statusCode).toBe(201);
    expect(attempt.responseSnippet.length).toBeGreaterThan(100);
    expect(attempt.responseSnippet.startsWith('a\uFFFD\u0001')).toBe(true);
    expect(body.replace('\u0000', '\uFFFD').startsWith(attempt.responseSnippet)).toBe(true);
  });

  it('a local server refusing the connection is the attempt\'s network error, retried by the policy', async () => {
    const closed = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const port = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(port));
      });
    });
    const { apiKey } = await api.project('starter');
    const wh = await cliWebhook(apiKey, { retryPolicy: { ...FAST_RETRIES, retryOn: ['network'] } });
    const listen = await listenTo(apiKey, wh.id, `http://127.0.0.1:${closed}/hooks`);
    const { deliveryId } = (await send(wh)).body;
    const tried = await waitFor(async () => {
      const list = await attempts(apiKey, deliveryId);
      return list.length >= 2 ? list : null;
    });
    expect(tried![0]).toMatchObject({ statusCode: null, outcome: 'retry', error: expect.stringMatching(/ECONNREFUSED/) });
    expect((await delivery(apiKey, deliveryId)).status).toBe('retrying');
    expect(listen.lines.find((l) => l.type === 'delivery')).toMatchObject({ deliveryId, statusCode: null, error: expect.stringMatching(/ECONNREFUSED/) });
  });

  it('times the whole round trip with the webhook\'s timeoutMs: a local server that hangs is a timeout, and the DLQ takes the last one', async () => {
    const local = await receiver(() => ({ hang: true }));
    const { apiKey } = await api.project('starter');
    const wh = await cliWebhook(apiKey, { timeoutMs: 1000, retryPolicy: { maxAttempts: 1 } });
    await listenTo(apiKey, wh.id, local.url);
    const { deliveryId } = (await send(wh)).body;
    const failed = await reaches(apiKey, deliveryId, 'failed');
    expect(failed.lastAttempt.error).toMatch(/timed out after 1000 ms/);
    expect(failed.lastAttempt.durationMs).toBeGreaterThanOrEqual(1000);
    const dlq = await api.api(apiKey, 'GET', `/v1/dlq?webhookId=${wh.id}`);
    expect(dlq.body.items.map((e: any) => e.deliveryId)).toEqual([deliveryId]);
  });
});

describe('relay listen: sessions', () => {
  it('with no session, attempts fail "no listener connected" and are retried; listen started again delivers them', async () => {
    const local = await receiver();
    const { apiKey } = await api.project('starter');
    const wh = await cliWebhook(apiKey, { retryPolicy: FAST_RETRIES });
    const first = await listenTo(apiKey, wh.id, local.url);
    const before = (await send(wh)).body;
    await reaches(apiKey, before.deliveryId, 'succeeded');
    expect(await stopListen(first)).toBe(0);
    expect(await listenerConnected(apiKey, wh.id)).toBe(false);

    const { deliveryId } = (await send(wh)).body;
    const failing = await waitFor(async () => {
      const list = await attempts(apiKey, deliveryId);
      return list.length >= 2 ? list : null;
    });
    for (const a of failing!.slice(0, 2)) expect(a).toMatchObject({ statusCode: null, error: 'no listener connected', outcome: 'retry' });
    expect((await delivery(apiKey, deliveryId)).status).toBe('retrying');
    expect(local.received).toHaveLength(1);

    const again = await listenTo(apiKey, wh.id, local.url);
    const done = await reaches(apiKey, deliveryId, 'succeeded');
    expect(done.lastAttempt).toMatchObject({ statusCode: 200 });
    expect(local.received).toHaveLength(2);
    expect(again.lines.some((l) => l.type === 'delivery' && l.deliveryId === deliveryId)).toBe(true);
  });

  it('two sessions of one destination share its deliveries: each goes to exactly one', async () => {
    const a = await receiver();
    const b = await receiver();
    const { apiKey } = await ingestingProject(api);
    const wh = await cliWebhook(apiKey);
    const la = await listenTo(apiKey, wh.id, a.url);
    const lb = await listenTo(apiKey, wh.id, b.url);
    const sent = [];
    for (let i = 0; i < 20; i++) sent.push((await send(wh, JSON.stringify({ i }))).body);
    for (const s of sent) await reaches(apiKey, s.deliveryId, 'succeeded');
    const ids = (p: RelayProcess) => p.lines.filter((l) => l.type === 'delivery').map((l) => l.deliveryId as string);
    const [ofA, ofB] = [ids(la), ids(lb)];
    expect(ofA.filter((id) => ofB.includes(id))).toEqual([]);
    expect([...ofA, ...ofB].sort()).toEqual(sent.map((s) => s.deliveryId).sort());
    expect(ofA.length).toBeGreaterThan(0);
    expect(ofB.length).toBeGreaterThan(0);
    expect(a.received.length + b.received.length).toBe(20);
    expect(new Set([...a.received, ...b.received].map((r) => r.headers['webhook-id'])).size).toBe(20);
  });

  it('a replay of a cli delivery goes through listen: the same bytes, the same webhook-id', async () => {
    const local = await receiver();
    const { apiKey } = await api.project('starter');
    const wh = await cliWebhook(apiKey);
    const listen = await listenTo(apiKey, wh.id, local.url);
    const { deliveryId, eventId } = (await send(wh, '{"order":42}')).body;
    await reaches(apiKey, deliveryId, 'succeeded');
    const replay = await runRelay(['deliveries', 'replay', deliveryId, '--json'], { RELAY_BASE_URL: api.url, RELAY_API_KEY: apiKey });
    expect(replay.code, replay.stderr).toBe(0);
    expect(replay.lines[0]).toMatchObject({ sourceDeliveryId: deliveryId });
    const replayed = await waitFor(async () => {
      const list = (await api.api(apiKey, 'GET', `/v1/deliveries?webhookId=${wh.id}`)).body.items;
      return list.find((d: any) => d.replayOf === deliveryId && d.status === 'succeeded');
    });
    expect(local.received).toHaveLength(2);
    expect(local.received[1].body.toString()).toBe('{"order":42}');
    expect(local.received[1].headers['webhook-id']).toBe(eventId);
    expect(verifies(wh.signingSecret, local.received[1])).toBe(true);
    expect(listen.lines.some((l) => l.type === 'delivery' && l.deliveryId === replayed.id)).toBe(true);
  });

  it('reconnects by itself when the connection drops, and takes deliveries again', async () => {
    const local = await receiver();
    const target = new URL(api.url);
    const sockets = new Set<net.Socket>();
    const proxy = net.createServer((client) => {
      const upstream = net.connect(Number(target.port), target.hostname);
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
        s.on('error', () => {});
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
    closers.push(() => new Promise((r) => proxy.close(r)));
    const { apiKey } = await api.project('starter');
    const wh = await cliWebhook(apiKey, { retryPolicy: FAST_RETRIES });
    const listen = await listenTo(apiKey, wh.id, local.url, [], `http://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`);
    for (const s of sockets) s.destroy();
    await listen.waitLine((l) => l.type === 'reconnecting');
    await listen.waitLine((l) => l.type === 'ready' && l.reconnected === true, 20_000);
    const { deliveryId } = (await send(wh)).body;
    await reaches(apiKey, deliveryId, 'succeeded');
    expect(listen.lines.some((l) => l.type === 'delivery' && l.deliveryId === deliveryId)).toBe(true);
  });
});

describe('the listen protocol, as any graphql-ws client speaks it', () => {
  it('an answer within timeoutMs is the attempt; one after it is refused (false) and the attempt stays a timeout; another project cannot answer', async () => {
    const { apiKey } = await api.project('starter');
    const other = await api.project('starter');
    const wh = await cliWebhook(apiKey, { timeoutMs: 1000, retryPolicy: { maxAttempts: 1 } });
    const client = createClient({ url: api.url.replace('http', 'ws') + '/graphql', webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${apiKey}` }, retryAttempts: 0 });
    const stranger = createClient({ url: api.url.replace('http', 'ws') + '/graphql', webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${other.apiKey}` }, retryAttempts: 0 });
    closers.push(async () => (await client.dispose(), await stranger.dispose()));
    const events: any[] = [];
    client.subscribe(
      { query: 'subscription($w: ID!) { listen(webhookId: $w) { type sessionId delivery { handoffId deliveryId timeoutMs headers bodyBase64 } } }', variables: { w: wh.id } },
      { next: (r) => events.push(r.data?.listen ?? r), error: () => {}, complete: () => {} },
    );
    const ready = await waitFor(() => events.find((e) => e.type === 'ready'));
    const answer = (c: typeof client, handoffId: string, statusCode: number) =>
      new Promise<any>((resolve) =>
        c.subscribe(
          {
            query: 'mutation($s: ID!, $h: ID!, $c: Int) { answerListenDelivery(sessionId: $s, handoffId: $h, statusCode: $c, durationMs: 3) }',
            variables: { s: ready.sessionId, h: handoffId, c: statusCode },
          },
          { next: resolve, error: resolve, complete: () => {} },
        ),
      );

    const prompt = (await send(wh)).body;
    const first = await waitFor(() => events.find((e) => e.type === 'delivery' && e.delivery.deliveryId === prompt.deliveryId));
    expect(first.delivery.timeoutMs).toBeLessThanOrEqual(1000);
    expect(Buffer.from(first.delivery.bodyBase64, 'base64').toString()).toBe('{"hello":"local"}');
    expect((await answer(stranger, first.delivery.handoffId, 200)).data).toEqual({ answerListenDelivery: false });
    expect((await answer(client, first.delivery.handoffId, 204)).data).toEqual({ answerListenDelivery: true });
    expect((await reaches(apiKey, prompt.deliveryId, 'succeeded')).lastAttempt).toMatchObject({ statusCode: 204, durationMs: 3 });

    const late = (await send(wh)).body;
    const second = await waitFor(() => events.find((e) => e.type === 'delivery' && e.delivery.deliveryId === late.deliveryId));
    const failed = await reaches(apiKey, late.deliveryId, 'failed');
    expect(failed.lastAttempt.error).toBe('timed out after 1000 ms');
    expect((await answer(client, second.delivery.handoffId, 200)).data).toEqual({ answerListenDelivery: false });
    expect((await delivery(apiKey, late.deliveryId)).lastAttempt.statusCode).toBeNull();
  });
});

describe('relay listen: API and runner in one process (npm start), the hand-off in memory', () => {
  let both: TestApp;
  beforeAll(async () => {
    both = await startTestApp({ worker: true, config: { ALLOW_PRIVATE_DESTINATIONS: false } });
  });
  afterAll(async () => {
    await both?.stop();
  });

  it('forwards small and large deliveries, shares them between two sessions, and fails them "no listener connected" once both stop', async () => {
    const local = await receiver();
    const { apiKey } = await both.project('starter');
    const created = await both.api(apiKey, 'POST', '/v1/webhooks', { name: 'one', destination: { type: 'cli', config: {} }, retryPolicy: FAST_RETRIES });
    expect(created.status).toBe(201);
    const wh = created.body as CliWebhook;
    const one = await listenTo(apiKey, wh.id, local.url, [], both.url);
    const two = await listenTo(apiKey, wh.id, local.url, [], both.url);
    const post = (body: string) => ingest(both, wh.publicId, { body, headers: { authorization: `Bearer ${wh.ingestSecret}` } });
    const bodies = ['{"n":1}', '{"n":2}', JSON.stringify({ big: 'y'.repeat(20_000) }), '{"n":4}'];
    const sent = [];
    for (const b of bodies) sent.push((await post(b)).body);
    const status = async (id: string) => (await both.api(apiKey, 'GET', `/v1/deliveries/${id}`)).body.status;
    for (const s of sent) await waitFor(async () => (await status(s.deliveryId)) === 'succeeded');
    expect(local.received.map((r) => r.body.toString()).sort()).toEqual([...bodies].sort());
    expect(local.received.every((r) => verifies(wh.signingSecret, r))).toBe(true);
    const ids = (p: RelayProcess) => p.lines.filter((l) => l.type === 'delivery').map((l) => l.deliveryId as string);
    expect(ids(one).filter((id) => ids(two).includes(id))).toEqual([]);
    expect([...ids(one), ...ids(two)].sort()).toEqual(sent.map((x) => x.deliveryId).sort());

    await stopListen(one);
    await stopListen(two);
    const { deliveryId } = (await post('{"n":5}')).body;
    const first = await waitFor(async () => (await both.api(apiKey, 'GET', `/v1/deliveries/${deliveryId}/attempts`)).body.items[0]);
    expect(first).toMatchObject({ error: 'no listener connected', outcome: 'retry' });
  });
});

describe('relay listen: what it refuses, in one line', () => {
  const env = (apiKey: string) => ({ RELAY_BASE_URL: api.url, RELAY_API_KEY: apiKey });
  const oneLine = (s: string) => s.trim().split('\n').length === 1;

  it('a key the server refuses, an unknown webhook, a webhook with no cli destination (saying how to add one), a default destination that is not the cli one (naming it)', async () => {
    const { apiKey } = await api.project();
    const badKey = await runRelay(['listen', 'wh_x', '--forward-to', 'http://127.0.0.1:1/'], env('sk_not_a_key'));
    expect(badKey.code).toBe(1);
    expect(oneLine(badKey.stderr)).toBe(true);
    expect(badKey.stderr).toMatch(/refused the API key/);

    const unknown = await runRelay(['listen', 'wh_nope', '--forward-to', 'http://127.0.0.1:1/'], env(apiKey));
    expect(unknown.code).toBe(1);
    expect(oneLine(unknown.stderr)).toBe(true);
    expect(unknown.stderr).toMatch(/No webhook with id wh_nope/);

    const http = await api.api(apiKey, 'POST', '/v1/webhooks', { name: 'http', url: 'https://example.com/hook' });
    const none = await runRelay(['listen', http.body.id, '--forward-to', 'http://127.0.0.1:1/', '--json'], env(apiKey));
    expect(none.code).toBe(1);
    expect(oneLine(none.stderr)).toBe(true);
    const error = JSON.parse(none.stderr);
    expect(error).toMatchObject({ type: 'error', code: 'invalid_request' });
    expect(error.message).toContain(`POST /v1/webhooks/${http.body.id}/destinations {"name": "local", "type": "cli", "config": {}}`);

    const named = await api.api(apiKey, 'POST', `/v1/webhooks/${http.body.id}/destinations`, { name: 'laptop', type: 'cli', config: {} });
    expect(named.status).toBe(201);
    const notDefault = await runRelay(['listen', http.body.id, '--forward-to', 'http://127.0.0.1:1/'], env(apiKey));
    expect(notDefault.code).toBe(1);
    expect(oneLine(notDefault.stderr)).toBe(true);
    expect(notDefault.stderr).toContain(`laptop (${named.body.id})`);
    const httpDestination = (await api.api(apiKey, 'GET', `/v1/webhooks/${http.body.id}/destinations`)).body.items.find((d: any) => d.isDefault);
    const notCli = await runRelay(['listen', http.body.id, '--forward-to', 'http://127.0.0.1:1/', '--destination', httpDestination.id], env(apiKey));
    expect(notCli.code).toBe(1);
    expect(oneLine(notCli.stderr)).toBe(true);
    expect(notCli.stderr).toMatch(/is a webhook destination, not a cli one/);

    // With the named one, it listens.
    const p = startRelay(['listen', http.body.id, '--destination', named.body.id, '--forward-to', 'http://127.0.0.1:1/', '--json'], env(apiKey));
    running.push(p);
    expect(await p.waitLine((l) => l.type === 'ready')).toMatchObject({ destinationId: named.body.id, destinationName: 'laptop' });
  });

  it('a cli destination takes no address: the server cannot be pointed anywhere by it (400), and every tier may have one', async () => {
    const { apiKey } = await api.project('free');
    const wh = await cliWebhook(apiKey);
    const listed = (await api.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/destinations`)).body.items;
    expect(listed).toEqual([expect.objectContaining({ type: 'cli', config: {}, isDefault: true, listenerConnected: false })]);
    const url = 'http://127.0.0.1:9/collect';
    const onCreate = await api.api(apiKey, 'POST', '/v1/webhooks', { name: 'x', destination: { type: 'cli', config: { url } } });
    expect(onCreate.status).toBe(400);
    expect(onCreate.body.error).toMatchObject({ code: 'invalid_request', param: 'destination.config.url' });
    const named = await api.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/destinations`, { name: 'x', type: 'cli', config: { url } });
    expect(named.status).toBe(400);
    expect(named.body.error).toMatchObject({ code: 'invalid_request', param: 'config.url' });
    const other = await api.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/destinations`, { name: 'x', type: 'cli', config: { host: '127.0.0.1' } });
    expect(other.status).toBe(400);
    const update = await api.api(apiKey, 'PATCH', `/v1/webhooks/${wh.id}/destinations/${listed[0].id}`, { config: { url } });
    expect(update.status).toBe(400);
    expect(update.body.error).toMatchObject({ code: 'invalid_request', param: 'config.url' });
    const viaWebhook = await api.api(apiKey, 'PATCH', `/v1/webhooks/${wh.id}`, { destination: { type: 'cli', config: { url } } });
    expect(viaWebhook.status).toBe(400);
    expect((await api.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/destinations`)).body.items[0].config).toEqual({});
  });
});

describe('relay: what a developer reaches for next, over the REST API', () => {
  const env = (apiKey: string) => ({ RELAY_BASE_URL: api.url, RELAY_API_KEY: apiKey });

  it('ingest send posts a file to the webhook\'s ingest with the Idempotency-Key; deliveries list finds it, filtered', async () => {
    const { apiKey } = await api.project('starter');
    // No listener: the first attempt fails, and the delivery waits a minute for the next.
    const wh = await cliWebhook(apiKey, { retryPolicy: { maxAttempts: 3, backoff: 'fixed', initialDelayMs: 60_000, jitter: false } });
    const dir = await mkdtemp(path.join(os.tmpdir(), 'relay-'));
    const file = path.join(dir, 'event.json');
    await writeFile(file, '{"type":"order.created","id":7}');
    const args = ['ingest', 'send', wh.id, '--data', `@${file}`, '--idempotency-key', 'order-7', '--ingest-secret', wh.ingestSecret, '--json'];
    const first = await runRelay(args, env(apiKey));
    expect(first.code, first.stderr).toBe(0);
    expect(first.lines[0]).toMatchObject({ type: 'ingested', httpStatus: 202, status: 'queued' });
    const again = await runRelay(args, env(apiKey));
    expect(again.code, again.stderr).toBe(0);
    expect(again.lines[0]).toMatchObject({ status: 'duplicate', deliveryId: first.lines[0].deliveryId });

    const noSecret = await runRelay(['ingest', 'send', wh.id, '--data', '{}'], env(apiKey));
    expect(noSecret.code).toBe(1);
    expect(noSecret.stderr.trim().split('\n')).toHaveLength(1);
    expect(noSecret.stderr).toMatch(/--ingest-secret/);

    await waitFor(async () => (await delivery(apiKey, first.lines[0].deliveryId)).status === 'retrying');
    const retrying = await runRelay(['deliveries', 'list', '--webhook', wh.id, '--status', 'retrying', '--json'], env(apiKey));
    expect(retrying.code, retrying.stderr).toBe(0);
    expect(retrying.lines[0].items.map((d: any) => d.id)).toEqual([first.lines[0].deliveryId]);
    const succeeded = await runRelay(['deliveries', 'list', '--webhook', wh.id, '--status', 'succeeded', '--json'], env(apiKey));
    expect(succeeded.lines[0].items).toEqual([]);
    const text = await runRelay(['deliveries', 'list', '--webhook', wh.id], env(apiKey));
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(first.lines[0].deliveryId);
    expect(text.stdout).toMatch(/retrying\s+\d+ attempts?\s+last: error: no listener connected/);
  });

  it('refuses a bad key, an unknown delivery, in one line; --help on every command', async () => {
    const badKey = await runRelay(['deliveries', 'list'], env('sk_wrong'));
    expect(badKey.code).toBe(1);
    expect(badKey.stderr.trim().split('\n')).toHaveLength(1);
    expect(badKey.stderr).toMatch(/refused the API key/);
    const { apiKey } = await api.project();
    const unknown = await runRelay(['deliveries', 'replay', 'del_nope', '--json'], env(apiKey));
    expect(unknown.code).toBe(1);
    expect(JSON.parse(unknown.stderr)).toMatchObject({ type: 'error', code: 'not_found', status: 404 });
    for (const cmd of [[], ['listen'], ['ingest'], ['ingest', 'send'], ['deliveries'], ['deliveries', 'list'], ['deliveries', 'replay']]) {
      const help = await runRelay([...cmd, '--help']);
      expect(help.code, cmd.join(' ')).toBe(0);
      expect(help.stdout, cmd.join(' ')).toMatch(/^Usage: relay/);
    }
    const listenHelp = await runRelay(['listen', '--help']);
    for (const words of ['--forward-to', '--destination', 'RELAY_BASE_URL', 'RELAY_API_KEY', 'no listener', 'reconnects', '--json']) expect(listenHelp.stdout).toContain(words);
  });
});
