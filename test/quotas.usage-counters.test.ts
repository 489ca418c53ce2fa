import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readUsage } from '../src/projects/usage.ts';
import { createWebhookRow, simulateIngest } from './support/quota-fixtures.ts';
import { startTestApp, type TestApp } from './support/app.ts';

// The counters behind backlog depth, stored payload bytes and monthly deliveries are kept by the
// database (triggers), whoever writes: ingest, the delivery engine, retention, deletes.
let a: TestApp;
let b: TestApp;
beforeAll(async () => {
  a = await startTestApp();
  b = await startTestApp({ databaseUrl: a.databaseUrl });
});
afterAll(async () => {
  await b?.stop();
  await a?.stop();
});

async function exactCounts(projectId: string, webhookId = '') {
  const q = (sql: string) => a.rt.db.pool.query(sql, webhookId ? [projectId, webhookId] : [projectId]).then((r) => Number(r.rows[0].n));
  const scope = webhookId ? 'project_id = $1 AND webhook_id = $2' : 'project_id = $1';
  return {
    backlog_depth: await q(`SELECT count(*) AS n FROM deliveries WHERE ${scope} AND status IN ('queued', 'scheduled', 'delivering', 'retrying')`),
    stored_payload_bytes: await q(`SELECT coalesce(sum(octet_length(body)), 0) AS n FROM events WHERE ${scope}`),
  };
}

describe('usage counters', () => {
  it('match the rows they count through every kind of change, from two processes', async () => {
    const { projectId, apiKey } = await a.project('business');
    const w1 = await createWebhookRow(a.rt, projectId);
    const w2 = await createWebhookRow(a.rt, projectId);
    for (let i = 0; i < 6; i++) await simulateIngest((i % 2 ? a : b).rt, projectId, i < 4 ? w1.id : w2.id, Buffer.alloc(100 + i));
    const check = async () => {
      const usage = await readUsage(a.rt, projectId);
      const exact = await exactCounts(projectId);
      expect({ backlog_depth: usage.backlog_depth, stored_payload_bytes: usage.stored_payload_bytes }).toEqual(exact);
      for (const w of [w1, w2]) {
        const wu = await readUsage(a.rt, projectId, w.id);
        expect({ backlog_depth: wu.backlog_depth, stored_payload_bytes: wu.stored_payload_bytes }).toEqual(await exactCounts(projectId, w.id));
      }
      return usage;
    };
    expect(await check()).toMatchObject({ backlog_depth: 6, monthly_deliveries: 6 });

    const pool = b.rt.db.pool;
    // The delivery engine: in flight (still backlog), succeeded, to the DLQ, re-driven, cancelled.
    await pool.query(`UPDATE deliveries SET status = 'delivering' WHERE webhook_id = $1`, [w1.id]);
    expect((await check()).backlog_depth).toBe(6);
    await pool.query(`UPDATE deliveries SET status = 'succeeded' WHERE id IN (SELECT id FROM deliveries WHERE webhook_id = $1 ORDER BY id LIMIT 2)`, [w1.id]);
    await pool.query(`UPDATE deliveries SET status = 'failed' WHERE webhook_id = $1 AND status = 'delivering'`, [w1.id]);
    expect((await check()).backlog_depth).toBe(2);
    await pool.query(`UPDATE deliveries SET status = 'retrying' WHERE webhook_id = $1 AND status = 'failed'`, [w1.id]);
    await pool.query(`UPDATE deliveries SET status = 'cancelled' WHERE webhook_id = $1`, [w2.id]);
    expect((await check()).backlog_depth).toBe(2);

    // Payload retention, then history retention.
    await pool.query(`UPDATE events SET body = NULL WHERE id IN (SELECT id FROM events WHERE webhook_id = $1 ORDER BY id LIMIT 3)`, [w1.id]);
    await pool.query(`DELETE FROM deliveries WHERE webhook_id = $1 AND status = 'retrying'`, [w1.id]);
    expect(await check()).toMatchObject({ backlog_depth: 0, monthly_deliveries: 6 });

    // Destroying a webhook takes its events with it.
    await a.rt.db.prisma.webhook.delete({ where: { id: w2.id } });
    expect((await check()).stored_payload_bytes).toBe(103);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM usage_counters WHERE webhook_id = $1`, [w2.id]);
    expect(rows[0].n).toBe(0);

    const res = await a.api(apiKey, 'GET', '/v1/project');
    expect(res.body.usage).toMatchObject({ backlog_depth: 0, stored_payload_bytes: 103, monthly_deliveries: 6, replay_volume: 0, file_storage_bytes: 0 });
  });

  it('are removed with their project', async () => {
    const { projectId } = await a.project('pro');
    const wh = await createWebhookRow(a.rt, projectId);
    await simulateIngest(a.rt, projectId, wh.id);
    await a.rt.db.prisma.project.delete({ where: { id: projectId } });
    const { rows } = await a.rt.db.pool.query(
      `SELECT (SELECT count(*) FROM usage_counters WHERE project_id = $1)::int AS counters, (SELECT count(*) FROM rate_limit_windows WHERE key LIKE '%' || $1)::int AS windows`,
      [projectId],
    );
    expect(rows[0]).toEqual({ counters: 0, windows: 0 });
  });
});
