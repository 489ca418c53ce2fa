import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setProjectQuota } from '../src/projects/service.ts';
import { ingestBatches } from '../src/ingest/store-batch.ts';
import { capturedStatements } from './support/statements.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

// Events of one webhook that arrive together share one ingest statement (src/ingest/store-batch.ts):
// each still gets the answer, the rows and the counts it would have had alone. The wait is long
// here (INGEST_BATCH_WAIT_MS 100), so that concurrent requests share statements however slowly
// the machine runs; nothing here depends on how long anything takes.
let app: TestApp;
let other: TestApp;
let receiver: http.Server;
let receiverUrl: string;
const received = new Map<string, number>();
beforeAll(async () => {
  receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const key = Buffer.concat(chunks).toString();
      received.set(key, (received.get(key) ?? 0) + 1);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
  app = await startTestApp({ worker: true, config: { INGEST_BATCH_WAIT_MS: 100, ALLOW_PRIVATE_DESTINATIONS: true } });
  // This file's own database: an event with this body cannot be stored (a stand-in for any error of
  // one row). Made before anything is ingested: DDL on the partitioned events table while runners
  // read it can deadlock with them.
  await app.rt.db.pool.query(`
    CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.body = convert_to('{"poison":true}', 'UTF8') THEN RAISE EXCEPTION 'poisoned event'; END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER refuse_poison BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION refuse_poison();`);
  // API only: no drain in this process, so every delivery is written with its job (one queue per webhook).
  other = await startTestApp({ databaseUrl: app.databaseUrl, config: { INGEST_BATCH_WAIT_MS: 100, ALLOW_PRIVATE_DESTINATIONS: true } });
});
afterAll(async () => {
  await other?.stop();
  await app?.stop();
  await new Promise((r) => receiver?.close(r));
});

const auth = (secret: string) => ({ 'x-webhook-secret': secret });
const isBatch = (name: string) => name.startsWith('ingest_batch');
const isIngest = (name: string) => name.startsWith('ingest_insert_event') || isBatch(name);

/** `n` requests at once (each on its own connection), each with its own body; their answers in order. */
const together = (publicId: string, secret: string, bodies: string[], on = app) => Promise.all(bodies.map((body) => ingest(on, publicId, { headers: auth(secret), body })));

describe('ingest batches', () => {
  it('stores events sent together in shared statements: each answered, stored, counted and delivered as if alone, in arrival order', async () => {
    const { apiKey, projectId } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey, { url: receiverUrl });
    expect((await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret), body: '{"warm":true}' })).status).toBe(202);
    // Bodies of different lengths: each event's bytes are cut from one parameter.
    const bodies = Array.from({ length: 30 }, (_, i) => JSON.stringify({ n: i, pad: 'x'.repeat(i * 37) }));
    const batchedBefore = ingestBatches(app.rt).batched;
    let answers: Awaited<ReturnType<typeof together>> = [];
    const sent = await capturedStatements(app.rt.db.pool, async () => {
      answers = await together(wh.publicId, wh.ingestSecret, bodies);
    });
    expect(answers.map((a) => a.status)).toEqual(bodies.map(() => 202));
    expect(sent.filter(isBatch).length).toBeGreaterThan(0);
    expect(sent.filter(isIngest).length).toBeLessThan(bodies.length);
    expect(ingestBatches(app.rt).batched - batchedBefore).toBeGreaterThan(1);

    const ids = answers.map((a) => a.body.eventId as string);
    expect(new Set(ids).size).toBe(bodies.length);
    const { rows } = await app.rt.db.pool.query<{ event_id: string; delivery_id: string; body: string; seq: string; tx: string }>(
      `SELECT e.id AS event_id, d.id AS delivery_id, convert_from(e.body, 'UTF8') AS body, d.seq, e.xmin::text AS tx FROM events e JOIN deliveries d ON d.event_id = e.id WHERE e.id = ANY($1)`,
      [ids],
    );
    expect(rows).toHaveLength(bodies.length);
    const byEvent = new Map(rows.map((r) => [r.event_id, r]));
    answers.forEach((a, i) => {
      expect(byEvent.get(a.body.eventId)).toMatchObject({ delivery_id: a.body.deliveryId, body: bodies[i] });
    });
    // Event ids are made in the order the events reached their webhook's queue: the deliveries of
    // one statement (one transaction: xmin) follow it. Concurrent requests that went in different
    // statements have no order between them, as before.
    const statements = new Map<string, typeof rows>();
    for (const r of rows) statements.set(r.tx, [...(statements.get(r.tx) ?? []), r]);
    expect([...statements.values()].some((g) => g.length > 1)).toBe(true);
    for (const group of statements.values()) {
      expect([...group].sort((a, b) => Number(a.seq) - Number(b.seq)).map((r) => r.event_id)).toEqual(group.map((r) => r.event_id).sort());
    }

    // The usage counters count each event and its bytes.
    const { rows: usage } = await app.rt.db.pool.query<{ metric: string; value: string }>(
      `SELECT metric, sum(value)::text AS value FROM usage_counters WHERE project_id = $1 AND webhook_id = $2 AND metric = 'stored_payload_bytes' GROUP BY metric`,
      [projectId, wh.id],
    );
    const bytes = bodies.reduce((n, b) => n + Buffer.byteLength(b), Buffer.byteLength('{"warm":true}'));
    expect(Number(usage[0].value)).toBe(bytes);

    // Every event reaches the receiver once.
    await waitFor(() => bodies.every((b) => received.get(b) === 1));
    await waitFor(async () => (await app.rt.db.pool.query(`SELECT 1 FROM deliveries WHERE webhook_id = $1 AND status <> 'succeeded'`, [wh.id])).rowCount === 0);
    expect(bodies.map((b) => received.get(b))).toEqual(bodies.map(() => 1));
  });

  it('a batch that would pass a quota stores nothing; its events then go one by one and get the answers they would alone', async () => {
    const { apiKey, projectId } = await ingestingProject(app);
    // Nothing listens there: every delivery waits for its retry (backoff from 5 s), so the backlog only grows.
    const wh = await createWebhook(other, apiKey, { url: 'http://127.0.0.1:9/closed' });
    // 1 % of it would cap a batch at one event: the limit that decides is the backlog's, checked against a full one.
    await setProjectQuota(other.rt, projectId, 'backlog_depth', '5000');
    // A backlog of 4,995 elsewhere (before the first ingest, whose reading of it then makes every later one read it again).
    await other.rt.db.pool.query(
      `INSERT INTO usage_counters (project_id, webhook_id, metric, period, shard, value) VALUES ($1, '', 'backlog_depth', 'current', 31, 4995)
       ON CONFLICT (project_id, webhook_id, metric, period, shard) DO UPDATE SET value = usage_counters.value + 4995`,
      [projectId],
    );
    expect((await ingest(other, wh.publicId, { headers: auth(wh.ingestSecret) })).status).toBe(202);
    const bodies = Array.from({ length: 12 }, (_, i) => JSON.stringify({ q: i }));
    const sent = await capturedStatements(other.rt.db.pool, async () => {
      const answers = await together(wh.publicId, wh.ingestSecret, bodies, other);
      expect(answers.filter((a) => a.status === 202)).toHaveLength(4);
      const refused = answers.filter((a) => a.status !== 202);
      expect(refused).toHaveLength(8);
      for (const r of refused) expect(r.body.error).toMatchObject({ code: 'quota_exceeded', quota: 'backlog_depth', scope: 'project', limit: 5000, current: 5000 });
    });
    // At least one statement carried more than one event, and was refused whole.
    expect(sent.filter(isBatch).length).toBeGreaterThan(0);
    const { rows } = await other.rt.db.pool.query(`SELECT count(*)::int AS n FROM events WHERE webhook_id = $1`, [wh.id]);
    expect(rows[0].n).toBe(5);
    // For a moment after a refused batch, the webhook's events go alone, side by side: no batch is tried again.
    const again = await capturedStatements(other.rt.db.pool, async () => {
      const answers = await together(wh.publicId, wh.ingestSecret, ['{"r":1}', '{"r":2}', '{"r":3}', '{"r":4}'], other);
      expect(answers.map((a) => a.status)).toEqual([409, 409, 409, 409]);
    });
    expect(again.filter(isBatch)).toEqual([]);
    // Each its own statement (a refusal on a kept lookup is decided again on a fresh one: two each).
    expect(again.filter(isIngest).length).toBeGreaterThanOrEqual(4);
  });

  it('carries at most 1 % of the smallest limit that counts events in one statement', async () => {
    const { apiKey, projectId } = await ingestingProject(app);
    // 300 requests a second (above the exact threshold): at most 3 events a statement.
    await setProjectQuota(app.rt, projectId, 'ingest_rate', '300');
    const wh = await createWebhook(other, apiKey, { url: receiverUrl });
    expect((await ingest(other, wh.publicId, { headers: auth(wh.ingestSecret) })).status).toBe(202);
    const answers = await together(wh.publicId, wh.ingestSecret, Array.from({ length: 12 }, (_, i) => `{"c":${i}}`), other);
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 202));
    const { rows } = await other.rt.db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE webhook_id = $1 GROUP BY xmin::text`, [wh.id]);
    const sizes = rows.map((r) => r.n);
    expect(Math.max(...sizes)).toBe(3);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(13);
  });

  it('an error PostgreSQL reports for a batch stores none of it; its events then go alone, so one bad event takes no other with it', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey, { url: receiverUrl });
    expect((await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret) })).status).toBe(202);
    // An event with the poisoned body cannot be stored (refuse_poison, made in beforeAll).
    const bodies = Array.from({ length: 8 }, (_, i) => (i === 5 ? '{"poison":true}' : JSON.stringify({ fine: i })));
    let answers: Awaited<ReturnType<typeof together>> = [];
    const sent = await capturedStatements(app.rt.db.pool, async () => {
      answers = await together(wh.publicId, wh.ingestSecret, bodies);
    });
    expect(sent.filter(isBatch).length).toBeGreaterThan(0);
    expect(answers.map((a) => a.status)).toEqual(bodies.map((_, i) => (i === 5 ? 500 : 202)));
    const { rows } = await app.rt.db.pool.query(`SELECT count(*)::int AS n FROM events WHERE webhook_id = $1`, [wh.id]);
    expect(rows[0].n).toBe(8);
  });

  it('never makes a producer wait for itself: requests one after another on one connection do not wait', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey, { url: receiverUrl });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const post = () =>
      new Promise<number>((resolve, reject) => {
        const req = http.request(`${app.url}/i/${wh.publicId}`, { method: 'POST', agent, headers: { ...auth(wh.ingestSecret), 'content-type': 'application/json' } }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode!));
        });
        req.on('error', reject);
        req.end('{"one":"after another"}');
      });
    try {
      const before = ingestBatches(app.rt).waited;
      for (let i = 0; i < 10; i++) expect(await post()).toBe(202);
      expect(ingestBatches(app.rt).waited).toBe(before);
      // The same requests from several connections at once: the webhook is busy, they wait for each other.
      const answers = await together(wh.publicId, wh.ingestSecret, Array.from({ length: 10 }, (_, i) => `{"at once":${i}}`));
      expect(answers.map((a) => a.status)).toEqual(answers.map(() => 202));
      expect(ingestBatches(app.rt).waited).toBeGreaterThan(before);
    } finally {
      agent.destroy();
    }
  });
});
