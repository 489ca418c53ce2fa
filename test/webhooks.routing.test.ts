import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './support/app.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

let app: TestApp;
let starter: string;
let free: string;
beforeAll(async () => {
  app = await startTestApp();
  starter = (await app.project('starter')).apiKey;
  free = (await app.project('free')).apiKey;
});
afterAll(async () => {
  await app?.stop();
});

async function webhookWithDestinations(apiKey: string) {
  const wh = await createWebhook(app, apiKey);
  const add = async (name: string) =>
    (await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/destinations`, { name, type: 'webhook', config: { url: `https://example.com/${name}` } })).body;
  const def = (await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/destinations`)).body.items[0];
  return { wh, def, orders: await add('orders'), big: await add('big'), eu: await add('eu') };
}

const probe = (apiKey: string, id: string, body: Record<string, unknown>) => app.api(apiKey, 'POST', `/v1/webhooks/${id}/test-delivery`, body);

describe('routing', () => {
  it('runs rules in ascending priority; the first match picks the destination, none picks the default', async () => {
    const { wh, def, orders, big, eu } = await webhookWithDestinations(free);
    const put = await app.api(free, 'PUT', `/v1/webhooks/${wh.id}/routing`, {
      rules: [
        { name: 'orders', priority: 20, match: { 'body.type': 'order.created' }, destinationId: orders.id },
        { name: 'big', priority: 10, match: { 'body.amount': { $gte: 1000 } }, destinationId: big.id },
        { name: 'eu', priority: 30, match: { 'headers.x-region': 'eu', method: 'PUT', 'query.src': { $in: ['a', 'b'] } }, destinationId: eu.id },
      ],
    });
    expect(put.status).toBe(200);
    expect(put.body.rules.map((r: any) => r.name)).toEqual(['big', 'orders', 'eu']);
    expect((await app.api(free, 'GET', `/v1/webhooks/${wh.id}/routing`)).body).toEqual(put.body);

    const cases: [Record<string, unknown>, string, string | null][] = [
      [{ body: { type: 'order.created', amount: 5 } }, orders.id, 'orders'],
      [{ body: { type: 'order.created', amount: 5000 } }, big.id, 'big'],
      [{ body: '{"amount": 2000}' }, big.id, 'big'],
      [{ method: 'PUT', headers: { 'X-Region': 'eu' }, query: { src: 'b' }, body: 'plain text' }, eu.id, 'eu'],
      [{ method: 'POST', headers: { 'X-Region': 'eu' }, query: { src: 'b' } }, def.id, null],
      [{ body: { type: 'other' } }, def.id, null],
    ];
    for (const [ctx, destinationId, rule] of cases) {
      const res = await probe(free, wh.id, ctx);
      expect(res.status).toBe(200);
      expect(res.body.destination.id, JSON.stringify(ctx)).toBe(destinationId);
      expect(res.body.matchedRule?.name ?? null).toBe(rule);
      expect(res.body.transformed).toBe(false);
    }
  });

  it('routes ingested events the same way and snapshots the destination on the delivery', async () => {
    const { apiKey } = await ingestingProject(app);
    const { wh, def, orders } = await webhookWithDestinations(apiKey);
    await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/routing`, {
      rules: [{ name: 'orders', priority: 1, match: { $or: [{ 'body.type': 'order.created' }, { path: '/orders' }] }, destinationId: orders.id }],
    });
    const auth = { 'x-webhook-secret': wh.ingestSecret };
    const routed = [
      await ingest(app, wh.publicId, { headers: auth, body: '{"type":"order.created"}' }),
      await ingest(app, wh.publicId, { headers: auth, path: '/orders', body: 'x' }),
      await ingest(app, wh.publicId, { headers: auth, body: '{"type":"refund"}' }),
    ];
    const { rows } = await app.rt.db.pool.query('SELECT id, destination_id, destination FROM deliveries WHERE id = ANY($1) ', [routed.map((r) => r.body.deliveryId)]);
    const byId = new Map(rows.map((r) => [r.id, r]));
    expect(byId.get(routed[0].body.deliveryId).destination_id).toBe(orders.id);
    expect(byId.get(routed[1].body.deliveryId).destination_id).toBe(orders.id);
    expect(byId.get(routed[2].body.deliveryId).destination_id).toBe(def.id);
    expect(byId.get(routed[0].body.deliveryId).destination).toEqual({ id: orders.id, name: 'orders', type: 'webhook', config: { url: 'https://example.com/orders', method: 'POST' } });
  });

  it('refuses invalid rules with 400 naming the rule', async () => {
    const { wh, orders } = await webhookWithDestinations(free);
    const other = await createWebhook(app, free);
    const foreignDest = (await app.api(free, 'GET', `/v1/webhooks/${other.id}/destinations`)).body.items[0];
    const rule = { name: 'r', priority: 1, match: {}, destinationId: orders.id };
    const bad: [unknown, string][] = [
      [[{ ...rule, match: { a: { $foo: 1 } } }], 'rules[0].match'],
      [[{ ...rule, match: { $where: 'true' } }], 'rules[0].match'],
      [[rule, { ...rule, name: 's', match: { a: { $regex: '(' } } }], 'rules[1].match'],
      [[{ ...rule, destinationId: 'dst_nope' }], 'rules[0].destinationId'],
      [[{ ...rule, destinationId: foreignDest.id }], 'rules[0].destinationId'],
      [[rule, { ...rule }], 'rules[1].name'],
      [[{ ...rule, priority: 1.5 }], 'rules[0].priority'],
      [[{ ...rule, extra: true }], 'rules[0].extra'],
      [[{ name: 'r', priority: 1, match: {} }], 'rules[0].destinationId'],
    ];
    for (const [rules, param] of bad) {
      const res = await app.api(free, 'PUT', `/v1/webhooks/${wh.id}/routing`, { rules });
      expect(res.status, JSON.stringify(rules)).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param });
    }
    expect((await app.api(free, 'GET', `/v1/webhooks/${wh.id}/routing`)).body).toEqual({ rules: [] });
  });
});

describe('transform', () => {
  it('stores a JSONata transform (Starter+), applies it in test-delivery, and removes it with kind null', async () => {
    const wh = await createWebhook(app, starter);
    const none = { kind: null, expression: null, automationId: null, version: null };
    expect((await app.api(starter, 'GET', `/v1/webhooks/${wh.id}/transform`)).body).toEqual(none);
    const expression = '{"id": order.id, "total": $sum(order.items.price)}';
    const put = await app.api(starter, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'jsonata', expression });
    expect(put.status).toBe(200);
    expect(put.body).toEqual({ kind: 'jsonata', expression, automationId: null, version: null });
    expect((await app.api(starter, 'GET', `/v1/webhooks/${wh.id}/transform`)).body).toEqual({ kind: 'jsonata', expression, automationId: null, version: null });

    const res = await probe(starter, wh.id, {
      method: 'post',
      headers: { 'User-Agent': 'probe/1' },
      contentType: 'application/json',
      body: { order: { id: 'o1', items: [{ price: 2 }, { price: 3 }] } },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ transformed: true, transformError: null, matchedRule: null, payload: { id: 'o1', total: 5 } });
    expect(res.body.destination.isDefault).toBe(true);
    // A string body is the raw payload, as ingest stores it.
    const fromText = await probe(starter, wh.id, { body: '{"order":{"id":"o2","items":[{"price":1}]}}' });
    expect(fromText.body).toMatchObject({ transformed: true, payload: { id: 'o2', total: 1 } });
    const notJson = await probe(starter, wh.id, { body: 'plain text' });
    expect(notJson.body).toMatchObject({ transformed: true, payload: null, transformError: 'transform failed: the payload is not JSON' });

    const removed = await app.api(starter, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: null });
    expect(removed.body).toEqual(none);
    const plain = await probe(starter, wh.id, { body: { a: 1 } });
    expect(plain.body).toMatchObject({ transformed: false, payload: { a: 1 } });
  });

  it('reports a transform that fails at run time instead of failing the probe', async () => {
    const wh = await createWebhook(app, starter);
    await app.api(starter, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'jsonata', expression: '$error("nope")' });
    const res = await probe(starter, wh.id, { body: {} });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ transformed: true, payload: null, transformError: expect.stringContaining('nope') });
  });

  it('validates the expression and the kind, after the tier gate', async () => {
    const wh = await createWebhook(app, starter);
    const broken = await app.api(starter, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'jsonata', expression: '{"a": ' });
    expect(broken.body.error).toMatchObject({ code: 'invalid_request', param: 'expression' });
    expect((await app.api(starter, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'jsonata' })).body.error.param).toBe('expression');
    expect((await app.api(starter, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'xslt', expression: 'x' })).body.error.param).toBe('kind');
    expect((await app.api(starter, 'PUT', `/v1/webhooks/${wh.id}/transform`, {})).body.error.param).toBe('kind');
    // An Automation transform names one of the project's automations (docs/automations.md).
    const automation = await app.api(starter, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'automation', automationId: 'aut_1', version: 1 });
    expect(automation.status).toBe(404);
    expect((await app.api(starter, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'automation', expression: 'x', automationId: 'aut_1' })).body.error.param).toBe('expression');

    const freeHook = await createWebhook(app, free);
    const gated = await app.api(free, 'PUT', `/v1/webhooks/${freeHook.id}/transform`, { kind: 'jsonata', expression: '{"a": ' });
    expect(gated.status).toBe(403);
    expect(gated.body.error).toMatchObject({ code: 'tier_required', feature: 'classic_transforms', requiredTier: 'starter' });
    expect((await app.api(free, 'PUT', `/v1/webhooks/${freeHook.id}/transform`, { kind: null })).status).toBe(200);
  });
});

describe('test-delivery', () => {
  it('creates no delivery history', async () => {
    const wh = await createWebhook(app, free);
    const counts = async () =>
      (await app.rt.db.pool.query(`SELECT (SELECT count(*) FROM events)::int AS e, (SELECT count(*) FROM deliveries)::int AS d, (SELECT count(*) FROM graphile_worker._private_jobs)::int AS j`)).rows[0];
    const before = await counts();
    for (let i = 0; i < 3; i++) expect((await probe(free, wh.id, { body: { i } })).status).toBe(200);
    expect(await counts()).toEqual(before);
  });

  it('validates the probe and answers 404 for other projects', async () => {
    const wh = await createWebhook(app, free);
    expect((await probe(free, wh.id, { query: 'a=b' })).body.error).toMatchObject({ code: 'invalid_request', param: 'query' });
    expect((await probe(free, wh.id, { channel: 'pigeon' })).body.error).toMatchObject({ code: 'invalid_request', param: 'channel' });
    expect((await probe(free, wh.id, { unknown: 1 })).body.error).toMatchObject({ code: 'invalid_request', param: 'unknown' });
    expect((await probe(starter, wh.id, {})).status).toBe(404);
  });
});
