import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './support/app.ts';
import { createWebhook } from './support/webhooks.ts';

let app: TestApp;
let apiKey: string;
const ids: string[] = [];
beforeAll(async () => {
  app = await startTestApp();
  ({ apiKey } = await app.project('free'));
  for (let i = 0; i < 25; i++) ids.push((await createWebhook(app, apiKey, { name: `hook ${i}` })).id);
  // Every third one paused: 9 paused (0, 3, …, 24), 16 active.
  for (let i = 0; i < 25; i += 3) await app.api(apiKey, 'POST', `/v1/webhooks/${ids[i]}/pause`);
});
afterAll(async () => {
  await app?.stop();
});

const newestFirst = () => [...ids].reverse();

async function collect(query: string) {
  const seen: string[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < 50; page++) {
    const res = await app.api(apiKey, 'GET', `/v1/webhooks?${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    expect(res.status).toBe(200);
    seen.push(...res.body.items.map((w: any) => w.id));
    cursor = res.body.nextCursor;
    if (!cursor) return seen;
  }
  throw new Error('pagination did not end');
}

describe('GET /v1/webhooks pagination', () => {
  it('answers {items, nextCursor}, 20 by default, newest first', async () => {
    const res = await app.api(apiKey, 'GET', '/v1/webhooks');
    expect(Object.keys(res.body).sort()).toEqual(['items', 'nextCursor']);
    expect(res.body.items).toHaveLength(20);
    expect(res.body.items.map((w: any) => w.id)).toEqual(newestFirst().slice(0, 20));
    const next = await app.api(apiKey, 'GET', `/v1/webhooks?cursor=${encodeURIComponent(res.body.nextCursor)}`);
    expect(next.body.items.map((w: any) => w.id)).toEqual(newestFirst().slice(20));
    expect(next.body.nextCursor).toBeNull();
  });

  it('walks every page exactly once', async () => {
    expect(await collect('limit=7')).toEqual(newestFirst());
  });

  it('clamps limit to 1..100', async () => {
    expect((await app.api(apiKey, 'GET', '/v1/webhooks?limit=0')).body.items).toHaveLength(1);
    expect((await app.api(apiKey, 'GET', '/v1/webhooks?limit=-5')).body.items).toHaveLength(1);
    expect((await app.api(apiKey, 'GET', '/v1/webhooks?limit=1000')).body.items).toHaveLength(25);
  });

  it('refuses a non-integer limit with 400', async () => {
    for (const limit of ['abc', '2.5', '1e2']) {
      const res = await app.api(apiKey, 'GET', `/v1/webhooks?limit=${limit}`);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_limit');
    }
  });

  it('filters by status, and binds the cursor to that filter', async () => {
    const paused = await collect('status=paused&limit=4');
    expect(paused).toEqual(newestFirst().filter((id) => ids.indexOf(id) % 3 === 0));
    const active = await collect('status=active&limit=5');
    expect(active).toHaveLength(16);

    const first = await app.api(apiKey, 'GET', '/v1/webhooks?status=paused&limit=2');
    const cursor = encodeURIComponent(first.body.nextCursor);
    for (const other of ['', 'status=active&', 'status=archived&']) {
      const res = await app.api(apiKey, 'GET', `/v1/webhooks?${other}cursor=${cursor}`);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_cursor');
    }
    expect((await app.api(apiKey, 'GET', `/v1/webhooks?status=paused&cursor=${cursor}`)).status).toBe(200);
    const bad = await app.api(apiKey, 'GET', '/v1/webhooks?status=deleted');
    expect(bad.body.error).toMatchObject({ code: 'invalid_request', param: 'status' });
  });

  it('refuses tampered, malformed and foreign cursors with 400 invalid_cursor', async () => {
    const first = await app.api(apiKey, 'GET', '/v1/webhooks?limit=2');
    const cursor: string = first.body.nextCursor;
    const [body, mac] = cursor.split('.');
    const forged = Buffer.from(JSON.stringify({ p: ids[0] })).toString('base64url');
    const flipped = mac.slice(0, -1) + (mac.endsWith('A') ? 'B' : 'A');
    for (const bad of [`${forged}.${mac}`, `${body}.${flipped}`, 'garbage', `${cursor}.x`, body]) {
      const res = await app.api(apiKey, 'GET', `/v1/webhooks?cursor=${encodeURIComponent(bad)}`);
      expect(res.status, bad).toBe(400);
      expect(res.body.error.code).toBe('invalid_cursor');
    }
    const other = await app.project('free');
    const foreign = await app.api(other.apiKey, 'GET', `/v1/webhooks?cursor=${encodeURIComponent(cursor)}`);
    expect(foreign.status).toBe(400);
    expect(foreign.body.error.code).toBe('invalid_cursor');
  });
});
