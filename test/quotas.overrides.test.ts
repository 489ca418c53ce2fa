import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setProjectQuota, setProjectTier } from '../src/projects/service.ts';
import { TIER_QUOTAS } from '../src/projects/tiers.ts';
import { createWebhookRow } from './support/quota-fixtures.ts';
import { startTestApp, type TestApp } from './support/app.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.stop();
});

const NO_OVERRIDES = {
  ingest_rate: null,
  stored_payload_bytes: null,
  file_storage_bytes: null,
  backlog_depth: null,
  replay_volume: null,
  history_retention_seconds: null,
  payload_retention_seconds: null,
};

describe('PUT /v1/webhooks/:id/quota-overrides', () => {
  it('tightens limits for one webhook and shows the effective ones', async () => {
    const { apiKey, projectId } = await app.project('pro');
    const wh = await createWebhookRow(app.rt, projectId);
    const res = await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/quota-overrides`, { ingest_rate: 5, backlog_depth: 10_000, payload_retention_seconds: 3600 });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      webhookId: wh.id,
      quotaOverrides: { ...NO_OVERRIDES, ingest_rate: 5, backlog_depth: 10_000, payload_retention_seconds: 3600 },
      effectiveQuotas: { ...TIER_QUOTAS.pro, ingest_rate: 5, payload_retention_seconds: 3600 },
    });
    const stored = await app.rt.db.prisma.webhook.findUniqueOrThrow({ where: { id: wh.id } });
    expect(stored.quotaOverrides).toEqual({ ingest_rate: 5, backlog_depth: 10_000, payload_retention_seconds: 3600 });

    // Left out: kept. null: removed.
    const merged = await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/quota-overrides`, { ingest_rate: null, replay_volume: 10 });
    expect(merged.body.quotaOverrides).toEqual({ ...NO_OVERRIDES, backlog_depth: 10_000, payload_retention_seconds: 3600, replay_volume: 10 });
    expect(merged.body.effectiveQuotas.ingest_rate).toBe(25);
    const read = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/quota-overrides`);
    expect(read.body).toEqual(merged.body);
  });

  it('never loosens: a value above the project limit is 400 and changes nothing', async () => {
    const { apiKey, projectId } = await app.project('pro');
    const wh = await createWebhookRow(app.rt, projectId, { backlog_depth: 7 });
    for (const [quota, value] of [
      ['ingest_rate', 26],
      ['stored_payload_bytes', 2 * 1024 ** 3 + 1],
      ['history_retention_seconds', 30 * 86_400 + 1],
    ] as const) {
      const res = await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/quota-overrides`, { backlog_depth: 3, [quota]: value });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: { code: 'invalid_request', message: expect.stringContaining('tighten'), param: quota } });
    }
    const stored = await app.rt.db.prisma.webhook.findUniqueOrThrow({ where: { id: wh.id } });
    expect(stored.quotaOverrides).toEqual({ backlog_depth: 7 });
  });

  it('rejects values that are not non-negative integers and unknown quotas', async () => {
    const { apiKey, projectId } = await app.project('pro');
    const wh = await createWebhookRow(app.rt, projectId);
    for (const body of [{ ingest_rate: -1 }, { ingest_rate: 1.5 }, { ingest_rate: 'fast' }, { monthly_deliveries: 10 }, { nope: 1 }]) {
      const res = await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/quota-overrides`, body);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: Object.keys(body)[0] });
    }
  });

  it('answers 404 for an unknown webhook or one of another project', async () => {
    const mine = await app.project('pro');
    const theirs = await app.project('pro');
    const foreign = await createWebhookRow(app.rt, theirs.projectId);
    for (const id of [foreign.id, 'wh_unknown']) {
      const put = await app.api(mine.apiKey, 'PUT', `/v1/webhooks/${id}/quota-overrides`, { ingest_rate: 1 });
      expect(put.status).toBe(404);
      expect(put.body.error.code).toBe('not_found');
      expect((await app.api(mine.apiKey, 'GET', `/v1/webhooks/${id}/quota-overrides`)).status).toBe(404);
    }
  });

  it('is bounded by Enterprise custom quotas, and a later tier change still only tightens', async () => {
    const { apiKey, projectId } = await app.project('enterprise');
    await setProjectQuota(app.rt, projectId, 'ingest_rate', '1000');
    const wh = await createWebhookRow(app.rt, projectId);
    const res = await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/quota-overrides`, { ingest_rate: 800 });
    expect(res.body.effectiveQuotas.ingest_rate).toBe(800);
    expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/quota-overrides`, { ingest_rate: 1001 })).status).toBe(400);

    await setProjectTier(app.rt, projectId, 'starter');
    const after = await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/quota-overrides`);
    expect(after.body.quotaOverrides.ingest_rate).toBe(800);
    expect(after.body.effectiveQuotas.ingest_rate).toBe(10);
  });

  it('works over GraphQL and is written to the audit log', async () => {
    const { apiKey, projectId } = await app.project('business');
    const wh = await createWebhookRow(app.rt, projectId);
    const res = await app.api(apiKey, 'POST', '/graphql', {
      query: 'mutation($id: ID!) { setWebhookQuotaOverrides(id: $id, replay_volume: 12) { quotaOverrides { replay_volume } effectiveQuotas { replay_volume } } }',
      variables: { id: wh.id },
    });
    expect(res.body.data.setWebhookQuotaOverrides).toEqual({ quotaOverrides: { replay_volume: 12 }, effectiveQuotas: { replay_volume: 12 } });
    const logs = await app.api(apiKey, 'GET', `/v1/project/audit-logs?targetType=webhook&targetId=${wh.id}`);
    expect(logs.body.items).toEqual([
      expect.objectContaining({ action: 'webhook.quota_overrides_updated', targetType: 'webhook', targetId: wh.id, data: { replay_volume: 12 }, actor: expect.stringMatching(/^key_/) }),
    ]);
  });
});
