import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../src/ids.ts';
import { RunRecorder, type RunRecord } from '../src/automations/run-records.ts';
import { LINGER_MS, SlotPool } from '../src/automations/slots.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { startReceiver } from './support/receiver.ts';
import { createWebhook, ingest } from './support/webhooks.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: true });
});
afterAll(async () => {
  await app?.stop();
});

/** The app's relaxed pool, counting the statements sent through it by name. */
function counting(pool: pg.Pool) {
  const counts = new Map<string, number>();
  const db = {
    query(q: { name?: string }, ...rest: unknown[]) {
      const name = (typeof q === 'object' && q.name) || 'other';
      counts.set(name, (counts.get(name) ?? 0) + 1);
      return (pool.query as (...a: unknown[]) => unknown)(q, ...rest);
    },
  } as unknown as pg.Pool;
  return { db, counts };
}

async function leases(projectId: string): Promise<number> {
  const { rows } = await app.rt.db.pool.query('SELECT count(*)::int AS n FROM automation_leases WHERE project_id = $1', [projectId]);
  return rows[0].n;
}

describe('automations: concurrency slots taken a block at a time', () => {
  it('the runs asking in one turn share one statement; the limit holds across two service instances on one database; unused slots are given back', async () => {
    const { projectId } = await app.project('pro');
    // A second instance of the service on the same database: its own runtime and pools, as a
    // second process has; the slots of each are taken through its own pool.
    const other = await startTestApp({ databaseUrl: app.databaseUrl });
    try {
      const a = counting(app.rt.db.relaxedPool);
      const b = counting(other.rt.db.relaxedPool);
      const one = new SlotPool(a.db);
      const two = new SlotPool(b.db);
      // Five runs of the first process ask at once under a limit of 3: one statement, 3 granted, 2 answered null at once.
      const first = await Promise.all(Array.from({ length: 5 }, () => one.acquire(projectId, 3)));
      expect(first.filter(Boolean)).toHaveLength(3);
      expect(a.counts.get('automation_leases_take')).toBe(1);
      expect(await leases(projectId)).toBe(3);
      // The second instance finds every slot taken (counted in PostgreSQL, not in its memory).
      expect(await two.acquire(projectId, 3)).toBeNull();
      expect(b.counts.get('automation_leases_take')).toBe(1);
      // A slot a run finished with goes to this process's next run without a statement.
      first[0]!.release();
      const again = await one.acquire(projectId, 3);
      expect(again).not.toBeNull();
      expect(a.counts.get('automation_leases_take')).toBe(1);
      // Nobody uses them: given back after LINGER_MS, in one statement; then the other instance gets them.
      for (const s of [again, first[1], first[2]]) s!.release();
      await waitFor(async () => (await leases(projectId)) === 0, 5_000);
      expect(a.counts.get('automation_leases_give_back')).toBe(1);
      const later = await Promise.all(Array.from({ length: 3 }, () => two.acquire(projectId, 3)));
      expect(later.every(Boolean)).toBe(true);
      for (const s of later) s!.release();
      await two.settle();
      expect(await leases(projectId)).toBe(0);
      expect(b.counts.get('automation_leases_give_back')).toBe(1);
      expect(LINGER_MS).toBeLessThan(1_000);
    } finally {
      await other.stop();
    }
  });

  it('automation_leases_take grants part of a block when fewer slots are free, and none past the limit', async () => {
    const { projectId } = await app.project('pro');
    const take = async (ids: string[], limit: number) =>
      (await app.rt.db.pool.query('SELECT automation_leases_take($1, $2::text[], $3, 30000) AS ids', [projectId, ids, limit])).rows[0].ids as string[];
    expect(await take(['alz_1', 'alz_2'], 3)).toEqual(['alz_1', 'alz_2']);
    expect(await take(['alz_3', 'alz_4', 'alz_5'], 3)).toEqual(['alz_3']);
    expect(await take(['alz_6'], 3)).toEqual([]);
    expect(await leases(projectId)).toBe(3);
  });
});

describe('automations: run records written in batches', () => {
  it('many runs are recorded and counted in few statements; usage is summed per project', async () => {
    const { apiKey, projectId } = await app.project('pro');
    const created = await app.api(apiKey, 'POST', '/v1/automations', { name: 'a', code: 'export default (e) => e' });
    expect(created.status).toBe(201);
    const { db, counts } = counting(app.rt.db.relaxedPool);
    const recorder = new RunRecorder(db);
    const record = (i: number): RunRecord => ({
      id: newId('run'), projectId, automationId: created.body.id, version: 1, deliveryId: null, status: 'ok',
      cpuMs: 1.5, subrequests: i % 2, logs: 'x\u0000', logBytes: 2, logsTruncated: false, error: null,
    });
    await Promise.all(Array.from({ length: 50 }, (_, i) => recorder.record(record(i))));
    // The first is written alone at once; the others, gathered meanwhile, in one more statement.
    expect(counts.get('automation_run_records')).toBe(2);
    const runs = (await app.api(apiKey, 'GET', `/v1/automations/${created.body.id}/runs?limit=100`)).body.items;
    expect(runs).toHaveLength(50);
    expect(runs[0].logs).toBe('x\uFFFD');
    const { rows } = await app.rt.db.pool.query(
      `SELECT metric, sum(value)::int AS v FROM usage_counters WHERE project_id = $1 AND metric LIKE 'automation_%' GROUP BY metric`,
      [projectId],
    );
    expect(Object.fromEntries(rows.map((r) => [r.metric, r.v]))).toEqual({
      automation_runs: 50, automation_cpu_ms: 100, automation_subrequests: 25, automation_log_bytes: 100,
    });
  });
});

describe('automations: the event in the delivery path', () => {
  it('has the routing context’s provider and eventType (null without a provider pack)', async () => {
    const receiver = await startReceiver();
    try {
      const { apiKey } = await app.project('pro');
      const code = 'export default (e) => ({ provider: e.provider, eventType: e.eventType, id: e.id, keys: Object.keys(e).sort() })';
      const a = (await app.api(apiKey, 'POST', '/v1/automations', { name: 'a', code })).body;
      const hooks = [];
      for (const provider of ['stripe', null]) {
        const wh = await createWebhook(app, apiKey, { url: receiver.url });
        if (provider) expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/provider`, { provider, secret: 'whsec_test' })).status).toBe(200);
        expect((await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'automation', automationId: a.id })).status).toBe(200);
        hooks.push(wh);
      }
      const sent = [];
      for (const wh of hooks) {
        const r = await ingest(app, wh.publicId, { body: JSON.stringify({ type: 'charge.succeeded' }), headers: { authorization: `Bearer ${wh.ingestSecret}` } });
        expect(r.status, JSON.stringify(r.body)).toBe(202);
        sent.push(r.body.eventId);
      }
      await waitFor(() => receiver.received.length >= 2, 20_000);
      const bodies = new Map(receiver.received.map((x) => [String(x.headers['webhook-id']), JSON.parse(x.body.toString())]));
      const keys = ['body', 'channel', 'contentType', 'eventType', 'headers', 'id', 'method', 'path', 'provider', 'query', 'receivedAt'];
      expect(bodies.get(sent[0])).toEqual({ provider: 'stripe', eventType: 'charge.succeeded', id: sent[0], keys });
      expect(bodies.get(sent[1])).toEqual({ provider: null, eventType: null, id: sent[1], keys });

      // test-delivery hands the code the same fields.
      const probe = await app.api(apiKey, 'POST', `/v1/webhooks/${hooks[0].id}/test-delivery`, { body: { type: 'invoice.paid' } });
      expect(probe.body.payload).toMatchObject({ provider: 'stripe', eventType: 'invoice.paid', keys });
    } finally {
      await receiver.close();
    }
  });

  it('the monthly runs quota holds in the delivery path, one under and one over, within the cached read', async () => {
    const receiver = await startReceiver();
    try {
      const { apiKey, projectId } = await app.project('starter');
      const a = (await app.api(apiKey, 'POST', '/v1/automations', { name: 'a', code: 'export default (e) => e.body' })).body;
      const wh = await createWebhook(app, apiKey, { url: receiver.url, retryPolicy: { maxAttempts: 1 } });
      await app.api(apiKey, 'PUT', `/v1/webhooks/${wh.id}/transform`, { kind: 'automation', automationId: a.id });
      await app.rt.db.pool.query(
        `INSERT INTO usage_counters (project_id, webhook_id, metric, period, shard, value) VALUES ($1, '', 'automation_runs', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM'), 0, 4999)`,
        [projectId],
      );
      const ids = [];
      for (let i = 0; i < 2; i++) {
        const r = await ingest(app, wh.publicId, { body: JSON.stringify({ n: i }), headers: { authorization: `Bearer ${wh.ingestSecret}` } });
        ids.push(r.body.deliveryId);
        const d = await waitFor(async () => {
          const x = (await app.api(apiKey, 'GET', `/v1/deliveries/${r.body.deliveryId}`)).body;
          return ['succeeded', 'failed'].includes(x.status) ? x : null;
        }, 20_000);
        if (i === 0) expect(d.status).toBe('succeeded');
        else {
          expect(d.status).toBe('failed');
          expect(d.lastAttempt.error).toMatch(/monthly automation_runs quota is used up \(5000 of 5000\)/);
        }
      }
      expect((await app.api(apiKey, 'GET', `/v1/automations/${a.id}/runs`)).body.items).toHaveLength(1);
    } finally {
      await receiver.close();
    }
  });
});
