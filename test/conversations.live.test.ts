import { createClient, type Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';

// Two API processes on one database: subscribers on B hear messages written through A.
let a: TestApp;
let b: TestApp;
const clients: Client[] = [];
beforeAll(async () => {
  a = await startTestApp();
  b = await startTestApp({ databaseUrl: a.databaseUrl });
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.dispose()));
  await b?.stop();
  await a?.stop();
});

const MESSAGE_FIELDS = 'id conversation_id message reactions attachments read_at created_at updated_at contact { id username phone_number avatar_url last_active_at created_at }';

function wsClient(app: TestApp, apiKey: string) {
  const client = createClient({
    url: `${app.url.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${apiKey}` },
    retryAttempts: 0,
  });
  clients.push(client);
  return client;
}

interface Subscription {
  events: any[];
  errors: unknown[];
  stop(): void;
}

function subscribe(client: Client, field: 'messageCreated' | 'messageUpdated', conversationId?: string): Subscription {
  const sub: Subscription = { events: [], errors: [], stop: () => {} };
  const args = conversationId ? '(conversationId: $c)' : '';
  sub.stop = client.subscribe(
    { query: `subscription${conversationId ? '($c: ID)' : ''} { ${field}${args} { ${MESSAGE_FIELDS} } }`, variables: conversationId ? { c: conversationId } : {} },
    {
      next: (r) => (r.errors ? sub.errors.push(r.errors) : sub.events.push((r.data as any)[field])),
      error: (e) => sub.errors.push(e),
      complete: () => {},
    },
  );
  return sub;
}

/** Subscriptions start asynchronously: send probes until one arrives, so the subscription is live. */
async function untilLive(sub: Subscription, probe: () => Promise<unknown>) {
  await waitFor(
    async () => {
      await probe();
      return waitFor(() => sub.events.length > 0, 300).catch(() => false);
    },
    15_000,
    0,
  );
}

async function contactIn(app: TestApp, apiKey: string, username = 'ana') {
  const res = await app.api(apiKey, 'POST', '/v1/contacts', { username, phone_number: '+1555' });
  expect(res.status).toBe(200);
  return res.body;
}

async function send(app: TestApp, apiKey: string, conversation_id: string, message = 'hello') {
  const res = await app.api(apiKey, 'POST', '/v1/messages', { conversation_id, message });
  expect(res.status).toBe(200);
  return res.body;
}

describe('message subscriptions over graphql-ws', () => {
  it('delivers a message sent through REST on one process to a subscriber on another, and not to another project', async () => {
    const p = await a.project('pro', 'p');
    const q = await a.project('pro', 'q');
    const pContact = await contactIn(a, p.apiKey);
    const qContact = await contactIn(a, q.apiKey, 'quinn');
    const pSub = subscribe(wsClient(b, p.apiKey), 'messageCreated');
    const qSub = subscribe(wsClient(b, q.apiKey), 'messageCreated');
    await untilLive(pSub, () => send(a, p.apiKey, pContact.conversation_id, 'probe'));
    await untilLive(qSub, () => send(a, q.apiKey, qContact.conversation_id, 'probe'));

    const sent = await send(a, p.apiKey, pContact.conversation_id, 'for p only');
    const received = await waitFor(() => pSub.events.find((m) => m.id === sent.id), 10_000);
    expect(received).toEqual(sent);
    // Notifications arrive in commit order: once q hears a later message of its own, p's has passed by.
    const later = await send(a, q.apiKey, qContact.conversation_id, 'for q');
    await waitFor(() => qSub.events.find((m) => m.id === later.id), 10_000);
    expect(qSub.events.some((m) => m.id === sent.id)).toBe(false);
    expect(qSub.events.every((m) => m.conversation_id === qContact.conversation_id)).toBe(true);
    expect(pSub.errors).toEqual([]);
    pSub.stop();
    qSub.stop();
  });

  it('narrows messageUpdated to one conversation when conversationId is given', async () => {
    const p = await a.project('pro', 'p2');
    const one = await contactIn(a, p.apiKey, 'one');
    const two = await contactIn(a, p.apiKey, 'two');
    const m1 = await send(a, p.apiKey, one.conversation_id);
    const m2 = await send(a, p.apiKey, two.conversation_id);
    const client = wsClient(b, p.apiKey);
    const onlyOne = subscribe(client, 'messageUpdated', one.conversation_id);
    const all = subscribe(client, 'messageUpdated');
    let n = 0;
    await untilLive(onlyOne, () => a.api(p.apiKey, 'PUT', `/v1/messages/${m1.id}`, { reactions: { like: [`probe${n++}`] } }));
    await untilLive(all, () => a.api(p.apiKey, 'PUT', `/v1/messages/${m1.id}`, { reactions: { like: [`probe${n++}`] } }));

    const other = (await a.api(p.apiKey, 'PUT', `/v1/messages/${m2.id}`, 'reactions[like][]=bo', { 'content-type': 'application/x-www-form-urlencoded' })).body;
    const mine = (await a.api(p.apiKey, 'PUT', `/v1/messages/${m1.id}`, { message: 'edited' })).body;
    await waitFor(() => all.events.find((m) => m.message === 'edited'), 10_000);
    expect(all.events.find((m) => m.id === m2.id)).toEqual(other);
    const heard = await waitFor(() => onlyOne.events.find((m) => m.message === 'edited'), 10_000);
    expect(heard).toEqual(mine);
    expect(heard.updated_at).toEqual(expect.any(Number));
    expect(onlyOne.events.every((m) => m.conversation_id === one.conversation_id)).toBe(true);
    onlyOne.stop();
    all.stop();
  });

  it('answers every subscriber from the event itself, with no database read per subscriber', async () => {
    const p = await a.project('pro', 'fan');
    const contact = await contactIn(a, p.apiKey);
    const client = wsClient(b, p.apiKey);
    const subs = Array.from({ length: 20 }, (_, i) => subscribe(client, 'messageCreated', i % 2 ? contact.conversation_id : undefined));
    for (const sub of subs) await untilLive(sub, () => send(a, p.apiKey, contact.conversation_id, 'probe'));
    const reads: string[] = [];
    const prisma = b.rt.db.prisma;
    b.rt.db.prisma = new Proxy(prisma, {
      get(target, prop) {
        reads.push(String(prop));
        const v = Reflect.get(target, prop);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    try {
      const sent = await send(a, p.apiKey, contact.conversation_id, 'to all');
      for (const sub of subs) expect(await waitFor(() => sub.events.find((m) => m.id === sent.id), 10_000)).toEqual(sent);
    } finally {
      b.rt.db.prisma = prisma;
    }
    expect(reads).toEqual([]);
    subs.forEach((s) => s.stop());
  });

  it('carries a message too large for NOTIFY by reference, loaded on the receiving process', async () => {
    const p = await a.project('pro', 'p3');
    const contact = await contactIn(a, p.apiKey);
    const sub = subscribe(wsClient(b, p.apiKey), 'messageCreated', contact.conversation_id);
    await untilLive(sub, () => send(a, p.apiKey, contact.conversation_id, 'probe'));
    const big = await send(a, p.apiKey, contact.conversation_id, 'x'.repeat(20_000));
    expect(await waitFor(() => sub.events.find((m) => m.id === big.id), 10_000)).toEqual(big);
    sub.stop();
  });

  it("refuses a subscription to another project's conversation, and a connection without a valid key", async () => {
    const p = await a.project('pro', 'p4');
    const q = await a.project('pro', 'q4');
    const qContact = await contactIn(a, q.apiKey);
    const sub = subscribe(wsClient(b, p.apiKey), 'messageCreated', qContact.conversation_id);
    await waitFor(() => sub.errors.length > 0, 10_000);
    expect(JSON.stringify(sub.errors)).toContain('not_found');

    const anonymous = subscribe(wsClient(b, 'sk_wrong'), 'messageCreated');
    await waitFor(() => anonymous.errors.length > 0, 10_000);
    expect(anonymous.events).toEqual([]);
  });
});

describe('message subscriptions over SSE', () => {
  it('streams messageCreated as server-sent events', async () => {
    const p = await a.project('pro', 'sse');
    const contact = await contactIn(a, p.apiKey);
    const controller = new AbortController();
    const res = await fetch(`${b.url}/graphql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${p.apiKey}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: `subscription($c: ID) { messageCreated(conversationId: $c) { ${MESSAGE_FIELDS} } }`, variables: { c: contact.conversation_id } }),
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const events: any[] = [];
    const reading = (async () => {
      const decoder = new TextDecoder();
      let buffer = '';
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          buffer += decoder.decode(chunk, { stream: true });
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const data = block
              .split('\n')
              .filter((l) => l.startsWith('data:'))
              .map((l) => l.slice(5).trim())
              .join('\n');
            if (data) events.push(JSON.parse(data));
          }
        }
      } catch {
        // aborted at the end of the test
      }
    })();
    const sub = { errors: [], stop() {}, get events() { return events.filter((e) => e.data?.messageCreated); } };
    await untilLive(sub, () => send(a, p.apiKey, contact.conversation_id, 'probe'));
    const sent = await send(a, p.apiKey, contact.conversation_id, 'over sse');
    const got = await waitFor(() => events.find((e) => e.data?.messageCreated?.id === sent.id), 10_000);
    expect(got.data.messageCreated).toEqual(sent);
    controller.abort();
    await reading;
  });
});
