import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enforceReplayQuota } from '../src/projects/quotas/replay.ts';
import { TIER_QUOTAS } from '../src/projects/tiers.ts';
import { createWebhookRow, simulateIngest } from './support/quota-fixtures.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.stop();
});

describe('GET /v1/project', () => {
  it('shows id, name, tier, overage, effective quotas and current usage', async () => {
    const { apiKey, projectId } = await app.project('pro', 'acme');
    const wh = await createWebhookRow(app.rt, projectId);
    await simulateIngest(app.rt, projectId, wh.id, Buffer.alloc(10));
    await simulateIngest(app.rt, projectId, wh.id, Buffer.alloc(15));
    const project = await app.rt.db.prisma.project.findUniqueOrThrow({ where: { id: projectId } });
    await enforceReplayQuota(app.rt, null, { project, webhook: null, count: 4 });

    const res = await app.api(apiKey, 'GET', '/v1/project');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: projectId,
      name: 'acme',
      tier: 'pro',
      overageEnabled: false,
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
      quotas: TIER_QUOTAS.pro,
      usage: {
        month: new Date().toISOString().slice(0, 7),
        monthly_deliveries: 2,
        stored_payload_bytes: 25,
        file_storage_bytes: 0,
        backlog_depth: 2,
        replay_volume: 4,
      },
    });
  });
});

describe('PATCH /v1/project', () => {
  it('renames the project and validates its fields', async () => {
    const { apiKey } = await app.project('free', 'old');
    const ok = await app.api(apiKey, 'PATCH', '/v1/project', { name: '  new name ' });
    expect(ok.status).toBe(200);
    expect(ok.body.name).toBe('new name');
    const blank = await app.api(apiKey, 'PATCH', '/v1/project', { name: '  ' });
    expect(blank.status).toBe(400);
    expect(blank.body.error).toMatchObject({ code: 'invalid_request', param: 'name' });
    const wrongType = await app.api(apiKey, 'PATCH', '/v1/project', { overageEnabled: 'maybe' });
    expect(wrongType.status).toBe(400);
    expect(wrongType.body.error).toMatchObject({ code: 'invalid_request', param: 'overageEnabled' });
    const unknown = await app.api(apiKey, 'PATCH', '/v1/project', { tier: 'enterprise' });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toMatchObject({ code: 'invalid_request', param: 'tier' });
  });
});

describe('GET /v1/usage', () => {
  it('requires from and to, as ISO timestamps with from before to', async () => {
    const { apiKey } = await app.project('free');
    const cases: [string, string][] = [
      ['', 'from'],
      ['?from=2026-01-01T00:00:00Z', 'to'],
      ['?to=2026-01-01T00:00:00Z', 'from'],
      ['?from=yesterday&to=2026-01-01T00:00:00Z', 'from'],
      ['?from=2026-01-01T00:00:00Z&to=2026-13-45T00:00:00Z', 'to'],
      ['?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z', 'to'],
      ['?from=2026-01-01T00:00:00Z&to=2026-01-01T00:00:00Z', 'to'],
      ['?from=2020-01-01T00:00:00Z&to=2026-01-01T00:00:00Z', 'to'],
    ];
    for (const [query, param] of cases) {
      const res = await app.api(apiKey, 'GET', `/v1/usage${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body.error, query).toMatchObject({ code: 'invalid_request', param });
    }
  });

  it('reports deliveries and replays per day and month', async () => {
    const { apiKey, projectId } = await app.project('pro');
    const wh = await createWebhookRow(app.rt, projectId);
    for (let i = 0; i < 3; i++) await simulateIngest(app.rt, projectId, wh.id);
    const project = await app.rt.db.prisma.project.findUniqueOrThrow({ where: { id: projectId } });
    await enforceReplayQuota(app.rt, null, { project, webhook: wh, count: 2 });

    const now = Date.now();
    const today = new Date(now).toISOString().slice(0, 10);
    const yesterday = new Date(now - 86_400_000).toISOString().slice(0, 10);
    const from = new Date(now - 86_400_000).toISOString();
    const to = new Date(now + 60_000).toISOString();
    const res = await app.api(apiKey, 'GET', `/v1/usage?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`);
    expect(res.status).toBe(200);
    expect(res.body.from).toBe(from);
    expect(res.body.to).toBe(to);
    expect(res.body.days.at(-1)).toEqual({ date: today, deliveries: 3, replays: 2 });
    expect(res.body.days[0]).toEqual({ date: yesterday, deliveries: 0, replays: 0 });
    expect(res.body.totals).toEqual({ deliveries: 3, replays: 2 });
    expect(res.body.months.reduce((s: number, m: any) => s + m.deliveries, 0)).toBe(3);

    const before = await app.api(apiKey, 'GET', `/v1/usage?from=2026-01-01&to=2026-01-03`);
    expect(before.body.days).toEqual([
      { date: '2026-01-01', deliveries: 0, replays: 0 },
      { date: '2026-01-02', deliveries: 0, replays: 0 },
    ]);
  });
});

describe('API keys', () => {
  it('are created, listed with cursor pagination and revoked over REST, never showing the key or its hash', async () => {
    const { apiKey, projectId } = await app.project('free');
    const created = await app.api(apiKey, 'POST', '/v1/project/api-keys', { name: 'ci' });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      apiKey: { id: expect.stringMatching(/^key_/), name: 'ci', prefix: created.body.key.slice(0, 10), createdAt: expect.any(String), lastUsedAt: null, revokedAt: null },
      key: expect.stringMatching(/^sk_/),
    });
    await app.api(apiKey, 'POST', '/v1/project/api-keys', { name: 'third' });

    const first = await app.api(apiKey, 'GET', '/v1/project/api-keys?limit=2');
    expect(first.status).toBe(200);
    expect(first.body.items.map((k: any) => k.name)).toEqual(['third', 'ci']);
    expect(first.body.nextCursor).toEqual(expect.any(String));
    const second = await app.api(apiKey, 'GET', `/v1/project/api-keys?limit=2&cursor=${encodeURIComponent(first.body.nextCursor)}`);
    expect(second.body.items.map((k: any) => k.name)).toEqual(['default']);
    expect(second.body.nextCursor).toBeNull();
    const hashes = (await app.rt.db.prisma.apiKey.findMany({ where: { projectId } })).map((k) => k.hash);
    for (const page of [first, second]) {
      const text = JSON.stringify(page.body);
      expect(text).not.toContain(created.body.key);
      for (const h of hashes) expect(text).not.toContain(h);
      expect(Object.keys(page.body.items[0]).sort()).toEqual(['createdAt', 'id', 'lastUsedAt', 'name', 'prefix', 'revokedAt']);
    }

    // The key in use shows when it was last used (to the minute).
    const used = await waitFor(async () => (await app.api(apiKey, 'GET', '/v1/project/api-keys')).body.items.find((k: any) => k.name === 'default').lastUsedAt, 5000);
    expect(Math.abs(Date.parse(used) - Date.now())).toBeLessThan(120_000);

    expect((await app.api(apiKey, 'GET', '/v1/project/api-keys?limit=x')).body.error.code).toBe('invalid_limit');
    expect((await app.api(apiKey, 'GET', '/v1/project/api-keys?cursor=forged.cursor')).body.error.code).toBe('invalid_cursor');
    const other = await app.project('free');
    const foreignCursor = (await app.api(other.apiKey, 'GET', '/v1/project/api-keys?limit=1')).body.nextCursor;
    const reused = await app.api(apiKey, 'GET', `/v1/project/api-keys?cursor=${encodeURIComponent(foreignCursor ?? 'x.y')}`);
    expect(reused.status).toBe(400);

    const revoked = await app.api(apiKey, 'POST', `/v1/project/api-keys/${created.body.apiKey.id}/revoke`);
    expect(revoked.status).toBe(200);
    expect(revoked.body).toMatchObject({ id: created.body.apiKey.id, revokedAt: expect.any(String) });
    expect((await app.api(created.body.key, 'GET', '/v1/project')).status).toBe(401);
    expect((await app.api(apiKey, 'POST', `/v1/project/api-keys/${created.body.apiKey.id}/revoke`)).status).toBe(200);
    const foreign = await app.api(other.apiKey, 'POST', `/v1/project/api-keys/${created.body.apiKey.id}/revoke`);
    expect(foreign.status).toBe(404);
  });
});

describe('GET /v1/project/audit-logs', () => {
  it('lists project and API key writes newest first, by the key that made them, with filters bound to the cursor', async () => {
    const { apiKey, projectId } = await app.project('business');
    const [own] = await app.rt.db.prisma.apiKey.findMany({ where: { projectId } });
    const created = await app.api(apiKey, 'POST', '/v1/project/api-keys', { name: 'deploy' });
    await app.api(apiKey, 'POST', `/v1/project/api-keys/${created.body.apiKey.id}/revoke`);
    await app.api(apiKey, 'PATCH', '/v1/project', { overageEnabled: true, name: 'renamed' });

    const all = await app.api(apiKey, 'GET', '/v1/project/audit-logs');
    expect(all.status).toBe(200);
    expect(all.body.items.map((e: any) => e.action)).toEqual(['project.updated', 'api_key.revoked', 'api_key.created', 'api_key.created', 'project.created']);
    expect(all.body.items[0]).toEqual({
      id: expect.stringMatching(/^aud_/),
      actor: own.id,
      action: 'project.updated',
      targetType: 'project',
      targetId: projectId,
      data: { overageEnabled: true, name: 'renamed' },
      createdAt: expect.any(String),
    });
    expect(all.body.items[1]).toMatchObject({ actor: own.id, targetType: 'api_key', targetId: created.body.apiKey.id });
    expect(JSON.stringify(all.body)).not.toContain(created.body.key);

    const page1 = await app.api(apiKey, 'GET', '/v1/project/audit-logs?targetType=api_key&limit=2');
    expect(page1.body.items.map((e: any) => e.action)).toEqual(['api_key.revoked', 'api_key.created']);
    const cursor = encodeURIComponent(page1.body.nextCursor);
    const page2 = await app.api(apiKey, 'GET', `/v1/project/audit-logs?targetType=api_key&limit=2&cursor=${cursor}`);
    expect(page2.body.items.map((e: any) => e.action)).toEqual(['api_key.created']);
    expect(page2.body.nextCursor).toBeNull();
    const otherFilter = await app.api(apiKey, 'GET', `/v1/project/audit-logs?targetType=project&limit=2&cursor=${cursor}`);
    expect(otherFilter.status).toBe(400);
    expect(otherFilter.body.error.code).toBe('invalid_cursor');

    const gql = await app.api(apiKey, 'POST', '/graphql', { query: '{ auditLogsConnection(first: 2, action: "api_key.created") { edges { node { action targetId } } pageInfo { hasNextPage } } }' });
    expect(gql.body.data.auditLogsConnection.edges).toHaveLength(2);
    expect(gql.body.data.auditLogsConnection.pageInfo.hasNextPage).toBe(false);
  });
});
