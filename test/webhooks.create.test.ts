import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decryptSecret } from '../src/encryption.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { createWebhook } from './support/webhooks.ts';

let app: TestApp;
let free: string;
let starter: string;
let pro: string;
beforeAll(async () => {
  app = await startTestApp();
  free = (await app.project('free')).apiKey;
  starter = (await app.project('starter')).apiKey;
  pro = (await app.project('pro')).apiKey;
});
afterAll(async () => {
  await app?.stop();
});

const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;

describe('creating a webhook', () => {
  it('returns the addresses and both secrets, with the contract defaults', async () => {
    const wh = await createWebhook(app, free, { name: 'orders' });
    expect(wh.id).toMatch(/^wh_/);
    expect(wh.publicId).toMatch(/^hook_[0-9a-f]{32}$/);
    expect(wh).toMatchObject({
      name: 'orders',
      status: 'active',
      ingestUrl: `http://127.0.0.1:3000/i/${wh.publicId}`,
      formIngestUrl: `http://127.0.0.1:3000/f/${wh.publicId}`,
      emailIngestAddress: `${wh.publicId}@ingest.test`,
      deliveryMode: 'parallel',
      maxInFlight: 10,
      timeoutMs: 10000,
      retryPolicy: { maxAttempts: 6, backoff: 'exponential', initialDelayMs: 5000, maxDelayMs: 3600000, jitter: true, retryOn: ['408', '429', '5xx', 'network', 'timeout'] },
      defaultDelaySeconds: null,
      throttleRatePerSecond: null,
      customHeaders: {},
    });
    expect(wh.ingestSecret).toMatch(SECRET);
    expect(wh.signingSecret).toMatch(SECRET);
    expect(Buffer.from(wh.ingestSecret.slice(6), 'base64')).toHaveLength(32);
    expect(wh.ingestSecret).not.toBe(wh.signingSecret);
    expect(new Date(wh.createdAt as string).toISOString()).toBe(wh.createdAt);

    const dests = await app.api(free, 'GET', `/v1/webhooks/${wh.id}/destinations`);
    expect(dests.body.items).toEqual([expect.objectContaining({ type: 'webhook', isDefault: true, config: { url: 'https://example.com/hook', method: 'POST' } })]);
  });

  it('shows the secrets only on create, and stores them encrypted', async () => {
    const wh = await createWebhook(app, free);
    const got = await app.api(free, 'GET', `/v1/webhooks/${wh.id}`);
    expect(got.body).not.toHaveProperty('ingestSecret');
    expect(got.body).not.toHaveProperty('signingSecret');
    const list = await app.api(free, 'GET', '/v1/webhooks');
    expect(JSON.stringify(list.body)).not.toContain(wh.ingestSecret);
    const rows = await app.rt.db.prisma.webhookSecret.findMany({ where: { webhookId: wh.id }, orderBy: { kind: 'asc' } });
    expect(rows.map((r) => [r.kind, r.version])).toEqual([['ingest', 1], ['signing', 1]]);
    expect(JSON.stringify(rows)).not.toContain(wh.ingestSecret.slice(6));
    expect(decryptSecret(rows[0].secretEnc)).toBe(wh.ingestSecret);
    expect(decryptSecret(rows[1].secretEnc)).toBe(wh.signingSecret);
  });

  it('works the same over GraphQL; only CreatedWebhook has secret fields', async () => {
    const created = await app.api(free, 'POST', '/graphql', {
      query: 'mutation { createWebhook(name: "gql", url: "https://example.com/g", maxInFlight: 5) { id status maxInFlight ingestSecret signingSecret retryPolicy { maxAttempts } } }',
    });
    const wh = created.body.data.createWebhook;
    expect(wh).toMatchObject({ status: 'active', maxInFlight: 5, retryPolicy: { maxAttempts: 6 } });
    expect(wh.ingestSecret).toMatch(SECRET);
    const refused = await app.api(free, 'POST', '/graphql', { query: `{ webhook(id: "${wh.id}") { id ingestSecret } }` });
    expect(refused.body.data).toBeUndefined();
    expect(refused.body.errors[0].message).toContain('ingestSecret');
    const bad = await app.api(free, 'POST', '/graphql', { query: 'mutation { createWebhook(url: "https://example.com", timeoutMs: 5) { id } }' });
    expect(bad.body.errors[0].extensions).toMatchObject({ code: 'invalid_request', param: 'timeoutMs' });
  });

  it('fills left-out retry policy fields with the defaults', async () => {
    const wh = await createWebhook(app, starter, { retryPolicy: { maxAttempts: 3, backoff: 'linear' } });
    expect(wh.retryPolicy).toEqual({ maxAttempts: 3, backoff: 'linear', initialDelayMs: 5000, maxDelayMs: 3600000, jitter: true, retryOn: ['408', '429', '5xx', 'network', 'timeout'] });
    const fixed = await createWebhook(app, starter, { retryPolicy: { backoff: 'fixed', retryOn: ['5xx'], jitter: false } });
    expect(fixed.retryPolicy).toMatchObject({ backoff: 'fixed', retryOn: ['5xx'], jitter: false, maxAttempts: 6 });
  });

  it('accepts every control at its bounds on Pro', async () => {
    const low = await createWebhook(app, pro, {
      deliveryMode: 'strict_fifo',
      maxInFlight: 1,
      timeoutMs: 1000,
      retryPolicy: { maxAttempts: 1, initialDelayMs: 100 },
      defaultDelaySeconds: 0,
      throttleRatePerSecond: 1,
      customHeaders: { 'x-team': 'billing' },
    });
    expect(low).toMatchObject({ deliveryMode: 'strict_fifo', maxInFlight: 1, timeoutMs: 1000, defaultDelaySeconds: 0, throttleRatePerSecond: 1, customHeaders: { 'x-team': 'billing' } });
    const high = await createWebhook(app, pro, {
      maxInFlight: 100,
      timeoutMs: 60000,
      retryPolicy: { maxAttempts: 20, initialDelayMs: 3600000 },
      defaultDelaySeconds: 604800,
      throttleRatePerSecond: 1000,
    });
    expect(high).toMatchObject({ maxInFlight: 100, timeoutMs: 60000, defaultDelaySeconds: 604800, throttleRatePerSecond: 1000 });
    expect(high.retryPolicy).toMatchObject({ maxAttempts: 20, initialDelayMs: 3600000 });
  });

  const outOfRange: [Record<string, unknown>, string][] = [
    [{ maxInFlight: 0 }, 'maxInFlight'],
    [{ maxInFlight: 101 }, 'maxInFlight'],
    [{ timeoutMs: 999 }, 'timeoutMs'],
    [{ timeoutMs: 60001 }, 'timeoutMs'],
    [{ defaultDelaySeconds: -1 }, 'defaultDelaySeconds'],
    [{ defaultDelaySeconds: 604801 }, 'defaultDelaySeconds'],
    [{ throttleRatePerSecond: 0 }, 'throttleRatePerSecond'],
    [{ throttleRatePerSecond: 1001 }, 'throttleRatePerSecond'],
    [{ deliveryMode: 'random' }, 'deliveryMode'],
    [{ retryPolicy: { maxAttempts: 0 } }, 'retryPolicy.maxAttempts'],
    [{ retryPolicy: { maxAttempts: 21 } }, 'retryPolicy.maxAttempts'],
    [{ retryPolicy: { backoff: 'random' } }, 'retryPolicy.backoff'],
    [{ retryPolicy: { initialDelayMs: 99 } }, 'retryPolicy.initialDelayMs'],
    [{ retryPolicy: { initialDelayMs: 3600001 } }, 'retryPolicy.initialDelayMs'],
    [{ retryPolicy: { initialDelayMs: 5000, maxDelayMs: 1000 } }, 'retryPolicy.maxDelayMs'],
    [{ retryPolicy: { retryOn: ['500'] } }, 'retryPolicy.retryOn[0]'],
    [{ retryPolicy: { retryOn: ['5xx', '5xx'] } }, 'retryPolicy.retryOn'],
    [{ retryPolicy: { color: 'red' } }, 'retryPolicy.color'],
    [{ customHeaders: { 'bad header': 'x' } }, 'customHeaders.bad header'],
    [{ customHeaders: { 'webhook-signature': 'x' } }, 'customHeaders.webhook-signature'],
    [{ customHeaders: { 'x-a': 5 } }, 'customHeaders.x-a'],
    [{ color: 'red' }, 'color'],
    [{ url: 'ftp://example.com/x' }, 'url'],
    [{ url: 'not a url' }, 'url'],
    [{ url: null, destination: null }, 'url'],
    [{ destination: { type: 'webhook', config: { url: 'https://example.com' } } }, 'destination'],
  ];
  for (const [body, param] of outOfRange) {
    it(`refuses ${JSON.stringify(body)} with 400 naming ${param}`, async () => {
      const res = await app.api(pro, 'POST', '/v1/webhooks', { url: 'https://example.com/hook', ...body });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param });
      expect(typeof res.body.error.message).toBe('string');
    });
  }

  it('takes a whole destination object instead of url', async () => {
    const wh = await createWebhook(app, pro, {
      url: undefined,
      destination: { name: 'queue', type: 'aws_sqs', config: { queueUrl: 'https://sqs.eu-west-1.amazonaws.com/1/q', region: 'eu-west-1' } },
    });
    const dests = await app.api(pro, 'GET', `/v1/webhooks/${wh.id}/destinations`);
    expect(dests.body.items).toEqual([expect.objectContaining({ name: 'queue', type: 'aws_sqs', isDefault: true })]);
  });

  it('is all-or-nothing: a bad destination leaves no webhook behind', async () => {
    const { apiKey, projectId } = await app.project('pro');
    const res = await app.api(apiKey, 'POST', '/v1/webhooks', { destination: { type: 'aws_sqs', config: { region: 'eu-west-1' } } });
    expect(res.status).toBe(400);
    expect(res.body.error.param).toBe('destination.config.queueUrl');
    expect(await app.rt.db.prisma.webhook.count({ where: { projectId } })).toBe(0);

    // A failure inside the transaction (here a duplicate public id forced by a trigger) also rolls back.
    const db = app.rt.db.pool;
    await db.query(`CREATE FUNCTION fail_destination() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected'; END $$`);
    await db.query(`CREATE TRIGGER fail_destination BEFORE INSERT ON destinations FOR EACH ROW EXECUTE FUNCTION fail_destination()`);
    try {
      const failed = await app.api(apiKey, 'POST', '/v1/webhooks', { url: 'https://example.com/hook' });
      expect(failed.status).toBe(500);
      expect(failed.body).toEqual({ error: { code: 'internal', message: expect.any(String) } });
    } finally {
      await db.query('DROP TRIGGER fail_destination ON destinations');
      await db.query('DROP FUNCTION fail_destination()');
    }
    expect(await app.rt.db.prisma.webhook.count({ where: { projectId } })).toBe(0);
    expect(await db.query('SELECT 1 FROM webhook_secrets s LEFT JOIN webhooks w ON w.id = s.webhook_id WHERE w.id IS NULL')).toMatchObject({ rowCount: 0 });
  });
});

describe('tier gates', () => {
  const gated: [Record<string, unknown>, string, string][] = [
    [{ retryPolicy: { maxAttempts: 3 } }, 'custom_retry_policy', 'starter'],
    [{ customHeaders: { 'x-a': 'b' } }, 'custom_headers', 'starter'],
    [{ deliveryMode: 'strict_fifo' }, 'strict_fifo', 'pro'],
    [{ defaultDelaySeconds: 60 }, 'default_delay', 'pro'],
    [{ throttleRatePerSecond: 5 }, 'throttling', 'pro'],
    [{ url: null, destination: { type: 'aws_sqs', config: { queueUrl: 'https://sqs.x/q', region: 'x' } } }, 'typed_destinations', 'pro'],
  ];
  for (const [body, feature, requiredTier] of gated) {
    it(`${feature} needs ${requiredTier}`, async () => {
      const res = await app.api(free, 'POST', '/v1/webhooks', { url: 'https://example.com/hook', ...body });
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({ code: 'tier_required', feature, requiredTier });
      if (requiredTier === 'pro') expect((await app.api(starter, 'POST', '/v1/webhooks', { url: 'https://example.com/hook', ...body })).status).toBe(403);
      else expect((await app.api(starter, 'POST', '/v1/webhooks', { url: 'https://example.com/hook', ...body })).status).toBe(201);
      expect((await app.api(pro, 'POST', '/v1/webhooks', { url: 'https://example.com/hook', ...body })).status).toBe(201);
    });
  }

  it('lets every tier send the default values explicitly', async () => {
    await createWebhook(app, free, {
      deliveryMode: 'parallel',
      retryPolicy: { maxAttempts: 6, backoff: 'exponential', retryOn: ['5xx', '408', '429', 'timeout', 'network'] },
      customHeaders: {},
      defaultDelaySeconds: null,
      throttleRatePerSecond: null,
    });
  });

  it('checks the tier before validating the gated fields (403 before 400)', async () => {
    const res = await app.api(free, 'POST', '/v1/webhooks', { url: 'https://example.com/hook', retryPolicy: { maxAttempts: 99 } });
    expect(res.status).toBe(403);
    const res2 = await app.api(free, 'POST', '/v1/webhooks', { url: 'https://example.com/hook', defaultDelaySeconds: -5 });
    expect(res2.status).toBe(403);
    const res3 = await app.api(free, 'POST', '/v1/webhooks', { destination: { type: 'gcp_pubsub', config: {} } });
    expect(res3.status).toBe(403);
  });

  it('gates updates the same way', async () => {
    const wh = await createWebhook(app, free);
    const res = await app.api(free, 'PATCH', `/v1/webhooks/${wh.id}`, { deliveryMode: 'strict_fifo' });
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ code: 'tier_required', feature: 'strict_fifo', requiredTier: 'pro' });
  });
});

describe('updating a webhook', () => {
  it('changes only what is sent; null resets nullable controls', async () => {
    const wh = await createWebhook(app, pro, { defaultDelaySeconds: 30, throttleRatePerSecond: 5, customHeaders: { 'x-a': 'b' } });
    const patched = await app.api(pro, 'PATCH', `/v1/webhooks/${wh.id}`, { name: 'renamed', maxInFlight: 3 });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ name: 'renamed', maxInFlight: 3, defaultDelaySeconds: 30, throttleRatePerSecond: 5, customHeaders: { 'x-a': 'b' } });
    expect(patched.body).not.toHaveProperty('ingestSecret');
    const reset = await app.api(pro, 'PATCH', `/v1/webhooks/${wh.id}`, { defaultDelaySeconds: null, throttleRatePerSecond: null, customHeaders: {} });
    expect(reset.body).toMatchObject({ defaultDelaySeconds: null, throttleRatePerSecond: null, customHeaders: {}, maxInFlight: 3 });
    const bad = await app.api(pro, 'PATCH', `/v1/webhooks/${wh.id}`, { timeoutMs: 5 });
    expect(bad.body.error).toMatchObject({ code: 'invalid_request', param: 'timeoutMs' });
    const nulled = await app.api(pro, 'PATCH', `/v1/webhooks/${wh.id}`, { maxInFlight: null });
    expect(nulled.body.error).toMatchObject({ code: 'invalid_request', param: 'maxInFlight' });
  });

  it('points the default destination elsewhere with url, keeping it a webhook destination', async () => {
    const wh = await createWebhook(app, pro);
    expect((await app.api(pro, 'PATCH', `/v1/webhooks/${wh.id}`, { url: 'http://example.org/new' })).status).toBe(200);
    const dests = await app.api(pro, 'GET', `/v1/webhooks/${wh.id}/destinations`);
    expect(dests.body.items[0]).toMatchObject({ isDefault: true, type: 'webhook', config: { url: 'http://example.org/new' } });
    const bad = await app.api(pro, 'PATCH', `/v1/webhooks/${wh.id}`, { url: 'gopher://x' });
    expect(bad.body.error).toMatchObject({ code: 'invalid_request', param: 'url' });
  });

  it('stays editable while paused', async () => {
    const wh = await createWebhook(app, pro);
    await app.api(pro, 'POST', `/v1/webhooks/${wh.id}/pause`);
    const res = await app.api(pro, 'PATCH', `/v1/webhooks/${wh.id}`, { timeoutMs: 2000 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'paused', timeoutMs: 2000 });
  });
});
