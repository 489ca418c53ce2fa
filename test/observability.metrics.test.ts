import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sampleBacklog } from '../src/metrics/backlog.ts';
import { SKETCH_RELATIVE_ERROR } from '../src/metrics/sketch.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { retentionPass } from './support/passes.ts';
import { startReceiver } from './support/receiver.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

let app: TestApp;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
const seen = new Map<string, number>();

beforeAll(async () => {
  app = await startTestApp({ worker: true });
  // The body names what the receiver answers: ok (200), fail (500 every time), flaky (503, then 200), gone (404, terminal).
  receiver = await startReceiver((r) => {
    const { kind, n } = JSON.parse(r.body.toString()) as { kind: string; n: number };
    const key = `${kind}:${n}`;
    const count = (seen.get(key) ?? 0) + 1;
    seen.set(key, count);
    if (kind === 'ok') return { status: 200 };
    if (kind === 'fail') return { status: 500 };
    if (kind === 'flaky') return { status: count === 1 ? 503 : 200 };
    return { status: 404 };
  });
});
afterAll(async () => {
  await app?.stop();
  await receiver?.close();
});

const auth = (secret: string) => ({ authorization: `Bearer ${secret}` });

describe('metrics and backlog', () => {
  it('counts a known mix exactly, with latency percentiles within the sketch error, in REST and GraphQL; archived webhooks too', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey, { url: receiver.url, retryPolicy: { maxAttempts: 2, backoff: 'fixed', initialDelayMs: 100, maxDelayMs: 100 } });
    const mix = [...Array(3).fill('ok'), ...Array(2).fill('fail'), ...Array(2).fill('flaky'), 'gone'];
    for (const [n, kind] of mix.entries()) {
      const res = await ingest(app, wh.publicId, { body: JSON.stringify({ kind, n }), headers: auth(wh.ingestSecret) });
      expect(res.status).toBe(202);
    }
    // Every delivery finished.
    const deliveries = await waitFor(async () => {
      const { body } = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/deliveries?limit=100`);
      return body.items.length === 8 && body.items.every((d: any) => d.status === 'succeeded' || d.status === 'failed') ? body.items : null;
    }, 20_000);

    // Results and ingested events reach the roll-ups within a second (each process writes its counts once a second).
    const res = (await waitFor(async () => {
      const r = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/metrics?window=1h`);
      // The sums and the latency sketch are read by two statements at once: wait for both to show the last flush.
      return r.status !== 200 || (r.body.totals.attempts >= 12 && r.body.totals.ingested >= 8 && r.body.latencyMs.p50 !== null) ? r : null;
    }, 10_000))!;
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const m = res.body;
    expect(m).toMatchObject({
      webhookId: wh.id,
      window: '1h',
      bucketSeconds: 60,
      totals: { ingested: 8, succeeded: 5, failed: 3, attempts: 12, retries: 4 },
      statusCodes: { '2xx': 5, '3xx': 0, '4xx': 1, '5xx': 6, network: 0, timeout: 0 },
    });
    expect(m.successRate).toBeCloseTo(5 / 8, 10);
    expect(m.series).toHaveLength(60);
    expect(m.series.reduce((s: number, p: any) => s + p.ingested, 0)).toBe(8);
    expect(m.series.reduce((s: number, p: any) => s + p.attempts, 0)).toBe(12);
    expect(new Date(m.series[0].t).toISOString()).toBe(m.from);
    expect(Date.parse(m.to) - Date.parse(m.from)).toBeLessThan(3_600_000);
    expect(Object.keys(m.series[0]).sort()).toEqual(['attempts', 'failed', 'ingested', 'succeeded', 't']);

    // Percentiles: the lower order statistic of the exact latencies, within the sketch's relative error.
    const exact = deliveries.filter((d: any) => d.status === 'succeeded').map((d: any) => Date.parse(d.completedAt) - Date.parse(d.createdAt)).sort((a: number, b: number) => a - b);
    for (const [q, key] of [[0.5, 'p50'], [0.95, 'p95'], [0.99, 'p99']] as const) {
      const want = exact[Math.floor(q * (exact.length - 1))];
      expect(Math.abs(m.latencyMs[key] - want), `${key}: ${m.latencyMs[key]} vs ${want}`).toBeLessThanOrEqual(want * SKETCH_RELATIVE_ERROR + 5);
    }

    // Every window: its bucket size and series length; the default is 24h.
    for (const [window, bucketSeconds, points] of [['24h', 900, 96], ['7d', 7200, 84], ['30d', 21600, 120]] as const) {
      const r = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/metrics?window=${window}`);
      expect(r.body).toMatchObject({ window, bucketSeconds, totals: { ingested: 8, succeeded: 5, failed: 3, attempts: 12, retries: 4 } });
      expect(r.body.series).toHaveLength(points);
    }
    expect((await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/metrics`)).body).toMatchObject({ window: '24h', bucketSeconds: 900 });

    // GraphQL: the same figures on the Webhook type.
    const gql = await app.api(apiKey, 'POST', '/graphql', {
      query: `query($id: ID!) { webhook(id: $id) { metrics(window: "1h") { totals { ingested succeeded failed attempts retries } statusCodes latencyMs { p50 } }
                backlog(window: "1h") { depth dlqDepth } } }`,
      variables: { id: wh.id },
    });
    expect(gql.body.errors).toBeUndefined();
    expect(gql.body.data.webhook.metrics).toMatchObject({ totals: m.totals, statusCodes: m.statusCodes, latencyMs: { p50: m.latencyMs.p50 } });
    expect(gql.body.data.webhook.backlog).toEqual({ depth: 0, dlqDepth: 3 });

    // Archived: still answered.
    expect((await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/archive`)).status).toBe(200);
    const archived = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/metrics?window=1h`);
    expect(archived.status).toBe(200);
    expect(archived.body.totals).toEqual(m.totals);
    expect((await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/backlog`)).status).toBe(200);
  }, 40_000);

  it('validates the window (400 invalid_request, param window), after 401 and 404', async () => {
    const { apiKey } = await app.project('free');
    const wh = await createWebhook(app, apiKey);
    for (const path of ['metrics', 'backlog']) {
      for (const bad of ['2h', '1d', '24H', '1h,24h', '0', '']) {
        const r = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/${path}?window=${encodeURIComponent(bad)}`);
        expect(r.status, `${path} [${bad}]`).toBe(400);
        expect(r.body.error).toMatchObject({ code: 'invalid_request', param: 'window' });
      }
      expect((await app.api(null, 'GET', `/v1/webhooks/${wh.id}/${path}?window=2h`)).status).toBe(401);
      expect((await app.api(apiKey, 'GET', `/v1/webhooks/wh_nope/${path}?window=2h`)).status).toBe(404);
      const other = await app.project('free');
      expect((await app.api(other.apiKey, 'GET', `/v1/webhooks/${wh.id}/${path}`)).status).toBe(404);
    }
    const empty = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/metrics?window=7d`);
    expect(empty.body).toMatchObject({ totals: { ingested: 0, succeeded: 0, failed: 0, attempts: 0, retries: 0 }, successRate: null, latencyMs: { p50: null, p95: null, p99: null } });
  });

  it('backlog: depth now by status, oldest pending, and the sampled series', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey, { url: receiver.url });
    const later = new Date(Date.now() + 3_600_000).toISOString();
    for (let n = 0; n < 3; n++) {
      expect((await ingest(app, wh.publicId, { body: JSON.stringify({ kind: 'ok', n }), headers: { ...auth(wh.ingestSecret), 'x-service-deliver-at': later } })).status).toBe(202);
    }
    await sampleBacklog(app.rt);
    const b = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/backlog?window=1h`);
    expect(b.status).toBe(200);
    expect(b.body).toMatchObject({ webhookId: wh.id, window: '1h', depth: 3, byStatus: { queued: 0, scheduled: 3, retrying: 0, delivering: 0 }, dlqDepth: 0 });
    expect(typeof b.body.oldestPendingAt).toBe('string');
    expect(b.body.series).toHaveLength(60);
    expect(b.body.series.at(-1).depth).toBe(3);
    const day = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/backlog`);
    expect(day.body.series).toHaveLength(96);
    expect(day.body.series.at(-1).depth).toBe(3);
  });

  it('old buckets go with history retention', async () => {
    const { apiKey, projectId } = await app.project('free');
    const wh = await createWebhook(app, apiKey);
    const old = new Date(Date.now() - 8 * 86_400_000);
    for (const table of ['webhook_metric_buckets', 'webhook_backlog_samples']) {
      await app.rt.db.pool.query(`INSERT INTO ${table} (webhook_id, size, bucket_start, project_id) VALUES ($1, 60, $2, $3), ($1, 60, now(), $3)`, [wh.id, old, projectId]);
    }
    await retentionPass(app.rt);
    for (const table of ['webhook_metric_buckets', 'webhook_backlog_samples']) {
      const { rows } = await app.rt.db.pool.query(`SELECT bucket_start FROM ${table} WHERE webhook_id = $1`, [wh.id]);
      expect(rows).toHaveLength(1);
      expect(rows[0].bucket_start.getTime()).toBeGreaterThan(old.getTime());
    }
  });
});
