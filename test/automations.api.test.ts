import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setProjectQuota } from '../src/projects/service.ts';
import { idBefore, runRetention } from '../src/retention/run.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { startReceiver } from './support/receiver.ts';
import { createWebhook } from './support/webhooks.ts';

let app: TestApp;
let off: TestApp;
beforeAll(async () => {
  app = await startTestApp();
  off = await startTestApp({ databaseUrl: app.databaseUrl, config: { AUTOMATIONS_ENABLED: false } });
});
afterAll(async () => {
  await off?.stop();
  await app?.stop();
});

const CODE = 'export default (event) => ({ text: `got ${event.body.type}` })';

async function create(apiKey: string, body: Record<string, unknown> = {}, a = app) {
  return a.api(apiKey, 'POST', '/v1/automations', { name: 'reshape', code: CODE, ...body });
}

/** As `npm run cli -- project set-quota PROJECT QUOTA VALUE` does (Enterprise custom quotas). */
async function setQuotas(projectId: string, quotas: Record<string, number>) {
  for (const [quota, value] of Object.entries(quotas)) await setProjectQuota(app.rt, projectId, quota, String(value));
}

async function setMonthlyUsage(projectId: string, metric: string, value: number) {
  await app.rt.db.pool.query(`DELETE FROM usage_counters WHERE project_id = $1 AND metric = $2`, [projectId, metric]);
  await app.rt.db.pool.query(
    `INSERT INTO usage_counters (project_id, webhook_id, metric, period, shard, value) VALUES ($1, '', $2, to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM'), 0, $3)`,
    [projectId, metric, value],
  );
}

describe('automations: routes', () => {
  it('a PATCH racing a delete answers 404, not 500', async () => {
    const { apiKey } = await app.project('pro');
    const a = (await create(apiKey)).body;
    // Another session holds the row, then deletes it: the PATCH (past its read) waits on the row, then finds it gone.
    const holder = await app.rt.db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM automations WHERE id = $1 FOR UPDATE', [a.id]);
      const patch = app.api(apiKey, 'PATCH', `/v1/automations/${a.id}`, { name: 'renamed' });
      let waiting = false;
      for (let i = 0; i < 200 && !waiting; i++) {
        const { rows } = await app.rt.db.pool.query(`SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'`);
        waiting = rows[0].n > 0;
        if (!waiting) await new Promise((r) => setTimeout(r, 25));
      }
      expect(waiting).toBe(true);
      await holder.query('DELETE FROM automations WHERE id = $1', [a.id]);
      await holder.query('COMMIT');
      const res = await patch;
      expect(res.status, JSON.stringify(res.body)).toBe(404);
      expect(res.body.error?.code ?? res.body.code).toBe('not_found');
    } finally {
      holder.release();
    }
  });

  it('create, get, list, patch, versions, delete', async () => {
    const { apiKey } = await app.project('pro');
    const created = await create(apiKey);
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const a = created.body;
    expect(a).toMatchObject({ name: 'reshape', status: 'active', currentVersion: 1 });
    expect(a.id).toMatch(/^aut_/);
    expect(typeof a.createdAt).toBe('string');
    expect((await app.api(apiKey, 'GET', `/v1/automations/${a.id}`)).body).toMatchObject({ id: a.id, currentVersion: 1 });

    const v2 = await app.api(apiKey, 'POST', `/v1/automations/${a.id}/versions`, { code: 'export default () => null' });
    expect(v2.status, JSON.stringify(v2.body)).toBe(201);
    expect(v2.body).toMatchObject({ automationId: a.id, version: 2 });
    expect(v2.body.codeSha256).toMatch(/^[0-9a-f]{64}$/);
    const versions = await app.api(apiKey, 'GET', `/v1/automations/${a.id}/versions?limit=1`);
    expect(versions.body.items.map((v: any) => v.version)).toEqual([2]);
    const older = await app.api(apiKey, 'GET', `/v1/automations/${a.id}/versions?limit=1&cursor=${versions.body.nextCursor}`);
    expect(older.body.items.map((v: any) => v.version)).toEqual([1]);
    expect(older.body.items[0].code).toBe(CODE);
    expect((await app.api(apiKey, 'GET', `/v1/automations/${a.id}`)).body.currentVersion).toBe(2);

    const patched = await app.api(apiKey, 'PATCH', `/v1/automations/${a.id}`, { name: 'renamed', status: 'disabled' });
    expect(patched.body).toMatchObject({ name: 'renamed', status: 'disabled' });
    expect((await app.api(apiKey, 'PATCH', `/v1/automations/${a.id}`, { status: 'paused' })).body.error).toMatchObject({ code: 'invalid_request', param: 'status' });

    const b = (await create(apiKey, { name: 'second' })).body;
    const list = await app.api(apiKey, 'GET', '/v1/automations');
    expect(list.body.items.map((x: any) => x.id)).toEqual([b.id, a.id]);

    // Another project's automation is 404, as if it did not exist.
    const other = await app.project('pro');
    expect((await app.api(other.apiKey, 'GET', `/v1/automations/${a.id}`)).status).toBe(404);
    expect((await app.api(other.apiKey, 'GET', `/v1/automations/${a.id}/runs`)).status).toBe(404);

    // Pinned by a webhook's transform: it cannot be deleted.
    const wh = await createWebhook(app, apiKey);
    const pinned = await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'automation', automationId: b.id });
    expect(pinned.status, JSON.stringify(pinned.body)).toBe(200);
    expect(pinned.body).toMatchObject({ kind: 'automation', automationId: b.id, version: 1 });
    expect((await app.api(apiKey, 'GET', `/v1/webhooks/${wh.id}/transform`)).body).toMatchObject({ kind: 'automation', automationId: b.id, version: 1 });
    expect((await app.api(apiKey, 'DELETE', `/v1/automations/${b.id}`)).body.error.code).toBe('invalid_state');
    await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: null });
    expect((await app.api(apiKey, 'DELETE', `/v1/automations/${b.id}`)).body).toEqual({ id: b.id, deleted: true });
    expect((await app.api(apiKey, 'GET', `/v1/automations/${b.id}`)).status).toBe(404);
  });

  it('validation: name, code that does not compile, transform pins', async () => {
    const { apiKey } = await app.project('pro');
    expect((await create(apiKey, { name: '' })).body.error).toMatchObject({ code: 'invalid_request', param: 'name' });
    expect((await create(apiKey, { code: undefined })).body.error).toMatchObject({ code: 'invalid_request', param: 'code' });
    const bad = await create(apiKey, { code: 'export default () => {' });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'invalid_request', param: 'code' });
    expect(bad.body.error.message).toMatch(/SyntaxError/);
    const a = (await create(apiKey)).body;
    const wh = await createWebhook(app, apiKey);
    expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'automation' })).body.error).toMatchObject({ param: 'automationId' });
    expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'automation', automationId: a.id, version: 9 })).body.error).toMatchObject({ param: 'version' });
    expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'automation', automationId: 'aut_nope' })).status).toBe(404);
    await app.api(apiKey, 'PATCH', `/v1/automations/${a.id}`, { status: 'disabled' });
    expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'automation', automationId: a.id })).body.error.code).toBe('invalid_state');
  });

  it('tier gates: Free is 403; the egress policy is Enterprise only', async () => {
    const free = await app.project('free');
    const r = await create(free.apiKey);
    expect(r.status).toBe(403);
    expect(r.body.error).toMatchObject({ code: 'tier_required', feature: 'automations', requiredTier: 'starter' });
    const pro = await app.project('pro');
    expect((await app.api(pro.apiKey, 'PUT', '/v1/project/egress-policy', { allowedHosts: ['api.example.com'] })).body.error).toMatchObject({ code: 'tier_required', requiredTier: 'enterprise' });
    expect((await app.api(pro.apiKey, 'GET', '/v1/project/egress-policy')).body).toEqual({ allowedHosts: [] });
    const ent = await app.project('enterprise');
    const set = await app.api(ent.apiKey, 'PUT', '/v1/project/egress-policy', { allowedHosts: ['API.example.com', 'hooks.slack.com'] });
    expect(set.body).toEqual({ allowedHosts: ['api.example.com', 'hooks.slack.com'] });
    expect((await app.api(ent.apiKey, 'PUT', '/v1/project/egress-policy', { allowedHosts: ['https://x.com/'] })).body.error).toMatchObject({ code: 'invalid_request' });
    expect((await app.api(ent.apiKey, 'PUT', '/v1/project/egress-policy', { allowedHosts: ['*.x.com'] })).status).toBe(400);
    expect((await app.api(ent.apiKey, 'GET', '/v1/project/egress-policy')).body).toEqual({ allowedHosts: ['api.example.com', 'hooks.slack.com'] });
  });

  it('AUTOMATIONS_ENABLED=false: 409 invalid_state on create and on use', async () => {
    const { apiKey } = await app.project('pro');
    const a = (await create(apiKey)).body;
    const wh = await createWebhook(app, apiKey);
    const refused = await create(apiKey, {}, off);
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('invalid_state');
    expect((await off.api(apiKey, 'POST', `/v1/automations/${a.id}/versions`, { code: CODE })).body.error.code).toBe('invalid_state');
    expect((await off.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'automation', automationId: a.id })).body.error.code).toBe('invalid_state');
    await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'automation', automationId: a.id });
    const test = await off.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/test-delivery`, { body: { type: 'x' } });
    expect(test.status).toBe(409);
    expect(test.body.error.code).toBe('invalid_state');
    // Reads still answer.
    expect((await off.api(apiKey, 'GET', `/v1/automations/${a.id}`)).status).toBe(200);
  });
});

describe('automations: quotas, one under and one over', () => {
  it('automations and active automations (Starter: 2 and 1)', async () => {
    const { apiKey } = await app.project('starter');
    const first = await create(apiKey);
    expect(first.status).toBe(201);
    const second = await create(apiKey);
    expect(second.status).toBe(409);
    expect(second.body.error).toMatchObject({ code: 'quota_exceeded', quota: 'active_automations', scope: 'project', limit: 1, current: 1, delta: 1 });
    await app.api(apiKey, 'PATCH', `/v1/automations/${first.body.id}`, { status: 'disabled' });
    expect((await create(apiKey)).status).toBe(201);
    await app.api(apiKey, 'PATCH', `/v1/automations/${first.body.id}`, { status: 'disabled' });
    const active = await app.api(apiKey, 'PATCH', `/v1/automations/${first.body.id}`, { status: 'active' });
    expect(active.body.error).toMatchObject({ code: 'quota_exceeded', quota: 'active_automations' });
    const third = await create(apiKey);
    expect(third.status).toBe(409);
    expect(third.body.error).toMatchObject({ quota: 'automations', limit: 2, current: 2 });
  });

  it('versions per automation and versions created per day ("worker creations")', async () => {
    const { apiKey, projectId } = await app.project('enterprise');
    await setQuotas(projectId, { automation_versions: 3, automation_worker_creations: 4 });
    const a = (await create(apiKey)).body;
    expect((await app.api(apiKey, 'POST', `/v1/automations/${a.id}/versions`, { code: CODE })).status).toBe(201);
    expect((await app.api(apiKey, 'POST', `/v1/automations/${a.id}/versions`, { code: CODE })).status).toBe(201);
    const over = await app.api(apiKey, 'POST', `/v1/automations/${a.id}/versions`, { code: CODE });
    expect(over.status).toBe(409);
    expect(over.body.error).toMatchObject({ code: 'quota_exceeded', quota: 'automation_versions', limit: 3, current: 3 });
    // 3 versions created today: one more creation is the 4th (under), then the 5th is over.
    expect((await create(apiKey)).status).toBe(201);
    const daily = await create(apiKey);
    expect(daily.status).toBe(429);
    expect(daily.body.error).toMatchObject({ code: 'quota_exceeded', quota: 'automation_worker_creations', limit: 4, current: 4 });
    expect(Number(daily.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('monthly runs, CPU ms, subrequests and log bytes refuse the run (test-delivery answers 429)', async () => {
    const { apiKey, projectId } = await app.project('starter');
    const a = (await create(apiKey)).body;
    const wh = await createWebhook(app, apiKey);
    await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'automation', automationId: a.id });
    const limits = { automation_runs: 5_000, automation_cpu_ms: 250_000, automation_subrequests: 10_000, automation_log_bytes: 10 * 1024 * 1024 };
    for (const [metric, limit] of Object.entries(limits)) {
      await setMonthlyUsage(projectId, metric, limit - 1);
      const under = await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/test-delivery`, { body: { type: 'ping' } });
      expect(under.status, `${metric}: ${JSON.stringify(under.body)}`).toBe(200);
      expect(under.body.payload, JSON.stringify(under.body)).toEqual({ text: "got ping" });
      await setMonthlyUsage(projectId, metric, limit);
      const over = await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/test-delivery`, { body: { type: 'ping' } });
      expect(over.status, metric).toBe(429);
      expect(over.body.error).toMatchObject({ code: 'quota_exceeded', quota: metric, scope: 'project', limit, current: limit, delta: 1 });
      expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
      await app.rt.db.pool.query(`DELETE FROM usage_counters WHERE project_id = $1 AND metric = $2`, [projectId, metric]);
    }
  });
});

describe('automations: test-delivery and runs', () => {
  it('runs the pinned version, records the run and counts it', async () => {
    const { apiKey, projectId } = await app.project('enterprise');
    const receiver = await startReceiver(() => ({ status: 200, headers: { 'content-type': 'application/json' }, body: '{"plan":"gold"}' }));
    try {
      await app.api(apiKey, 'PUT', '/v1/project/egress-policy', { allowedHosts: ['127.0.0.1'] });
      const code = `export default async (event, ctx) => {
        console.log('enriching', event.body.customer);
        const res = await ctx.fetch('${receiver.url}/customers/' + event.body.customer);
        const { plan } = await res.json();
        return { ...event.body, plan };
      }`;
      const a = (await create(apiKey, { code })).body;
      const wh = await createWebhook(app, apiKey);
      await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'automation', automationId: a.id });
      const r = await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/test-delivery`, { body: { customer: 'cus_1' } });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body).toMatchObject({ transformed: true, payload: { customer: 'cus_1', plan: 'gold' }, transformError: null, dropped: false });
      expect(receiver.received.map((x) => x.url)).toEqual(['/customers/cus_1']);
      const runs = await app.api(apiKey, 'GET', `/v1/automations/${a.id}/runs`);
      expect(runs.body.items).toHaveLength(1);
      expect(runs.body.items[0]).toMatchObject({ id: r.body.automationRunId, version: 1, deliveryId: null, status: 'ok', subrequests: 1, logs: 'enriching cus_1\n', error: null });
      expect(runs.body.items[0].cpuMs).toBeGreaterThan(0);
      const { rows } = await app.rt.db.pool.query(
        `SELECT metric, sum(value)::int AS v FROM usage_counters WHERE project_id = $1 AND metric LIKE 'automation_%' GROUP BY metric ORDER BY metric`,
        [projectId],
      );
      expect(Object.fromEntries(rows.map((x) => [x.metric, x.v]))).toMatchObject({ automation_runs: 1, automation_subrequests: 1, automation_log_bytes: 'enriching cus_1\n'.length });

      // A drop, and a failure.
      await app.api(apiKey, 'POST', `/v1/automations/${a.id}/versions`, { code: 'export default (e) => e.body.test ? null : e.body' });
      await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'automation', automationId: a.id });
      expect((await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/test-delivery`, { body: { test: true } })).body).toMatchObject({ payload: null, dropped: true, transformError: null });
      await app.api(apiKey, 'POST', `/v1/automations/${a.id}/versions`, { code: 'export default () => { while (true) {} }' });
      await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'automation', automationId: a.id, version: 3 });
      const loop = await app.api(apiKey, 'POST', `/v1/webhooks/${wh.id}/test-delivery`, { body: {} });
      expect(loop.body.transformError).toMatch(/cpu_limit/);
      const latest = (await app.api(apiKey, 'GET', `/v1/automations/${a.id}/runs?limit=1`)).body.items[0];
      expect(latest).toMatchObject({ version: 3, status: 'cpu_limit' });
    } finally {
      await receiver.close();
    }
  });
});

describe('automations: retention', () => {
  it("runs older than the project's history retention are removed by the retention pass", async () => {
    const { apiKey, projectId } = await app.project('starter');
    const a = (await create(apiKey)).body;
    const old = Date.now() - 15 * 86_400_000; // Starter keeps 14 days of history
    const insert = (id: string) =>
      app.rt.db.pool.query(
        `INSERT INTO automation_runs (id, project_id, automation_id, version, status, cpu_ms, subrequests, logs, log_bytes, logs_truncated) VALUES ($1, $2, $3, 1, 'ok', 1, 0, '', 0, false)`,
        [id, projectId, a.id],
      );
    await insert(`${idBefore('run', old)}0000000000000001`);
    await insert(`${idBefore('run', Date.now())}0000000000000001`);
    const r = await runRetention(app.rt);
    expect(r.automationRunsDeleted).toBe(1);
    expect((await app.api(apiKey, 'GET', `/v1/automations/${a.id}/runs`)).body.items).toHaveLength(1);
  });
});

describe('automations: the concurrency count in PostgreSQL', () => {
  it('automation_leases_take admits up to the limit across connections, a slot at a time too; an expired lease frees its slot', async () => {
    const { projectId } = await app.project('pro');
    const take = async (lease: string, limit: number, ttlMs = 30_000) => {
      // A fresh connection each time, as another process would use.
      const client = await app.rt.db.pool.connect();
      try {
        return (await client.query('SELECT cardinality(automation_leases_take($1, ARRAY[$2::text], $3, $4)) = 1 AS ok', [projectId, lease, limit, ttlMs])).rows[0].ok as boolean;
      } finally {
        client.release();
      }
    };
    expect(await Promise.all([take('alz_a', 2), take('alz_b', 2), take('alz_c', 2), take('alz_d', 2)])).toEqual(expect.arrayContaining([true, true, false, false]));
    await app.rt.db.pool.query(`DELETE FROM automation_leases WHERE project_id = $1 AND id IN ('alz_a', 'alz_b', 'alz_c', 'alz_d') AND id = (SELECT min(id) FROM automation_leases WHERE project_id = $1)`, [projectId]);
    expect(await take('alz_e', 2)).toBe(true);
    expect(await take('alz_f', 2)).toBe(false);
    await app.rt.db.pool.query(`UPDATE automation_leases SET expires_at = now() - interval '1 second' WHERE project_id = $1`, [projectId]);
    expect(await take('alz_g', 1)).toBe(true);
    const { rows } = await app.rt.db.pool.query('SELECT id FROM automation_leases WHERE project_id = $1', [projectId]);
    expect(rows.map((r) => r.id)).toEqual(['alz_g']);
  });
});
