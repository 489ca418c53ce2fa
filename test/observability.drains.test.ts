import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDrainClient, planDrainSends, sendDrain } from '../src/drains/send.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { startReceiver, type Received } from './support/receiver.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

let app: TestApp;
let target: Awaited<ReturnType<typeof startReceiver>>;
let drainSink: Awaited<ReturnType<typeof startReceiver>>;
/** While set, the drain endpoint answers 500. */
let failing = false;
/** The drain requests answered 500. */
const refused = new Set<Received>();

beforeAll(async () => {
  app = await startTestApp({ worker: true, config: { DRAIN_RETRY_BASE_MS: 100, DRAIN_RETRY_MAX_MS: 400, DRAIN_OUTBOX_LIMIT: 100 } });
  target = await startReceiver(() => ({ status: 200 }));
  drainSink = await startReceiver((r) => {
    if (failing) refused.add(r);
    return { status: failing ? 500 : 200 };
  });
});
afterAll(async () => {
  await app?.stop();
  await target?.close();
  await drainSink?.close();
});

const events = (rs: Received[], path: string) =>
  rs.filter((r) => r.url === path).flatMap((r) => (JSON.parse(r.body.toString()) as { events: any[] }).events);

describe('event drains', () => {
  it('tier counts: 403 below Pro, 1 on Pro, 3 on Business, unlimited on Enterprise (409 quota_exceeded event_drains)', async () => {
    for (const tier of ['free', 'starter']) {
      const { apiKey } = await app.project(tier);
      const res = await app.api(apiKey, 'POST', '/v1/project/drains', { url: drainSink.url });
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({ code: 'tier_required', requiredTier: 'pro' });
      expect((await app.api(apiKey, 'GET', '/v1/project/drains')).status).toBe(403);
    }
    for (const [tier, limit] of [['pro', 1], ['business', 3]] as const) {
      const { apiKey } = await app.project(tier);
      for (let i = 0; i < limit; i++) expect((await app.api(apiKey, 'POST', '/v1/project/drains', { url: drainSink.url })).status).toBe(201);
      const over = await app.api(apiKey, 'POST', '/v1/project/drains', { url: drainSink.url });
      expect(over.status).toBe(409);
      expect(over.body.error).toMatchObject({ code: 'quota_exceeded', quota: 'event_drains', scope: 'project', limit, current: limit, delta: 1 });
    }
    const { apiKey } = await app.project('enterprise');
    for (let i = 0; i < 5; i++) expect((await app.api(apiKey, 'POST', '/v1/project/drains', { url: drainSink.url })).status).toBe(201);
  });

  it('create (secret once), get, list, patch, rotate, delete; validation', async () => {
    const { apiKey } = await app.project('pro');
    expect((await app.api(apiKey, 'POST', '/v1/project/drains', { url: 'ftp://x' })).body.error).toMatchObject({ code: 'invalid_request', param: 'url' });
    expect((await app.api(apiKey, 'POST', '/v1/project/drains', { url: drainSink.url, events: ['nope'] })).body.error).toMatchObject({ code: 'invalid_request', param: 'events[0]' });
    const created = await app.api(apiKey, 'POST', '/v1/project/drains', { name: 'audit', url: drainSink.url, events: ['delivery.failed', 'dlq.added'] });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'audit', url: drainSink.url, events: ['delivery.failed', 'dlq.added'], enabled: true });
    expect(created.body.id).toMatch(/^drn_/);
    expect(created.body.signingSecret).toMatch(/^whsec_/);
    const got = await app.api(apiKey, 'GET', `/v1/project/drains/${created.body.id}`);
    expect(got.body.signingSecret).toBeUndefined();
    expect(got.body).toMatchObject({ id: created.body.id, createdAt: created.body.createdAt });
    const list = await app.api(apiKey, 'GET', '/v1/project/drains');
    expect(list.body.items.map((d: any) => d.id)).toEqual([created.body.id]);
    const patched = await app.api(apiKey, 'PATCH', `/v1/project/drains/${created.body.id}`, { enabled: false, events: ['webhook.changed'] });
    expect(patched.body).toMatchObject({ enabled: false, events: ['webhook.changed'] });
    const rotated = await app.api(apiKey, 'POST', `/v1/project/drains/${created.body.id}/rotate-secret`, { graceSeconds: 0 });
    expect(rotated.status).toBe(200);
    expect(rotated.body.signingSecret).toMatch(/^whsec_/);
    expect(rotated.body.signingSecret).not.toBe(created.body.signingSecret);
    const other = await app.project('pro');
    expect((await app.api(other.apiKey, 'GET', `/v1/project/drains/${created.body.id}`)).status).toBe(404);
    expect((await app.api(apiKey, 'DELETE', `/v1/project/drains/${created.body.id}`)).body).toEqual({ id: created.body.id, deleted: true });
    expect((await app.api(apiKey, 'GET', `/v1/project/drains/${created.body.id}`)).status).toBe(404);
  });

  it('sends signed batches that verify with standardwebhooks, in order, and survives an endpoint failing for a while without slowing deliveries', async () => {
    const { apiKey } = await ingestingProject(app);
    const path = '/drain-a';
    const drain = await app.api(apiKey, 'POST', '/v1/project/drains', { url: `${drainSink.url}${path}` });
    const secret = drain.body.signingSecret as string;
    const wh = await createWebhook(app, apiKey, { url: target.url });

    // The endpoint fails first: deliveries go on at their own pace meanwhile, and the drain is retried.
    failing = true;
    for (let n = 0; n < 5; n++) expect((await ingest(app, wh.publicId, { body: JSON.stringify({ n }), headers: { authorization: `Bearer ${wh.ingestSecret}` } })).status).toBe(202);
    await waitFor(async () => (await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/deliveries`)).body.items.filter((d: any) => d.status === 'succeeded').length === 5, 10_000);
    await waitFor(() => drainSink.received.filter((r) => r.url === path).length >= 3, 10_000);
    expect(events(drainSink.received, path).length).toBeGreaterThan(0);
    expect((await app.api(apiKey, 'GET', `/v1/project/drains/${drain.body.id}`)).body.lastError).toBe('HTTP 500');
    failing = false;

    // Then a webhook change, and the endpoint recovers: everything arrives, in order.
    expect((await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/pause`)).status).toBe(200);
    const got = (await waitFor(() => {
      const ok = drainSink.received.filter((r) => r.url === path && !refused.has(r));
      const evs = ok.flatMap((r) => JSON.parse(r.body.toString()).events);
      return evs.some((e: any) => e.kind === 'webhook.changed' && e.data.status === 'paused') ? { requests: ok, evs } : null;
    }, 15_000))!;
    for (const r of got.requests) {
      const verified = new Webhook(secret).verify(r.body.toString(), r.headers as Record<string, string>) as { events: unknown[] };
      expect(verified.events.length).toBeGreaterThan(0);
      expect(verified.events.length).toBeLessThanOrEqual(100);
    }
    const kinds = got.evs.map((e: any) => e.kind);
    expect(kinds.filter((k: string) => k === 'attempt.finished')).toHaveLength(5);
    expect(kinds.filter((k: string) => k === 'delivery.succeeded')).toHaveLength(5);
    expect(kinds.at(-1)).toBe('webhook.changed');
    expect(new Set(got.evs.map((e: any) => e.id)).size).toBe(got.evs.length);
    const e = got.evs.find((x: any) => x.kind === 'delivery.succeeded');
    expect(e).toMatchObject({ projectId: expect.any(String), webhookId: wh.id, data: { status: 'succeeded', statusCode: 200 } });
    expect(e.id).toMatch(/^dre_/);
    const change = got.evs.at(-1);
    expect(change.data).toMatchObject({ status: 'paused', previousStatus: 'active' });
    // Per delivery: attempt.finished before delivery.succeeded; overall, occurredAt never goes back.
    const times = got.evs.map((x: any) => Date.parse(x.occurredAt));
    expect(times).toEqual([...times].sort((a, b) => a - b));
    // Acknowledged batches leave the outbox (right after the answer).
    await waitFor(async () => (await app.rt.db.pool.query('SELECT count(*)::int AS n FROM drain_outbox WHERE drain_id = $1', [drain.body.id])).rows[0].n === 0, 5_000);
  }, 30_000);

  it('keeps the outbox bounded: past the bound the oldest are dropped and counted', async () => {
    const { apiKey, projectId } = await app.project('pro');
    const drain = await app.api(apiKey, 'POST', '/v1/project/drains', { url: `${drainSink.url}/bounded`, enabled: false });
    await app.rt.db.pool.query(
      `INSERT INTO drain_outbox (drain_id, event_id, kind, project_id, data, occurred_at)
       SELECT $1, 'dre_' || g, 'webhook.changed', $2, jsonb_build_object('n', g), now() - interval '1 minute' FROM generate_series(1, 150) g`,
      [drain.body.id, projectId],
    );
    await app.rt.db.pool.query('UPDATE event_drains SET enabled = true WHERE id = $1', [drain.body.id]);
    failing = true;
    try {
      await sendDrain(app.rt, createDrainClient(app.rt), drain.body.id);
    } finally {
      failing = false;
    }
    // The runners' drain scheduler (planDrainSends, about once a second) holds the bound, whatever the backoff.
    await planDrainSends(app.rt);
    const rows = await waitFor(async () => {
      const { rows } = await app.rt.db.pool.query(`SELECT min((data->>'n')::int) AS lo, count(*)::int AS n FROM drain_outbox WHERE drain_id = $1`, [drain.body.id]);
      return rows[0].n <= 100 ? rows : null;
    }, 5_000);
    expect(rows![0]).toEqual({ lo: 51, n: 100 });
    const got = await app.api(apiKey, 'GET', `/v1/project/drains/${drain.body.id}`);
    expect(got.body).toMatchObject({ droppedCount: 50, lastError: 'HTTP 500' });
  });
});
