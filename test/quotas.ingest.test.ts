import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toHttpError } from '../src/errors.ts';
import { setProjectQuota, updateProject } from '../src/projects/service.ts';
import { TIER_QUOTAS } from '../src/projects/tiers.ts';
import { createWebhookRow, rejection, simulateIngest, withinOneSecond } from './support/quota-fixtures.ts';
import { startTestApp, type TestApp } from './support/app.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
  // Warm the connections and prepared statements so timed sequences fit in one second.
  const { projectId } = await app.project('pro');
  await simulateIngest(app.rt, projectId, (await createWebhookRow(app.rt, projectId)).id);
});
afterAll(async () => {
  await app?.stop();
});

const MB = 1024 * 1024;

/** Inserts `n` deliveries of one event with `status` straight into the table (the triggers count them). */
async function seedDeliveries(projectId: string, webhookId: string, n: number, status: string) {
  const { eventId } = await simulateIngestUnchecked(projectId, webhookId);
  await app.rt.db.pool.query(
    `INSERT INTO deliveries (id, project_id, webhook_id, event_id, destination, status)
     SELECT 'del_' || $3 || '_' || $4 || '_' || g, $1, $2, $3, '{}', $4 FROM generate_series(1, $5) g`,
    [projectId, webhookId, eventId, status, n],
  );
}

/** An event row without a quota check and without a delivery (seeding). */
async function simulateIngestUnchecked(projectId: string, webhookId: string, bodyBytes = 0) {
  const eventId = `evt_seed_${Math.random().toString(36).slice(2)}`;
  await app.rt.db.pool.query(
    `INSERT INTO events (id, project_id, webhook_id, channel, body, body_size) VALUES ($1, $2, $3, 'http', convert_to(repeat('a', $4::int), 'UTF8'), $4)`,
    [eventId, projectId, webhookId, bodyBytes],
  );
  return { eventId };
}

function expectQuotaError(err: any, expected: Record<string, unknown>, status: number) {
  expect(err?.code).toBe('quota_exceeded');
  expect(err.status).toBe(status);
  const body = err.toBody();
  expect(body).toEqual({ error: { code: 'quota_exceeded', message: expect.any(String), ...expected } });
  const http = toHttpError(err);
  expect(http.status).toBe(status);
  if (expected.retryAfterSec !== undefined) expect(http.headers['retry-after']).toBe(String(expected.retryAfterSec));
  else expect(http.headers['retry-after']).toBeUndefined();
}

describe('ingest_rate', () => {
  it('lets a Free project ingest 3 requests in a second and answers the 4th with 429', async () => {
    const { projectId } = await app.project('free');
    const wh = await createWebhookRow(app.rt, projectId);
    const results = await withinOneSecond(async () => {
      const out: unknown[] = [];
      for (let i = 0; i < 4; i++) out.push(await simulateIngest(app.rt, projectId, wh.id).catch((e) => e));
      return out;
    });
    expect(results.slice(0, 3).every((r: any) => r.deliveryId)).toBe(true);
    expectQuotaError(results[3], { quota: 'ingest_rate', scope: 'project', limit: 3, current: 3, delta: 1, retryAfterSec: 1 }, 429);
  });

  it('applies a webhook override to that webhook only', async () => {
    const { projectId } = await app.project('pro');
    const tight = await createWebhookRow(app.rt, projectId, { ingest_rate: 2 });
    const other = await createWebhookRow(app.rt, projectId);
    const results = await withinOneSecond(async () => {
      const out: unknown[] = [];
      for (let i = 0; i < 3; i++) out.push(await simulateIngest(app.rt, projectId, tight.id).catch((e) => e));
      out.push(await simulateIngest(app.rt, projectId, other.id).catch((e) => e));
      return out;
    });
    expect((results[0] as any).deliveryId).toBeTruthy();
    expect((results[1] as any).deliveryId).toBeTruthy();
    expectQuotaError(results[2], { quota: 'ingest_rate', scope: 'webhook', limit: 2, current: 2, delta: 1, retryAfterSec: 1 }, 429);
    expect((results[3] as any).deliveryId).toBeTruthy();
  });

  it('counts a request only when its ingest commits', async () => {
    const { projectId } = await app.project('free');
    const wh = await createWebhookRow(app.rt, projectId, { backlog_depth: 0 });
    const results = await withinOneSecond(async () => {
      const refused = await simulateIngest(app.rt, projectId, wh.id).catch((e) => e); // backlog 0: rolled back
      await app.rt.db.prisma.webhook.update({ where: { id: wh.id }, data: { quotaOverrides: {} } });
      const out: unknown[] = [refused];
      for (let i = 0; i < 3; i++) out.push(await simulateIngest(app.rt, projectId, wh.id).catch((e) => e));
      return out;
    });
    expect((results[0] as any).details.quota).toBe('backlog_depth');
    expect(results.slice(1).every((r: any) => r.deliveryId)).toBe(true);
  });
});

describe('monthly_deliveries', () => {
  it('hard-blocks a Free project at 5,000 deliveries, with the seconds left in the month', async () => {
    const { projectId } = await app.project('free');
    const wh = await createWebhookRow(app.rt, projectId);
    await seedDeliveries(projectId, wh.id, TIER_QUOTAS.free.monthly_deliveries - 1, 'succeeded');
    await simulateIngest(app.rt, projectId, wh.id); // the 5,000th
    const err = await rejection(simulateIngest(app.rt, projectId, wh.id));
    const now = new Date();
    const monthLeft = Math.ceil((Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1) - now.getTime()) / 1000);
    expect(Math.abs(err.details.retryAfterSec - monthLeft)).toBeLessThan(60);
    expectQuotaError(err, { quota: 'monthly_deliveries', scope: 'project', limit: 5000, current: 5000, delta: 1, retryAfterSec: err.details.retryAfterSec }, 429);

    // Overage on Free does not exist, even if the flag were set (e.g. after a downgrade).
    await app.rt.db.prisma.project.update({ where: { id: projectId }, data: { overageEnabled: true } });
    expect((await rejection(simulateIngest(app.rt, projectId, wh.id))).details.quota).toBe('monthly_deliveries');
  });

  it('blocks a paid project at its limit until it opts into overage, and keeps counting beyond', async () => {
    const { projectId } = await app.project('starter');
    const wh = await createWebhookRow(app.rt, projectId);
    await seedDeliveries(projectId, wh.id, TIER_QUOTAS.starter.monthly_deliveries - 1, 'succeeded');
    await simulateIngest(app.rt, projectId, wh.id);
    const err = await rejection(simulateIngest(app.rt, projectId, wh.id));
    expect(err.details).toMatchObject({ quota: 'monthly_deliveries', limit: 25_000, current: 25_000, delta: 1 });

    await updateProject(app.rt, projectId, { overageEnabled: true }, 'test');
    await simulateIngest(app.rt, projectId, wh.id);
    await simulateIngest(app.rt, projectId, wh.id);
    const { rows } = await app.rt.db.pool.query(
      `SELECT sum(value)::int AS n FROM usage_counters WHERE project_id = $1 AND webhook_id = '' AND metric = 'deliveries' AND length(period) = 7`,
      [projectId],
    );
    expect(rows[0].n).toBe(25_002);

    await updateProject(app.rt, projectId, { overageEnabled: false }, 'test');
    expect((await rejection(simulateIngest(app.rt, projectId, wh.id))).details).toMatchObject({ quota: 'monthly_deliveries', current: 25_002 });
  });
});

describe('backlog_depth', () => {
  it('answers 409 when a Free project has 500 deliveries not yet terminal, and lets one through once one finishes', async () => {
    const { projectId } = await app.project('free');
    const wh = await createWebhookRow(app.rt, projectId);
    await seedDeliveries(projectId, wh.id, 300, 'queued');
    await seedDeliveries(projectId, wh.id, 100, 'retrying');
    await seedDeliveries(projectId, wh.id, 99, 'scheduled');
    await seedDeliveries(projectId, wh.id, 1000, 'succeeded');
    await simulateIngest(app.rt, projectId, wh.id); // the 500th
    const err = await rejection(simulateIngest(app.rt, projectId, wh.id));
    expectQuotaError(err, { quota: 'backlog_depth', scope: 'project', limit: 500, current: 500, delta: 1 }, 409);

    await app.rt.db.pool.query(`UPDATE deliveries SET status = 'succeeded' WHERE id IN (SELECT id FROM deliveries WHERE project_id = $1 AND status = 'queued' LIMIT 1)`, [projectId]);
    await new Promise((r) => setTimeout(r, 1000)); // Free: 3 req/s
    await simulateIngest(app.rt, projectId, wh.id);
  });

  it('applies a webhook override to that webhook', async () => {
    const { projectId } = await app.project('pro');
    const wh = await createWebhookRow(app.rt, projectId, { backlog_depth: 2 });
    const other = await createWebhookRow(app.rt, projectId);
    await simulateIngest(app.rt, projectId, wh.id);
    await simulateIngest(app.rt, projectId, wh.id);
    const err = await rejection(simulateIngest(app.rt, projectId, wh.id));
    expectQuotaError(err, { quota: 'backlog_depth', scope: 'webhook', limit: 2, current: 2, delta: 1 }, 409);
    await simulateIngest(app.rt, projectId, other.id);
    // A delivery that goes to the DLQ (failed) leaves the backlog.
    await app.rt.db.pool.query(`UPDATE deliveries SET status = 'failed' WHERE id IN (SELECT id FROM deliveries WHERE webhook_id = $1 LIMIT 1)`, [wh.id]);
    await simulateIngest(app.rt, projectId, wh.id);
  });
});

describe('stored_payload_bytes', () => {
  it('answers 409 when a Free project would retain more than 50 MB, and frees room when payloads expire', async () => {
    const { projectId } = await app.project('free');
    const wh = await createWebhookRow(app.rt, projectId);
    const { eventId } = await simulateIngestUnchecked(projectId, wh.id, 50 * MB - 100);
    await simulateIngest(app.rt, projectId, wh.id, Buffer.alloc(100, 'x')); // exactly at the limit
    const err = await rejection(simulateIngest(app.rt, projectId, wh.id, Buffer.from('y')));
    expectQuotaError(err, { quota: 'stored_payload_bytes', scope: 'project', limit: 50 * MB, current: 50 * MB, delta: 1 }, 409);

    await app.rt.db.pool.query(`UPDATE events SET body = NULL WHERE id = $1`, [eventId]); // payload retention
    await new Promise((r) => setTimeout(r, 1000));
    await simulateIngest(app.rt, projectId, wh.id, Buffer.from('y'));
  });

  it('applies a webhook override to that webhook', async () => {
    const { projectId } = await app.project('pro');
    const wh = await createWebhookRow(app.rt, projectId, { stored_payload_bytes: 1000 });
    await simulateIngest(app.rt, projectId, wh.id, Buffer.alloc(600));
    await simulateIngest(app.rt, projectId, wh.id, Buffer.alloc(400));
    const err = await rejection(simulateIngest(app.rt, projectId, wh.id, Buffer.alloc(1)));
    expectQuotaError(err, { quota: 'stored_payload_bytes', scope: 'webhook', limit: 1000, current: 1000, delta: 1 }, 409);
  });
});

describe('Enterprise custom quotas', () => {
  it('replace the tier values they name', async () => {
    const { projectId } = await app.project('enterprise');
    await setProjectQuota(app.rt, projectId, 'backlog_depth', '1');
    const wh = await createWebhookRow(app.rt, projectId);
    await simulateIngest(app.rt, projectId, wh.id);
    expect((await rejection(simulateIngest(app.rt, projectId, wh.id))).details).toMatchObject({ quota: 'backlog_depth', scope: 'project', limit: 1, current: 1 });
    await setProjectQuota(app.rt, projectId, 'backlog_depth', 'default');
    await simulateIngest(app.rt, projectId, wh.id);
  });
});
