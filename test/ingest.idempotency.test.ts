// Idempotency keys on HTTP and form ingest (CONTRACT §12), over real HTTP on a real PostgreSQL.
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runRetention } from '../src/retention/run.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { capturedStatements } from './support/statements.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
});
afterAll(async () => {
  await app?.stop();
});

const auth = (secret: string, key?: string) => ({ 'x-webhook-secret': secret, ...(key === undefined ? {} : { 'idempotency-key': key }) });
/** A connection of its own (another process's, as it were), outside the service's pool. */
async function connect() {
  const client = new pg.Client({ connectionString: app.databaseUrl });
  await client.connect();
  return client;
}
/** Whether a backend of the test database other than `pid` waits for a transaction to end (a request's claim waiting on another's). */
const waitsOn = async (pid: number) =>
  (await app.rt.db.pool.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND pid <> $1 AND wait_event_type = 'Lock' AND wait_event = 'transactionid'`, [pid])).rows.length > 0;
const backendPid = async (client: pg.Client) => (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
const eventsOf = (webhookId: string) => app.rt.db.prisma.event.count({ where: { webhookId } });

async function form(publicId: string, body: FormData | URLSearchParams, headers: Record<string, string> = {}) {
  const res = await fetch(`${app.url}/f/${publicId}`, { method: 'POST', body, headers, redirect: 'manual' });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers };
}

describe('idempotency keys on HTTP ingest', () => {
  it('answers a retry with the first ids and status duplicate, storing nothing again; another body is 422', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey);
    expect(wh.idempotencyWindowSeconds).toBe(86_400);
    const first = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'order-1') });
    expect(first.status).toBe(202);
    expect(first.body.status).toBe('queued');
    // Method, path and query do not count.
    const again = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'order-1'), method: 'PUT', path: '/other?x=1' });
    expect(again.status).toBe(202);
    expect(again.body).toEqual({ eventId: first.body.eventId, deliveryId: first.body.deliveryId, status: 'duplicate' });
    expect(await eventsOf(wh.id)).toBe(1);

    const reused = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'order-1'), body: '{"hello":"mars"}' });
    expect(reused.status).toBe(422);
    expect(reused.body.error.code).toBe('idempotency_key_reused');
    expect(await eventsOf(wh.id)).toBe(1);

    // Keys are per webhook.
    const other = await createWebhook(app, apiKey);
    expect((await ingest(app, other.publicId, { headers: auth(other.ingestSecret, 'order-1') })).body.status).toBe('queued');
  });

  it('refuses a malformed key with 400 invalid_request, param idempotency-key', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey);
    for (const key of ['x'.repeat(256), 'é-accent']) {
      const res = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, key) });
      expect(res.status, key).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'idempotency-key' });
    }
    expect((await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'k'.repeat(255)) })).status).toBe(202);
    expect(await eventsOf(wh.id)).toBe(1);
  });

  it("shows the key on the delivery, filters deliveries by it (REST and GraphQL), and a replay's delivery has none", async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey);
    const keyed = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'filter-me') });
    const plain = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret) });
    expect((await app.api(apiKey, 'GET', `/v1/deliveries/${keyed.body.deliveryId}`)).body.idempotencyKey).toBe('filter-me');
    expect((await app.api(apiKey, 'GET', `/v1/deliveries/${plain.body.deliveryId}`)).body.idempotencyKey).toBeNull();

    const all = await app.api(apiKey, 'GET', `/v1/deliveries?idempotencyKey=filter-me`);
    expect(all.status).toBe(200);
    expect(all.body.items.map((d: any) => d.id)).toEqual([keyed.body.deliveryId]);
    const ofHook = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/deliveries?idempotencyKey=filter-me`);
    expect(ofHook.body.items.map((d: any) => d.id)).toEqual([keyed.body.deliveryId]);
    expect((await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/deliveries?idempotencyKey=none-such`)).body.items).toEqual([]);

    const gql = await app.api(apiKey, 'POST', '/graphql', { query: `{ deliveries(idempotencyKey: "filter-me") { items { id idempotencyKey } } }` });
    expect(gql.body.data.deliveries.items).toEqual([{ id: keyed.body.deliveryId, idempotencyKey: 'filter-me' }]);

    // A replay is a new delivery without the producer's key.
    await app.rt.db.pool.query(`UPDATE deliveries SET status = 'succeeded', completed_at = now(), dispatch_body = '\\x7b7d', dispatch_content_type = 'application/json', dispatch_headers = '{}' WHERE id = $1`, [keyed.body.deliveryId]);
    const replay = await app.api(apiKey, 'POST', `/v1/deliveries/${keyed.body.deliveryId}/replay`);
    expect(replay.status, JSON.stringify(replay.body)).toBe(202);
    const replays = await app.rt.db.prisma.delivery.findMany({ where: { replayOfId: keyed.body.deliveryId } });
    expect(replays).toHaveLength(1);
    expect(replays[0].idempotencyKey).toBeNull();
  });

  it('with the window 0 records the key on the delivery but never enforces it', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey, { idempotencyWindowSeconds: 0 });
    const a = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'k0') });
    const b = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'k0'), body: '{"other":1}' });
    expect([a.body.status, b.body.status]).toEqual(['queued', 'queued']);
    expect(a.body.eventId).not.toBe(b.body.eventId);
    expect((await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/deliveries?idempotencyKey=k0`)).body.items).toHaveLength(2);
    expect(await app.rt.db.prisma.ingestIdempotencyKey.count({ where: { webhookId: wh.id } })).toBe(0);
    // Out of range: 400.
    const bad = await app.api(apiKey, 'PATCH', `/v1/webhooks/${wh.id}`, { idempotencyWindowSeconds: 604_801 });
    expect(bad.status).toBe(400);
    expect(bad.body.error.param).toBe('idempotencyWindowSeconds');
  });

  it("uses an authenticating Standard Webhooks signature's webhook-id as the key, and no other webhook-id", async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey);
    const body = '{"signed":true}';
    const signed = (id: string) => {
      const ts = new Date();
      return { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(ts.getTime() / 1000)), 'webhook-signature': new Webhook(wh.ingestSecret).sign(id, ts, body) };
    };
    const a = await ingest(app, wh.publicId, { body, headers: signed('msg_1') });
    const b = await ingest(app, wh.publicId, { body, headers: signed('msg_1') });
    expect(a.status).toBe(202);
    expect(b.body).toMatchObject({ eventId: a.body.eventId, status: 'duplicate' });
    expect((await app.api(apiKey, 'GET', `/v1/deliveries/${a.body.deliveryId}`)).body.idempotencyKey).toBe('msg_1');
    // An explicit key wins over the webhook-id.
    const c = await ingest(app, wh.publicId, { body, headers: { ...signed('msg_1'), 'idempotency-key': 'explicit' } });
    expect(c.body.status).toBe('queued');
    // A webhook-id that did not authenticate the request (the secret did) is no key.
    const d = await ingest(app, wh.publicId, { body, headers: { ...auth(wh.ingestSecret), 'webhook-id': 'msg_2' } });
    const e = await ingest(app, wh.publicId, { body, headers: { ...auth(wh.ingestSecret), 'webhook-id': 'msg_2' } });
    expect([d.body.status, e.body.status]).toEqual(['queued', 'queued']);
    expect((await app.api(apiKey, 'GET', `/v1/deliveries/${d.body.deliveryId}`)).body.idempotencyKey).toBeNull();
  });

  it('checks the key before quota admission and before the pause: a duplicate stays a duplicate', async () => {
    const { apiKey } = await app.project('free');
    const wh = await createWebhook(app, apiKey);
    const first = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'free-1') });
    expect(first.status).toBe(202);
    // Free takes 3 a second: exhaust it, then the retry is still a duplicate.
    let limited = false;
    for (let i = 0; i < 10 && !limited; i++) limited = (await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret) })).status === 429;
    expect(limited).toBe(true);
    const retry = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'free-1') });
    expect(retry.status).toBe(202);
    expect(retry.body).toMatchObject({ eventId: first.body.eventId, status: 'duplicate' });
    const reused = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'free-1'), body: '[]' });
    expect(reused.status).toBe(422);

    expect((await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/pause`)).status).toBe(200);
    const paused = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'free-1') });
    expect(paused.body).toMatchObject({ eventId: first.body.eventId, status: 'duplicate' });
    const fresh = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'free-2') });
    expect(fresh.status).toBe(409);
    expect(fresh.body.error.code).toBe('webhook_paused');
    expect((await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret) })).body.error.code).toBe('webhook_paused');
  });

  it('stores each key once when many requests with it arrive at once; the others answer duplicate or 409 in progress', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey);
    const answers = await Promise.all(Array.from({ length: 20 }, () => ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'race') })));
    const created = answers.filter((a) => a.status === 202 && a.body.status === 'queued');
    expect(created).toHaveLength(1);
    for (const a of answers) {
      if (a.status === 202) expect(a.body.eventId).toBe(created[0].body.eventId);
      else {
        expect(a.status).toBe(409);
        expect(a.body.error.code).toBe('idempotency_key_in_progress');
        expect(a.headers.get('retry-after')).toBeTruthy();
      }
    }
    expect(await eventsOf(wh.id)).toBe(1);
  });

  it('answers 409 idempotency_key_in_progress with Retry-After when the claim it waited on committed but no longer holds the key; the retry takes it', async () => {
    const { projectId, apiKey } = await ingestingProject(app);
    // A two-second window: the other request's claim lapses while this one waits for it to commit.
    const wh = await createWebhook(app, apiKey, { idempotencyWindowSeconds: 2 });
    // Another API process's request has claimed the key and not committed (its transaction is held open here).
    const other = await connect();
    try {
      await other.query('BEGIN');
      const { rows } = await other.query<{ expires_at: string }>(
        `INSERT INTO ingest_idempotency_keys (project_id, webhook_id, key, fingerprint, event_id, delivery_id, expires_at)
         VALUES ($1, $2, 'in-flight', 'other-body', 'evt_other', 'del_other', (now() AT TIME ZONE 'UTC') + interval '2 seconds') RETURNING expires_at::text`,
        [projectId, wh.id],
      );
      const otherPid = await backendPid(other);
      const answer = ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'in-flight') });
      // This request's claim waits on the other's row (a lock wait, seen by PostgreSQL)...
      await waitFor(() => waitsOn(otherPid));
      // ...until the other commits, once its window has run out.
      await waitFor(async () => (await app.rt.db.pool.query(`SELECT (now() AT TIME ZONE 'UTC') > $1::timestamp AS past`, [rows[0].expires_at])).rows[0].past, 10_000, 100);
      await other.query('COMMIT');
      const res = await answer;
      expect(res.status, JSON.stringify(res.body)).toBe(409);
      expect(res.body.error).toMatchObject({ code: 'idempotency_key_in_progress', retryAfterSec: 1 });
      expect(res.headers.get('retry-after')).toBe('1');
      expect(await eventsOf(wh.id)).toBe(0);
    } finally {
      await other.end();
    }
    // Retried after Retry-After: the lapsed key is this request's now.
    const retry = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'in-flight') });
    expect(retry.status).toBe(202);
    expect(retry.body.status).toBe('queued');
    expect(await eventsOf(wh.id)).toBe(1);
  });

  it('a request whose key another has claimed and not committed waits for it: duplicate when it commits, the key its own when it rolls back', async () => {
    const { projectId, apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey);
    const body = '{"hello":"world"}';
    const first = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'probe'), body });
    const fingerprint = (await app.rt.db.pool.query<{ fingerprint: string }>('SELECT fingerprint FROM ingest_idempotency_keys WHERE webhook_id = $1', [wh.id])).rows[0].fingerprint;
    expect(first.body.status).toBe('queued');
    for (const outcome of ['COMMIT', 'ROLLBACK'] as const) {
      const key = `held-${outcome}`;
      const other = await connect();
      try {
        await other.query('BEGIN');
        await other.query(
          `INSERT INTO ingest_idempotency_keys (project_id, webhook_id, key, fingerprint, event_id, delivery_id, expires_at)
           VALUES ($1, $2, $3, $4, 'evt_other', 'del_other', (now() AT TIME ZONE 'UTC') + interval '1 hour')`,
          [projectId, wh.id, key, fingerprint],
        );
        const answer = ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, key), body });
        const otherPid = await backendPid(other);
        await waitFor(() => waitsOn(otherPid));
        await other.query(outcome);
        const res = await answer;
        expect(res.status, outcome).toBe(202);
        if (outcome === 'COMMIT') expect(res.body).toEqual({ eventId: 'evt_other', deliveryId: 'del_other', status: 'duplicate' });
        else expect(res.body.status).toBe('queued');
      } finally {
        await other.end();
      }
    }
    expect(await eventsOf(wh.id)).toBe(2);
  });

  it('costs no extra statement: a warm keyed request is one statement, as a keyless one', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey);
    expect((await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret) })).status).toBe(202);
    const keyless = await capturedStatements(app.rt.db.pool, () => ingest(app, wh.publicId, { headers: auth(wh.ingestSecret) }));
    const keyed = await capturedStatements(app.rt.db.pool, () => ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'one-statement') }));
    const duplicate = await capturedStatements(app.rt.db.pool, () => ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'one-statement') }));
    expect(keyless).toHaveLength(1);
    expect(keyed).toHaveLength(1);
    expect(keyed[0]).toMatch(/^ingest_insert_event_and_delivery_within_(quotas|rate)_idem$/);
    expect(duplicate).toHaveLength(1);
  });

  it('forgets keys past the window: retention purges them, and the key then makes a new event', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey);
    const first = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'old') });
    await app.rt.db.pool.query(`UPDATE ingest_idempotency_keys SET expires_at = (now() AT TIME ZONE 'UTC') - interval '1 second' WHERE webhook_id = $1`, [wh.id]);
    const report = await runRetention(app.rt);
    expect(report.idempotencyKeysDeleted).toBeGreaterThanOrEqual(1);
    expect(await app.rt.db.prisma.ingestIdempotencyKey.count({ where: { webhookId: wh.id } })).toBe(0);
    // The delivery keeps its key for its history's life.
    expect((await app.api(apiKey, 'GET', `/v1/deliveries/${first.body.deliveryId}`)).body.idempotencyKey).toBe('old');
    const again = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret, 'old') });
    expect(again.body.status).toBe('queued');
    expect(again.body.eventId).not.toBe(first.body.eventId);
  });

  it("runs before the provider pack's dedupe, with the same answer", async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey, { dedupeWindowSeconds: 3600 });
    const body = '{"x":1}';
    const signed = (id: string) => {
      const ts = new Date();
      return { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(ts.getTime() / 1000)), 'webhook-signature': new Webhook(wh.ingestSecret).sign(id, ts, body) };
    };
    const first = await ingest(app, wh.publicId, { body, headers: signed('msg_dd') });
    expect(first.body.status).toBe('queued');
    // A new key, but the dedupe id was seen: the dedupe's answer, and the key answers the same from now on.
    const keyed = await ingest(app, wh.publicId, { body, headers: { ...signed('msg_dd'), 'idempotency-key': 'k-dd' } });
    expect(keyed.body).toMatchObject({ eventId: first.body.eventId, status: 'duplicate' });
    const again = await ingest(app, wh.publicId, { body, headers: { ...auth(wh.ingestSecret, 'k-dd') } });
    expect(again.body).toMatchObject({ eventId: first.body.eventId, deliveryId: first.body.deliveryId, status: 'duplicate' });
    expect(await eventsOf(wh.id)).toBe(1);
  });
});

describe('idempotency keys on form ingest', () => {
  it('takes _idempotency_key; a retry with a new multipart boundary is a duplicate, with its 303', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey);
    const post = (fields: [string, string][], file = 'hello') => {
      const fd = new FormData();
      fd.append('_secret', wh.ingestSecret);
      fd.append('_idempotency_key', 'signup-7');
      for (const [k, v] of fields) fd.append(k, v);
      fd.append('cv', new Blob([file], { type: 'text/plain' }), 'cv.txt');
      return form(wh.publicId, fd);
    };
    const first = await post([['name', 'Ana'], ['tag', 'a'], ['tag', 'b']]);
    expect(first.status).toBe(202);
    const retry = await post([['name', 'Ana'], ['tag', 'a'], ['tag', 'b']]);
    expect(retry.body).toEqual({ eventId: first.body.eventId, deliveryId: first.body.deliveryId, status: 'duplicate' });
    // Another order of fields, or another file: another body.
    expect((await post([['tag', 'a'], ['name', 'Ana'], ['tag', 'b']])).status).toBe(422);
    expect((await post([['name', 'Ana'], ['tag', 'a'], ['tag', 'b']], 'other')).status).toBe(422);

    const urlencoded = new URLSearchParams({ _secret: wh.ingestSecret, _idempotency_key: 'signup-7', _redirect: 'https://example.com/thanks', name: 'Ana' });
    const redirected = await form(wh.publicId, urlencoded);
    expect(redirected.status).toBe(422);
    const plainKey = new URLSearchParams({ _secret: wh.ingestSecret, _idempotency_key: 'thanks-1', _redirect: 'https://example.com/thanks', name: 'Bo' });
    expect((await form(wh.publicId, plainKey)).status).toBe(303);
    const again = await form(wh.publicId, new URLSearchParams({ _secret: wh.ingestSecret, _idempotency_key: 'thanks-1', _redirect: 'https://example.com/thanks', name: 'Bo' }));
    expect(again.status).toBe(303);
    expect(again.headers.get('location')).toBe('https://example.com/thanks');
    expect(await eventsOf(wh.id)).toBe(2);
  });

  it('the header works on forms too, and a honeypot post records no key', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey);
    const bot = await form(wh.publicId, new URLSearchParams({ _secret: wh.ingestSecret, _honeypot: 'yes', name: 'bot' }), { 'idempotency-key': 'hp' });
    expect(bot.status).toBe(202);
    expect(await app.rt.db.prisma.ingestIdempotencyKey.count({ where: { webhookId: wh.id } })).toBe(0);
    const real = await form(wh.publicId, new URLSearchParams({ _secret: wh.ingestSecret, name: 'human' }), { 'idempotency-key': 'hp' });
    expect(real.body.status).toBe('queued');
    const retry = await form(wh.publicId, new URLSearchParams({ _secret: wh.ingestSecret, name: 'human' }), { 'idempotency-key': 'hp' });
    expect(retry.body).toMatchObject({ eventId: real.body.eventId, status: 'duplicate' });
  });
});
