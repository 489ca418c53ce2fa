import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inTransaction } from '../src/db/client.ts';
import { acceptCronTick } from '../src/ingest/cron-ingest.ts';
import { flushIngestCounts, IngestCounter } from '../src/metrics/ingest-counts.ts';
import { ROLLUP_SIZES } from '../src/metrics/rollup.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

let app: TestApp;

beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.stop();
});

/** The webhook's `ingested` per bucket size, summed over shards (as every reader does). */
async function ingested(webhookId: string): Promise<Record<number, number>> {
  const { rows } = await app.rt.db.pool.query<{ size: number; n: string }>('SELECT size, sum(ingested) AS n FROM webhook_metric_buckets WHERE webhook_id = $1 GROUP BY size', [webhookId]);
  return Object.fromEntries(ROLLUP_SIZES.map((size) => [size, Number(rows.find((r) => r.size === size)?.n ?? 0)]));
}

const each = (n: number) => Object.fromEntries(ROLLUP_SIZES.map((size) => [size, n]));

describe('ingested events in the metrics roll-ups', () => {
  it('counts events stored over HTTP once its process writes its counts (within a second, or at once when flushed), in every bucket size', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey, { url: 'http://127.0.0.1:9/' });
    for (let i = 0; i < 5; i++) expect((await ingest(app, wh.publicId, { body: JSON.stringify({ i }), headers: { authorization: `Bearer ${wh.ingestSecret}` } })).status).toBe(202);
    // Not in the ingest statement any more: the process writes its counts once a second.
    await waitFor(async () => ((await ingested(wh.id))[60] === 5 ? true : null), 5_000);
    expect(await ingested(wh.id)).toEqual(each(5));
    // A refused event (paused webhook) is not counted; a flush at shutdown writes what is left.
    await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/pause`);
    expect((await ingest(app, wh.publicId, { body: '{}', headers: { authorization: `Bearer ${wh.ingestSecret}` } })).status).toBe(409);
    await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/resume`);
    expect((await ingest(app, wh.publicId, { body: '{}', headers: { authorization: `Bearer ${wh.ingestSecret}` } })).status).toBe(202);
    await flushIngestCounts(app.rt);
    expect(await ingested(wh.id)).toEqual(each(6));
    const { body } = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/metrics?window=1h`);
    expect(body.totals.ingested).toBe(6);
  });

  it("counts an event stored in a caller's transaction in that transaction: at once when it commits, never when it rolls back", async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey, { url: 'http://127.0.0.1:9/' });
    const tick = { scheduleId: 'sch_test', publicId: wh.publicId, payload: { ok: true }, contentType: 'application/json', headers: {}, tickAt: new Date() };
    await inTransaction(app.rt.db.pool, (client) => acceptCronTick(app.rt, tick, client));
    // Committed with the event: no flush needed.
    expect(await ingested(wh.id)).toEqual(each(1));
    await expect(
      inTransaction(app.rt.db.pool, async (client) => {
        await acceptCronTick(app.rt, tick, client);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    await flushIngestCounts(app.rt);
    expect(await ingested(wh.id)).toEqual(each(1));
    const { rows } = await app.rt.db.pool.query('SELECT count(*)::int AS n FROM events WHERE webhook_id = $1', [wh.id]);
    expect(rows[0].n).toBe(1);
  });

  it('adds counts to rows already there, and drops those of a webhook deleted before the write without failing the others', async () => {
    const { apiKey } = await ingestingProject(app);
    const kept = await createWebhook(app, apiKey, { url: 'http://127.0.0.1:9/' });
    const gone = await createWebhook(app, apiKey, { url: 'http://127.0.0.1:9/' });
    const projectId = (await app.rt.db.pool.query('SELECT project_id FROM webhooks WHERE id = $1', [kept.id])).rows[0].project_id;
    const counter = new IngestCounter(app.rt.db.pool, 60_000);
    counter.add(kept.id, projectId);
    counter.add(kept.id, projectId);
    await counter.flush();
    counter.add(kept.id, projectId);
    counter.add(gone.id, projectId);
    expect((await app.api(apiKey, 'POST', `/v1/webhooks/${gone.id}/archive`)).status).toBe(200);
    expect((await app.api(apiKey, 'POST', `/v1/webhooks/${gone.id}/destroy`)).status).toBe(200);
    await counter.flush();
    expect(await ingested(kept.id)).toEqual(each(3));
    expect(await ingested(gone.id)).toEqual(each(0));
  });
});
