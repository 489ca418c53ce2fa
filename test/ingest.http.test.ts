import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './support/app.ts';
import { withinOneSecond } from './support/quota-fixtures.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

let app: TestApp;
let pro: string;
let wh: Awaited<ReturnType<typeof createWebhook>>;
let auth: Record<string, string>;
beforeAll(async () => {
  app = await startTestApp();
  // Enterprise has every Pro feature; its ingest rate is lifted so quick successions are not refused.
  ({ apiKey: pro } = await ingestingProject(app));
  wh = await createWebhook(app, pro);
  auth = { 'x-webhook-secret': wh.ingestSecret };
});
afterAll(async () => {
  await app?.stop();
});

const db = () => app.rt.db.pool;
const jobFor = async (deliveryId: string) =>
  (await db().query(`SELECT run_at FROM graphile_worker._private_jobs WHERE payload->>'deliveryId' = $1`, [deliveryId])).rows;

describe('HTTP ingest', () => {
  it('stores the event byte for byte and queues its delivery with a job, answering 202', async () => {
    const body = Buffer.from([0x00, 0xff, 0x10, 0x80, 0x7b]);
    const res = await ingest(app, wh.publicId, {
      method: 'PUT',
      path: '/orders/42?x=1&x=2&y=z',
      body,
      headers: { ...auth, 'content-type': 'application/octet-stream', 'X-Custom': 'Yes' },
    });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ eventId: expect.stringMatching(/^evt_/), deliveryId: expect.stringMatching(/^del_/), status: 'queued' });

    const { rows: events } = await db().query('SELECT * FROM events WHERE id = $1', [res.body.eventId]);
    expect(events[0]).toMatchObject({
      webhook_id: wh.id,
      channel: 'http',
      method: 'PUT',
      path: '/orders/42',
      query: { x: ['1', '2'], y: 'z' },
      content_type: 'application/octet-stream',
      body_size: 5,
    });
    expect(Buffer.compare(events[0].body, body)).toBe(0);
    expect(events[0].headers['x-custom']).toBe('Yes');
    expect(events[0].payload_expires_at.getTime()).toBeGreaterThan(Date.now() + 13 * 86_400_000);

    const { rows: deliveries } = await db().query('SELECT * FROM deliveries WHERE id = $1', [res.body.deliveryId]);
    expect(deliveries[0]).toMatchObject({ event_id: res.body.eventId, webhook_id: wh.id, status: 'queued', destination: expect.objectContaining({ type: 'webhook' }) });
    expect(await jobFor(res.body.deliveryId)).toHaveLength(1);
  });

  it('takes any method but GET: GET is 405', async () => {
    for (const method of ['POST', 'PATCH', 'DELETE']) expect((await ingest(app, wh.publicId, { method, headers: auth })).status).toBe(202);
    const get = await ingest(app, wh.publicId, { method: 'GET', headers: auth });
    expect(get.status).toBe(405);
    expect(get.body.error.code).toBe('method_not_allowed');
  });

  it('answers 404 for unknown and archived webhooks, 409 webhook_paused while paused', async () => {
    const unknown = await ingest(app, 'hook_00000000000000000000000000000000', { headers: auth });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('not_found');
    expect((await ingest(app, '', { headers: auth })).status).toBe(404);

    const hook = await createWebhook(app, pro);
    const h = { 'x-webhook-secret': hook.ingestSecret };
    await app.api(pro, 'POST', `/v1/webhooks/${hook.id}/pause`);
    const paused = await ingest(app, hook.publicId, { headers: h });
    expect(paused.status).toBe(409);
    expect(paused.body.error.code).toBe('webhook_paused');
    // Authentication still comes first.
    expect((await ingest(app, hook.publicId, { headers: { 'x-webhook-secret': 'whsec_nope' } })).status).toBe(401);
    await app.api(pro, 'POST', `/v1/webhooks/${hook.id}/archive`);
    expect((await ingest(app, hook.publicId, { headers: h })).status).toBe(404);
    await app.api(pro, 'POST', `/v1/webhooks/${hook.id}/restore`);
    expect((await ingest(app, hook.publicId, { headers: h })).status).toBe(409);
    await app.api(pro, 'POST', `/v1/webhooks/${hook.id}/resume`);
    expect((await ingest(app, hook.publicId, { headers: h })).status).toBe(202);
  });

  it('accepts 10 MB and refuses more with 413, also when the body streams without a length', async () => {
    const tenMb = Buffer.alloc(10 * 1024 * 1024, 0x61);
    expect((await ingest(app, wh.publicId, { body: tenMb, headers: { ...auth, 'content-type': 'text/plain' } })).status).toBe(202);
    const over = await ingest(app, wh.publicId, { body: Buffer.alloc(10 * 1024 * 1024 + 1, 0x61), headers: auth });
    expect(over.status).toBe(413);
    expect(over.body.error.code).toBe('payload_too_large');

    const chunked = await new Promise<{ status: number; body: any }>((resolve, reject) => {
      const req = http.request(`${app.url}/i/${wh.publicId}`, { method: 'POST', headers: { ...auth, 'transfer-encoding': 'chunked' } }, (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      });
      req.on('error', reject);
      const chunk = Buffer.alloc(1024 * 1024, 0x62);
      let sent = 0;
      const pump = () => {
        while (sent < 12) {
          sent++;
          if (!req.write(chunk)) return void req.once('drain', pump);
        }
        req.end();
      };
      pump();
    });
    expect(chunked.status).toBe(413);
    expect(chunked.body.error.code).toBe('payload_too_large');
  });

  it('schedules with x-service-deliver-at (ISO 8601 or Unix seconds)', async () => {
    const at = new Date(Date.now() + 3600_000);
    at.setMilliseconds(0);
    for (const value of [at.toISOString(), String(at.getTime() / 1000), at.toISOString().replace('Z', '+00:00')]) {
      const res = await ingest(app, wh.publicId, { headers: { ...auth, 'x-service-deliver-at': value } });
      expect(res.status, value).toBe(202);
      expect(res.body.status).toBe('scheduled');
      const { rows } = await db().query('SELECT status, next_attempt_at FROM deliveries WHERE id = $1', [res.body.deliveryId]);
      expect(rows[0].status).toBe('scheduled');
      expect(rows[0].next_attempt_at.getTime()).toBe(at.getTime());
      expect((await jobFor(res.body.deliveryId))[0].run_at.getTime()).toBe(at.getTime());
    }
    const past = await ingest(app, wh.publicId, { headers: { ...auth, 'x-service-deliver-at': '2001-01-01T00:00:00Z' } });
    expect(past.body.status).toBe('queued');
  });

  it('refuses a junk x-service-deliver-at, and any on a strict_fifo webhook, with 400', async () => {
    for (const value of ['tomorrow', '12abc', '2026-13-45T00:00:00Z', '']) {
      const res = await ingest(app, wh.publicId, { headers: { ...auth, 'x-service-deliver-at': value } });
      expect(res.status, value).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'x-service-deliver-at' });
    }
    const fifo = await createWebhook(app, pro, { deliveryMode: 'strict_fifo' });
    const res = await ingest(app, fifo.publicId, { headers: { 'x-webhook-secret': fifo.ingestSecret, 'x-service-deliver-at': new Date(Date.now() + 60_000).toISOString() } });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'x-service-deliver-at' });
    expect((await ingest(app, fifo.publicId, { headers: { 'x-webhook-secret': fifo.ingestSecret } })).body.status).toBe('queued');
  });

  it('schedules by default with defaultDelaySeconds', async () => {
    const delayed = await createWebhook(app, pro, { defaultDelaySeconds: 120 });
    const before = Date.now();
    const res = await ingest(app, delayed.publicId, { headers: { 'x-webhook-secret': delayed.ingestSecret } });
    expect(res.body.status).toBe('scheduled');
    const runAt = (await jobFor(res.body.deliveryId))[0].run_at.getTime();
    expect(runAt).toBeGreaterThanOrEqual(before + 120_000 - 1000);
    expect(runAt).toBeLessThanOrEqual(Date.now() + 120_000 + 1000);
  });

  it('answers a quota refusal with the contract body, storing nothing for the refused request', async () => {
    const { apiKey: freeKey } = await app.project('free');
    const hook = await createWebhook(app, freeKey);
    const h = { 'x-webhook-secret': hook.ingestSecret };
    // Free: 3 requests per second. Five at once inside one second leave at least one refused.
    // Events stored by an earlier try that crossed a second boundary (withinOneSecond runs it again) are not this try's.
    const count = async () => (await db().query('SELECT count(*)::int AS n FROM events WHERE webhook_id = $1', [hook.id])).rows[0].n as number;
    let before = 0;
    const results = await withinOneSecond(async () => {
      before = await count();
      return Promise.all(Array.from({ length: 5 }, () => ingest(app, hook.publicId, { headers: h })));
    });
    const refused = results.filter((r) => r.status === 429);
    expect(results.filter((r) => r.status === 202)).toHaveLength(3);
    expect(refused).toHaveLength(2);
    expect(refused[0].body.error).toMatchObject({ code: 'quota_exceeded', quota: 'ingest_rate', scope: 'project', limit: 3 });
    expect(refused[0].headers.get('retry-after')).toBe('1');
    expect((await count()) - before).toBe(3);
  });

  it('stores the event and queues the delivery in one transaction: a failure after the event insert leaves neither', async () => {
    const hook = await createWebhook(app, pro);
    const count = async () =>
      (
        await db().query(
          `SELECT (SELECT count(*) FROM events WHERE webhook_id = $1)::int AS events,
                  (SELECT count(*) FROM deliveries WHERE webhook_id = $1)::int AS deliveries,
                  (SELECT count(*) FROM graphile_worker._private_jobs j WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.id = j.payload->>'deliveryId'))::int AS orphan_jobs`,
          [hook.id],
        )
      ).rows[0];
    // Fails the statement that follows the event insert (delivery row + job) for this webhook only.
    await db().query(`CREATE FUNCTION fail_delivery() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NOT EXISTS (SELECT 1 FROM events WHERE id = NEW.event_id) THEN RAISE EXCEPTION 'event missing'; END IF;
        IF NEW.webhook_id = '${hook.id}' THEN RAISE EXCEPTION 'injected failure'; END IF;
        RETURN NEW;
      END $$`);
    await db().query('CREATE TRIGGER fail_delivery AFTER INSERT ON deliveries FOR EACH ROW EXECUTE FUNCTION fail_delivery()');
    try {
      const res = await ingest(app, hook.publicId, { headers: { 'x-webhook-secret': hook.ingestSecret } });
      expect(res.status).toBe(500);
      expect(res.body).toEqual({ error: { code: 'internal', message: expect.any(String) } });
      expect(await count()).toEqual({ events: 0, deliveries: 0, orphan_jobs: 0 });
      // The trigger lets other webhooks through, and sees their event inserted first.
      expect((await ingest(app, wh.publicId, { headers: auth })).status).toBe(202);
    } finally {
      await db().query('DROP TRIGGER fail_delivery ON deliveries');
      await db().query('DROP FUNCTION fail_delivery()');
    }
    expect((await ingest(app, hook.publicId, { headers: { 'x-webhook-secret': hook.ingestSecret } })).status).toBe(202);
    expect(await count()).toEqual({ events: 1, deliveries: 1, orphan_jobs: 0 });
  });
});
