/**
 * A webhook's change notification says the config_version it made (migration
 * ingest_target_change_version): a process drops a kept ingest lookup only when it is older. The
 * notification of a change this process already saw (it dropped its own lookups before answering,
 * and read the webhook again since) arrives a moment later and no longer costs another read.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ingestTargets } from '../src/ingest/ingest-target-cache.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { capturedStatements } from './support/statements.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

let app: TestApp;
let notifier: pg.Client;
beforeAll(async () => {
  app = await startTestApp();
  notifier = new pg.Client({ connectionString: app.databaseUrl });
  await notifier.connect();
});
afterAll(async () => {
  await notifier?.end();
  await app?.stop();
});

/** The notification a webhook's change sends (as the trigger writes it), from another connection: heard in the order sent. */
const notify = (publicIds: string[], v?: number) =>
  notifier.query(`SELECT pg_notify('app_events', $1)`, [JSON.stringify({ t: 'ingest-targets:changed', p: v === undefined ? { publicIds } : { publicIds, v } })]);

describe('ingest lookups and versioned change notifications', () => {
  it('keeps a lookup a notification is not newer than, drops it for a newer one or a deleted webhook', async () => {
    const { apiKey } = await ingestingProject(app);
    const a = await createWebhook(app, apiKey);
    const b = await createWebhook(app, apiKey);
    const cache = ingestTargets(app.rt);
    const version = async (id: string) => (await app.rt.db.pool.query('SELECT config_version FROM webhooks WHERE id = $1', [id])).rows[0].config_version as number;
    const post = (wh: typeof a) => ingest(app, wh.publicId, { headers: { 'x-webhook-secret': wh.ingestSecret } });
    expect((await post(a)).status).toBe(202);
    expect((await post(b)).status).toBe(202);
    /** Every notification sent before has been heard once `b`'s lookup, kept until then, is dropped by one without a version. */
    const heard = async () => {
      expect(cache.has(b.publicId)).toBe(true);
      await notify([b.publicId]);
      await waitFor(() => !cache.has(b.publicId) || null, 10_000);
      expect((await post(b)).status).toBe(202);
    };
    await heard();
    expect(cache.has(a.publicId), "kept once the creation's own notifications were heard").toBe(true);

    // Its own version again (the notification of a change already seen): kept, and a warm ingest is one statement.
    await notify([a.publicId], await version(a.id));
    await heard();
    expect(cache.has(a.publicId)).toBe(true);
    expect(await capturedStatements(app.rt.db.pool, () => post(a))).toHaveLength(1);

    // A change made elsewhere (as with psql): its notification carries the version it made, newer
    // than the kept lookup's, which goes; the next ingest reads the webhook again and keeps it.
    const before = await version(a.id);
    await notifier.query(`UPDATE webhooks SET timeout_ms = 9000 WHERE id = $1`, [a.id]);
    expect(await version(a.id)).toBeGreaterThan(before);
    await waitFor(() => !cache.has(a.publicId) || null, 10_000);
    const again = await capturedStatements(app.rt.db.pool, () => post(a));
    expect(again).toEqual(['find_ingest_target', expect.stringMatching(/^ingest_insert_event/)]);
    expect(cache.has(a.publicId)).toBe(true);

    // No version (a deleted webhook's notification): dropped whatever its version.
    await notify([a.publicId]);
    await waitFor(() => !cache.has(a.publicId) || null, 10_000);
  });
});
