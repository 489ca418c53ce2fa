import { capturedStatements } from './support/statements.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setProjectQuota } from '../src/projects/service.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

// Ingest keeps each webhook's lookup per process, so that an accepted event costs one statement.
// Whatever changes the webhook, on this process or another, must still apply to the next request.
let app: TestApp;
let other: TestApp;
beforeAll(async () => {
  app = await startTestApp();
  other = await startTestApp({ databaseUrl: app.databaseUrl });
});
afterAll(async () => {
  await other?.stop();
  await app?.stop();
});

/** Names of the statements `fn` sends through the app's pool. */
async function statementsOf(fn: () => Promise<unknown>): Promise<string[]> {
  return capturedStatements(app.rt.db.pool, fn);
}

const auth = (secret: string) => ({ 'x-webhook-secret': secret });

describe('ingest lookup cache', () => {
  it('reads a webhook once, then stores each event in one statement', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey);
    const first = await statementsOf(() => ingest(app, wh.publicId, { headers: auth(wh.ingestSecret) }));
    expect(first).toEqual(['find_ingest_target', 'ingest_insert_event_and_delivery_within_quotas']);
    const next = await statementsOf(async () => {
      for (let i = 0; i < 3; i++) expect((await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret) })).status).toBe(202);
    });
    expect(next.filter((n) => n === 'find_ingest_target')).toEqual([]);
    expect(next).toHaveLength(3);
  });

  it('applies a secret rotated on another process to the very next request', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey);
    expect((await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret) })).status).toBe(202);
    const rotated = await other.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/rotate-ingest-secret`, { graceSeconds: 0 });
    expect(rotated.status).toBe(200);
    expect((await ingest(app, wh.publicId, { headers: auth(rotated.body.ingestSecret) })).status).toBe(202);
    expect((await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret) })).status).toBe(401);
  });

  it('applies a pause, a resume and a new destination from another process to the very next request', async () => {
    const { apiKey } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey, { url: 'https://example.com/before' });
    expect((await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret) })).status).toBe(202);

    expect((await other.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/pause`)).status).toBe(200);
    const paused = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret) });
    expect(paused.status).toBe(409);
    expect(paused.body.error.code).toBe('webhook_paused');
    expect((await other.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/resume`)).status).toBe(200);
    expect((await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret) })).status).toBe(202);

    const def = (await other.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/destinations`)).body.items[0];
    const changed = await other.api(apiKey, 'PATCH', `/v1/webhooks/${wh.id}/destinations/${def.id}`, { config: { url: 'https://example.com/after' } });
    expect(changed.status).toBe(200);
    const accepted = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret) });
    expect(accepted.status).toBe(202);
    const delivery = await app.rt.db.prisma.delivery.findFirstOrThrow({ where: { eventId: accepted.body.eventId } });
    expect((delivery.destination as any).config.url).toBe('https://example.com/after');
  });

  it("applies a change of the project's quotas from another process to the very next request", async () => {
    const { apiKey, projectId } = await ingestingProject(app);
    const wh = await createWebhook(app, apiKey);
    expect((await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret) })).status).toBe(202);
    await setProjectQuota(other.rt, projectId, 'stored_payload_bytes', '1');
    const refused = await ingest(app, wh.publicId, { headers: auth(wh.ingestSecret) });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'quota_exceeded', quota: 'stored_payload_bytes' });
  });
});
