// A replay or re-drive is a success in the metrics, but its age (from the original ingest) is not
// a delivery latency: it stays out of the latency sketch.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RollupWriter } from '../src/metrics/rollup.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { createWebhook } from './support/webhooks.ts';

let app: TestApp;

beforeAll(async () => {
  app = await startTestApp({ worker: false });
});
afterAll(async () => {
  await app?.stop();
});

describe('metrics of replays and re-drives', () => {
  it('a replay or re-drive counts as a success but stays out of the latency sketch', async () => {
    const { apiKey, projectId } = await app.project('pro');
    const wh = await createWebhook(app, apiKey);
    const writer = new RollupWriter(app.rt.db.relaxedPool, 60_000);
    const recordedAt = Date.now();
    writer.add({ webhookId: wh.id, projectId, outcome: 'succeeded', statusCode: 200, ageMs: 40, recordedAt });
    writer.add({ webhookId: wh.id, projectId, outcome: 'succeeded', statusCode: 200, ageMs: 3_600_000, replay: true, recordedAt });
    await writer.stop();
    const { rows } = await app.rt.db.pool.query(`SELECT succeeded, latency FROM webhook_metric_buckets WHERE webhook_id = $1 AND size = 60`, [wh.id]);
    expect(rows).toHaveLength(1);
    expect(rows[0].succeeded).toBe(2);
    const counted = Object.values(rows[0].latency as Record<string, number>).reduce((a, n) => a + n, 0);
    expect(counted).toBe(1);
    const m = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/metrics?window=1h`);
    expect(m.status).toBe(200);
    expect(m.body.latencyMs.p99).toBeLessThan(1_000);
  });
});
