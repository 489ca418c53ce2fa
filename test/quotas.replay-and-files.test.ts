import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { inTransaction } from '../src/db/client.ts';
import { toHttpError } from '../src/errors.ts';
import { enforceFileStorageQuota, fileStorageCheck, releaseFileStorage } from '../src/projects/quotas/file-storage.ts';
import { enforceReplayQuota } from '../src/projects/quotas/replay.ts';
import { setProjectQuota } from '../src/projects/service.ts';
import { readUsage } from '../src/projects/usage.ts';
import { createWebhookRow, rejection, simulateIngest } from './support/quota-fixtures.ts';
import { startTestApp, type TestApp } from './support/app.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.stop();
});

async function load(projectId: string, webhookId?: string) {
  const project = await app.rt.db.prisma.project.findUniqueOrThrow({ where: { id: projectId } });
  const webhook = webhookId ? await app.rt.db.prisma.webhook.findUniqueOrThrow({ where: { id: webhookId } }) : null;
  return { project, webhook };
}

const replay = (projectId: string, webhookId: string | null, count: number) =>
  inTransaction(app.rt.db.pool, async (client) => {
    const { project, webhook } = await load(projectId, webhookId ?? undefined);
    await enforceReplayQuota(app.rt, client, { project, webhook, count });
  });

describe('replay_volume', () => {
  it('allows 50 replays per 24 hours on Free, then answers 429 with when room frees up', async () => {
    const { projectId } = await app.project('free');
    const wh = await createWebhookRow(app.rt, projectId);
    await replay(projectId, wh.id, 49);
    await replay(projectId, wh.id, 1);
    // Room frees when the oldest hour of the 24-hour window ends: seconds from the refusal to the
    // start of its hour + 24 h, bracketed by the times before and after the refusal (±1 s rounding).
    const freesIn = (t: number) => Math.ceil((t - (t % 3_600_000) + 24 * 3_600_000 - t) / 1000);
    const before = Date.now();
    const err = await rejection(replay(projectId, wh.id, 1));
    const after = Date.now();
    expect(err.details.retryAfterSec).toBeGreaterThanOrEqual(Math.min(freesIn(before), freesIn(after)) - 1);
    expect(err.details.retryAfterSec).toBeLessThanOrEqual(Math.max(freesIn(before), freesIn(after)) + 1);
    expect(err.toBody()).toEqual({
      error: { code: 'quota_exceeded', message: expect.any(String), quota: 'replay_volume', scope: 'project', limit: 50, current: 50, delta: 1, retryAfterSec: err.details.retryAfterSec },
    });
    const http = toHttpError(err);
    expect(http.status).toBe(429);
    expect(http.headers['retry-after']).toBe(String(err.details.retryAfterSec));
    expect((await readUsage(app.rt, projectId)).replay_volume).toBe(50);
  });

  it('counts nothing when the replaying transaction rolls back, and has no retry time for a batch that can never fit', async () => {
    const { projectId } = await app.project('free');
    await rejection(
      inTransaction(app.rt.db.pool, async (client) => {
        const { project } = await load(projectId);
        await enforceReplayQuota(app.rt, client, { project, count: 10 });
        throw new Error('insert failed');
      }),
    );
    expect((await readUsage(app.rt, projectId)).replay_volume).toBe(0);
    const err = await rejection(replay(projectId, null, 51));
    expect(err.details).toEqual({ quota: 'replay_volume', scope: 'project', limit: 50, current: 0, delta: 51 });
    expect(toHttpError(err).headers['retry-after']).toBeUndefined();
  });

  it('applies a webhook override to that webhook', async () => {
    const { projectId } = await app.project('pro');
    const wh = await createWebhookRow(app.rt, projectId, { replay_volume: 5 });
    const other = await createWebhookRow(app.rt, projectId);
    await replay(projectId, wh.id, 5);
    const err = await rejection(replay(projectId, wh.id, 1));
    expect(err.details).toMatchObject({ quota: 'replay_volume', scope: 'webhook', limit: 5, current: 5, delta: 1 });
    await replay(projectId, other.id, 100);
    expect((await readUsage(app.rt, projectId)).replay_volume).toBe(105);
  });

  it('also checks the backlog the replayed deliveries would add to', async () => {
    const { projectId } = await app.project('enterprise');
    await setProjectQuota(app.rt, projectId, 'backlog_depth', '3');
    const wh = await createWebhookRow(app.rt, projectId);
    await simulateIngest(app.rt, projectId, wh.id);
    const err = await rejection(replay(projectId, wh.id, 3));
    expect(err.details).toMatchObject({ quota: 'backlog_depth', scope: 'project', limit: 3, current: 1, delta: 3 });
    expect(err.status).toBe(409);
    await replay(projectId, wh.id, 2);
  });
});

describe('file_storage_bytes', () => {
  const store = (projectId: string, webhookId: string | null, bytes: number) =>
    inTransaction(app.rt.db.pool, async (client) => {
      const { project, webhook } = await load(projectId, webhookId ?? undefined);
      await enforceFileStorageQuota(app.rt, client, { project, webhook, bytes });
    });

  it('stores no file content on Free (limit 0)', async () => {
    const { projectId } = await app.project('free');
    const err = await rejection(store(projectId, null, 1));
    expect(err.toBody()).toEqual({ error: { code: 'quota_exceeded', message: expect.any(String), quota: 'file_storage_bytes', scope: 'project', limit: 0, current: 0, delta: 1 } });
    expect(err.status).toBe(409);
  });

  it('counts stored bytes up to the limit and gives them back when files are deleted', async () => {
    const { projectId } = await app.project('enterprise');
    await setProjectQuota(app.rt, projectId, 'file_storage_bytes', '1000');
    const wh = await createWebhookRow(app.rt, projectId, { file_storage_bytes: 600 });
    await store(projectId, wh.id, 600);
    expect((await rejection(store(projectId, wh.id, 1))).details).toMatchObject({ quota: 'file_storage_bytes', scope: 'webhook', limit: 600, current: 600 });
    await store(projectId, null, 400);
    expect((await rejection(store(projectId, null, 1))).details).toMatchObject({ quota: 'file_storage_bytes', scope: 'project', limit: 1000, current: 1000 });
    await releaseFileStorage(app.rt.db.pool, { projectId, webhookId: wh.id, bytes: 250 });
    expect((await readUsage(app.rt, projectId)).file_storage_bytes).toBe(750);
    await store(projectId, wh.id, 250);
  });

  it('skips reading the usage in the ingest statement for 100 ms after a reading far from the limits, not near them, and never where ingest is exact', async () => {
    const { projectId } = await app.project('enterprise');
    await setProjectQuota(app.rt, projectId, 'file_storage_bytes', String(10 * 1024 ** 3));
    const { project, webhook } = await load(projectId);
    const input = { project, webhook, bytes: 100 * 1024 };
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() });
    try {
      // No reading yet: the statement reads the usage, under the quota lock.
      const first = fileStorageCheck(app.rt, input, { countOnly: true })!;
      expect(first.exact).toBe(true);
      first.enforce({ files_fit: true, file_usage: ['0', '0'] });
      // Far from the limit a moment ago: counted without a check (the statement's `count` shape)...
      expect(fileStorageCheck(app.rt, input, { countOnly: true })).toBeNull();
      // ...unless the ingest checks are exact (their quota lock is held): then it reads, exactly.
      expect(fileStorageCheck(app.rt, input)).not.toBeNull();
      // Older than 100 ms but under 250 ms: read again, without the lock, which refreshes the reading.
      vi.setSystemTime(Date.now() + 120);
      const again = fileStorageCheck(app.rt, input, { countOnly: true })!;
      expect(again.exact).toBe(false);
      // Uploads so large that 1,000 of them would pass the limit: read every time.
      expect(fileStorageCheck(app.rt, { ...input, bytes: 20 * 1024 * 1024 }, { countOnly: true })).not.toBeNull();
      // A reading near the limit: always read, under the lock.
      again.enforce({ files_fit: true, file_usage: [String(10 * 1024 ** 3 - 1024 * 1024), '0'] });
      expect(fileStorageCheck(app.rt, input, { countOnly: true })?.exact).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });
});
