import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../src/ids.ts';
import { storeEvent } from '../src/ingest/store-event.ts';
import { setProjectQuota } from '../src/projects/service.ts';
import { createWebhookRow, rejection } from './support/quota-fixtures.ts';
import { startTestApp, type TestApp } from './support/app.ts';

// The ingest quota checks ride on the statement that stores the event: on the hot path (limits
// above the exact-lock threshold) they cost no round trip of their own, and the prepared
// statement is planned once, not on every request.
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
  // Planner estimates as in a service with many projects: 32 shard rows per counter, two months of
  // daily delivery counters, one-second rate windows.
  await app.rt.db.pool.query(`
    INSERT INTO usage_counters (project_id, webhook_id, metric, period, shard, value)
    SELECT 'prj_seed_' || p, w, m, period, s, 1
      FROM generate_series(1, 100) p, unnest(ARRAY['', 'wh_seed']) w, generate_series(0, 31) s,
           (VALUES ('backlog_depth', 'current'), ('stored_payload_bytes', 'current'), ('deliveries', to_char(now(), 'YYYY-MM'))) AS c(m, period)
     WHERE w = '' OR m <> 'deliveries'
    UNION ALL
    SELECT 'prj_seed_' || p, '', 'deliveries', to_char(now() - d * interval '1 day', 'YYYY-MM-DD'), s, 1
      FROM generate_series(1, 100) p, generate_series(0, 59) d, generate_series(0, 31) s`);
  await app.rt.db.pool.query(`
    INSERT INTO rate_limit_windows (project_id, key, shard, window_start, count)
    SELECT 'prj_seed_' || p, 'ingest:p:prj_seed_' || p, s, 0, 1 FROM generate_series(1, 100) p, generate_series(0, 31) s`);
  await app.rt.db.pool.query('ANALYZE usage_counters, rate_limit_windows');
});
afterAll(async () => {
  await app?.stop();
});

/** An inbound HTTP event for storeEvent. */
function newEvent(projectId: string, webhookId: string, body = '{}') {
  return { id: newId('evt'), projectId, webhookId, channel: 'http' as const, method: 'POST', path: '/', query: {}, headers: {}, contentType: null, body: Buffer.from(body), payloadExpiresAt: null, configVersion: null };
}

/** A queued delivery to an unreachable loopback port (nothing runs it here). */
function newDelivery() {
  return { id: newId('del'), destinationId: null, destination: { type: 'webhook', config: { url: 'http://127.0.0.1:9/' } }, status: 'queued' as const, runAt: null };
}

/**
 * Runs storeEvent `n` times on one connection, each in a transaction rolled back, counting the
 * statements it sends (in a caller's transaction the statement also counts the event in the
 * metrics roll-ups: its `_counted` shape).
 */
async function storeOnOneConnection(projectId: string, webhookId: string, n: number) {
  const project = await app.rt.db.prisma.project.findUniqueOrThrow({ where: { id: projectId } });
  const webhook = await app.rt.db.prisma.webhook.findUniqueOrThrow({ where: { id: webhookId } });
  const client = await app.rt.db.pool.connect();
  // The connection may have run the statement before (pool): count this call's executions only.
  const plans = async () =>
    (await client.query(`SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'ingest_insert_event_within_quotas_counted'`)).rows[0] ?? { generic_plans: 0, custom_plans: 0 };
  try {
    const before = await plans();
    const sent: string[] = [];
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<pg.QueryResult>;
    const counting = client as unknown as { query: (...args: unknown[]) => Promise<pg.QueryResult> };
    for (let i = 0; i < n; i++) {
      await client.query('BEGIN');
      counting.query = (...args: unknown[]) => {
        const q = args[0] as string | { name?: string; text: string };
        sent.push(typeof q === 'string' ? q : (q.name ?? q.text));
        return query(...args);
      };
      try {
        await storeEvent(
          app.rt,
          client,
          { id: newId('evt'), projectId, webhookId, channel: 'http', method: 'POST', path: '/', query: {}, headers: {}, contentType: 'application/json', body: Buffer.from('{}'), payloadExpiresAt: null, configVersion: null },
          { project, webhook },
        );
      } finally {
        counting.query = query;
        await client.query('ROLLBACK');
      }
    }
    const after = await plans();
    return { sent, plans: { generic: after.generic_plans - before.generic_plans, custom: after.custom_plans - before.custom_plans } };
  } finally {
    client.release();
  }
}

describe('ingest quota statement', () => {
  it('checks high custom limits in the one statement that stores the event, with a generic plan', async () => {
    const { projectId } = await app.project('enterprise');
    // Above the exact threshold, but too close to the counters' limits to skip reading them.
    await setProjectQuota(app.rt, projectId, 'ingest_rate', '1000000000');
    for (const quota of ['backlog_depth', 'stored_payload_bytes', 'monthly_deliveries']) await setProjectQuota(app.rt, projectId, quota, '900');
    const wh = await createWebhookRow(app.rt, projectId);
    const { sent, plans } = await storeOnOneConnection(projectId, wh.id, 10);
    expect(sent).toEqual(Array(10).fill('ingest_insert_event_within_quotas_counted'));
    // PostgreSQL plans the first five executions for their values, then keeps the generic plan
    // when it is no dearer: here it must, every later execution reuses it.
    expect(plans.custom).toBeLessThanOrEqual(5);
    expect(plans.generic).toBe(10 - plans.custom);
  });

  it('keeps the generic plan when the webhook overrides every ingest quota', async () => {
    const { projectId } = await app.project('enterprise');
    await setProjectQuota(app.rt, projectId, 'ingest_rate', '1000000000');
    const wh = await createWebhookRow(app.rt, projectId, { ingest_rate: 100_000_000, backlog_depth: 900, stored_payload_bytes: 900 });
    const { sent, plans } = await storeOnOneConnection(projectId, wh.id, 10);
    expect(sent).toEqual(Array(10).fill('ingest_insert_event_within_quotas_counted'));
    expect(plans.custom).toBeLessThanOrEqual(5);
    expect(plans.generic).toBe(10 - plans.custom);
  });

  it('far from every limit, reads the usage counters once per quarter second, not on every request', async () => {
    const { projectId } = await app.project('enterprise');
    for (const quota of ['ingest_rate', 'backlog_depth', 'stored_payload_bytes', 'monthly_deliveries']) await setProjectQuota(app.rt, projectId, quota, '1000000000');
    const wh = await createWebhookRow(app.rt, projectId);
    const { sent } = await storeOnOneConnection(projectId, wh.id, 10);
    expect(sent[0]).toBe('ingest_insert_event_within_quotas_counted');
    expect(new Set(sent)).toEqual(new Set(['ingest_insert_event_within_quotas_counted', 'ingest_insert_event_within_rate_counted']));
    // Ten requests take far less than 250 ms, unless the machine stalls: most skip the reads.
    expect(sent.filter((n) => n === 'ingest_insert_event_within_rate_counted').length).toBeGreaterThanOrEqual(5);
  });

  it('reads the counters on every request once they near a limit, and refuses exactly there', async () => {
    const { projectId } = await app.project('enterprise');
    await setProjectQuota(app.rt, projectId, 'ingest_rate', '1000000000');
    await setProjectQuota(app.rt, projectId, 'backlog_depth', '3');
    const wh = await createWebhookRow(app.rt, projectId);
    const project = await app.rt.db.prisma.project.findUniqueOrThrow({ where: { id: projectId } });
    for (let i = 0; i < 3; i++) await storeEvent(app.rt, app.rt.db.pool, newEvent(projectId, wh.id), { project, webhook: wh }, newDelivery());
    const err = await rejection(storeEvent(app.rt, app.rt.db.pool, newEvent(projectId, wh.id), { project, webhook: wh }, newDelivery()));
    expect(err.details).toMatchObject({ quota: 'backlog_depth', scope: 'project', limit: 3, current: 3 });
  });

  it('takes the per-project lock first where small limits must be exact', async () => {
    const { projectId } = await app.project('free');
    const wh = await createWebhookRow(app.rt, projectId);
    const { sent } = await storeOnOneConnection(projectId, wh.id, 2);
    expect(sent).toEqual(['quota_lock', 'ingest_insert_event_within_quotas_counted', 'quota_lock', 'ingest_insert_event_within_quotas_counted']);
  });

  it('stores nothing and counts nothing when a check refuses', async () => {
    const { projectId } = await app.project('enterprise');
    await setProjectQuota(app.rt, projectId, 'ingest_rate', '1000000000');
    await setProjectQuota(app.rt, projectId, 'stored_payload_bytes', '1');
    const wh = await createWebhookRow(app.rt, projectId);
    const project = await app.rt.db.prisma.project.findUniqueOrThrow({ where: { id: projectId } });
    const client = await app.rt.db.pool.connect();
    try {
      await client.query('BEGIN');
      const err = await rejection(
        storeEvent(
          app.rt,
          client,
          newEvent(projectId, wh.id, 'ab'),
          { project, webhook: wh },
        ),
      );
      expect(err.details).toMatchObject({ quota: 'stored_payload_bytes', scope: 'project', limit: 1, current: 0, delta: 2 });
      // Inside the transaction, before the caller rolls back: the statement wrote no event.
      const { rows } = await client.query('SELECT count(*)::int AS n FROM events WHERE webhook_id = $1', [wh.id]);
      expect(rows[0].n).toBe(0);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
    const { rows } = await app.rt.db.pool.query(`SELECT coalesce(sum(count), 0)::int AS n FROM rate_limit_windows WHERE key = $1`, [`ingest:p:${projectId}`]);
    expect(rows[0].n).toBe(0);
  });

  it('on its own (no transaction), stores the event with its delivery and job, and a refused request neither', async () => {
    const { projectId } = await app.project('enterprise');
    await setProjectQuota(app.rt, projectId, 'ingest_rate', '1000000000');
    const wh = await createWebhookRow(app.rt, projectId);
    const project = await app.rt.db.prisma.project.findUniqueOrThrow({ where: { id: projectId } });
    const event = (body: string) => newEvent(projectId, wh.id, body);
    const delivery = newDelivery;
    const count = async () => {
      const { rows } = await app.rt.db.pool.query(
        `SELECT (SELECT count(*)::int FROM events WHERE webhook_id = $1) AS events, (SELECT count(*)::int FROM deliveries WHERE webhook_id = $1) AS deliveries,
                (SELECT count(*)::int FROM graphile_worker._private_jobs j JOIN deliveries d ON j.key = 'del:' || d.id WHERE d.webhook_id = $1) AS jobs,
                (SELECT string_agg(shard || '@' || window_start || '=' || count, ',' ORDER BY shard) FROM rate_limit_windows WHERE key = $2) AS rate`,
        [wh.id, `ingest:p:${projectId}`],
      );
      return rows[0];
    };
    await storeEvent(app.rt, app.rt.db.pool, event('{}'), { project, webhook: wh }, delivery());
    expect(await count()).toMatchObject({ events: 1, deliveries: 1, jobs: 1 });
    const before = (await count()).rate;
    await setProjectQuota(app.rt, projectId, 'stored_payload_bytes', '3');
    const refreshed = await app.rt.db.prisma.project.findUniqueOrThrow({ where: { id: projectId } });
    const err = await rejection(storeEvent(app.rt, app.rt.db.pool, event('{"too":"big"}'), { project: refreshed, webhook: wh }, delivery()));
    expect(err.details).toMatchObject({ quota: 'stored_payload_bytes' });
    // Nothing of the refused request was kept, not even its hit in the rate window.
    const after = await count();
    expect(after).toMatchObject({ events: 1, deliveries: 1, jobs: 1 });
    expect(before).toBeTruthy();
    expect(after.rate).toBe(before);
  });
});
