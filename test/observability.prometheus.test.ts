import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { startReceiver } from './support/receiver.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

const TOKEN = 'metrics-token-for-tests-0123456789';
let app: TestApp;
let plain: TestApp;
let receiver: Awaited<ReturnType<typeof startReceiver>>;

beforeAll(async () => {
  app = await startTestApp({ worker: true, config: { METRICS_TOKEN: TOKEN } });
  plain = await startTestApp({ databaseUrl: app.databaseUrl });
  receiver = await startReceiver((r) => ({ status: r.body.toString().includes('fail') ? 500 : 200 }));
});
afterAll(async () => {
  await plain?.stop();
  await app?.stop();
  await receiver?.close();
});

async function scrape(url: string, token: string | null) {
  const res = await fetch(`${url}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
}

function families(text: string) {
  return new Map(parsePrometheusTextFormat(text).map((f) => [f.name, f]));
}

describe('Prometheus /metrics', () => {
  it('is 404 without METRICS_TOKEN configured, or without the right bearer token', async () => {
    expect((await scrape(plain.url, TOKEN)).status).toBe(404);
    expect((await scrape(app.url, null)).status).toBe(404);
    expect((await scrape(app.url, 'wrong-token-wrong-token-wrong-tok')).status).toBe(404);
    const { apiKey } = await app.project('free');
    expect((await scrape(app.url, apiKey)).status).toBe(404);
    const notFound = await scrape(app.url, null);
    expect(JSON.parse(notFound.text).error.code).toBe('not_found');
    // The scheme in any case; another scheme, or the token alone, is not it.
    for (const [authorization, status] of [[`bearer ${TOKEN}`, 200], [`BEARER  ${TOKEN}`, 200], [`Basic ${TOKEN}`, 404], [TOKEN, 404], [`Bearer ${TOKEN}x`, 404]] as const) {
      const res = await fetch(`${app.url}/metrics`, { headers: { authorization } });
      await res.text();
      expect(res.status, authorization).toBe(status);
    }
  });

  it('serves the named series as parseable Prometheus text', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey, { url: receiver.url, retryPolicy: { maxAttempts: 1 } });
    for (const body of ['{"a":1}', '{"fail":1}', '{"a":2}']) expect((await ingest(app, wh.publicId, { body, headers: { authorization: `Bearer ${wh.ingestSecret}` } })).status).toBe(202);
    expect((await ingest(app, wh.publicId, { headers: { authorization: 'Bearer whsec_wrong' } })).status).toBe(401);
    await waitFor(async () => (await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/deliveries`)).body.items.every((d: any) => d.status === 'succeeded' || d.status === 'failed'), 15_000);
    await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}`);

    const res = await scrape(app.url, TOKEN);
    expect(res.status).toBe(200);
    expect(res.type).toContain('text/plain');
    const f = families(res.text);
    for (const name of [
      'relay_process_cpu_seconds_total',
      'relay_nodejs_eventloop_lag_seconds',
      'relay_http_requests_total',
      'relay_http_request_duration_seconds',
      'relay_ingest_events_total',
      'relay_deliveries_total',
      'relay_delivery_attempts_total',
      'relay_delivery_attempt_duration_seconds',
      'relay_backlog_depth',
      'relay_job_queue_depth',
      'relay_job_start_delay_seconds',
      'relay_db_pool_connections',
      'relay_pubsub_lag_seconds',
    ]) {
      expect(f.has(name), name).toBe(true);
    }
    const value = (name: string, labels: Record<string, string>) =>
      f.get(name)!.metrics.filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v)).reduce((s, m) => s + Number(m.value), 0);
    expect(value('relay_ingest_events_total', { channel: 'http', result: 'accepted' })).toBeGreaterThanOrEqual(3);
    expect(value('relay_ingest_events_total', { channel: 'http', result: 'refused', reason: 'unauthorized' })).toBeGreaterThanOrEqual(1);
    expect(value('relay_deliveries_total', { outcome: 'succeeded' })).toBeGreaterThanOrEqual(2);
    expect(value('relay_deliveries_total', { outcome: 'failed' })).toBeGreaterThanOrEqual(1);
    expect(value('relay_http_requests_total', { route: 'getWebhook', method: 'GET', status: '200' })).toBeGreaterThanOrEqual(1);
    expect(value('relay_db_pool_connections', { pool: 'main', state: 'total' })).toBeGreaterThan(0);
    const attempts = f.get('relay_delivery_attempt_duration_seconds')!;
    expect(attempts.type).toBe('HISTOGRAM');
    expect(Number(attempts.metrics[0].count)).toBeGreaterThanOrEqual(3);
    // The parser folds a labelled histogram's series into one, so its labels are read from the text.
    expect(f.get('relay_job_start_delay_seconds')!.type).toBe('HISTOGRAM');
    expect(res.text).toMatch(/^relay_job_start_delay_seconds_count\{task="deliveries__attempt"\} [1-9]/m);
    expect(f.get('relay_backlog_depth')!.type).toBe('GAUGE');
  }, 30_000);

  it('a worker-only process serves it on METRICS_PORT', async () => {
    const worker = await startTestApp({ databaseUrl: app.databaseUrl, api: false, worker: true, config: { METRICS_TOKEN: TOKEN, METRICS_PORT: 0 } });
    try {
      expect(worker.metricsPort).toBeGreaterThan(0);
      const url = `http://127.0.0.1:${worker.metricsPort}`;
      const res = await scrape(url, TOKEN);
      expect(res.status).toBe(200);
      expect(families(res.text).has('relay_job_queue_depth')).toBe(true);
      expect((await scrape(url, null)).status).toBe(404);
    } finally {
      await worker.stop();
    }
  });
});
