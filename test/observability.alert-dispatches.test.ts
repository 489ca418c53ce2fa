// An alert dispatch is a record first: evaluation writes it with its send job (channels are
// never called inline), and history retention removes it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { evaluateAlerts } from '../src/alerts/evaluate.ts';
import { RollupWriter } from '../src/metrics/rollup.ts';
import { idBefore, runRetention } from '../src/retention/run.ts';
import { startReceiver } from './support/receiver.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { createWebhook } from './support/webhooks.ts';

let app: TestApp;
let hanging: Awaited<ReturnType<typeof startReceiver>>;

beforeAll(async () => {
  // No job runner: what the evaluation leaves to jobs stays visible.
  app = await startTestApp({ worker: false });
  hanging = await startReceiver(() => ({ hang: true }));
});
afterAll(async () => {
  await app?.stop();
  await hanging?.close();
});

describe('alert dispatches', () => {
  it('alert evaluation writes the dispatch and its send job; it never sends channels inline', async () => {
    const { apiKey, projectId } = await app.project('pro');
    const wh = await createWebhook(app, apiKey);
    const rule = await app.api(apiKey, 'POST', '/v1/project/alert-rules', { webhookId: wh.id, condition: { type: 'dlq_added', threshold: 1 }, channels: [{ type: 'webhook', url: `${hanging.url}/slow` }] });
    expect(rule.status).toBe(201);
    const writer = new RollupWriter(app.rt.db.relaxedPool, 60_000);
    writer.add({ webhookId: wh.id, projectId, outcome: 'failed', statusCode: 500, ageMs: 10, recordedAt: Date.now() });
    await writer.stop();
    // Another evaluation may hold the evaluation lock at that moment: try again, bounded.
    let ran = false;
    for (let i = 0; i < 100 && !ran; i++) {
      ran = (await evaluateAlerts(app.rt)).ran;
      if (!ran) await new Promise((r) => setTimeout(r, 50));
    }
    expect(ran).toBe(true);
    // The evaluation returned while the channel (which never answers) was not even called.
    expect(hanging.received).toHaveLength(0);
    const d = await app.api(apiKey, 'GET', `/v1/project/alert-dispatches?ruleId=${rule.body.id}`);
    expect(d.body.items).toHaveLength(1);
    expect(d.body.items[0].channels).toEqual([{ type: 'webhook', target: `${hanging.url}/slow`, status: 'pending', error: null }]);
    const { rows } = await app.rt.db.pool.query(`SELECT count(*)::int AS n FROM graphile_worker.jobs WHERE task_identifier = 'alerts__dispatch' AND key = $1`, [`alert_dispatch:${d.body.items[0].id}`]);
    expect(rows[0].n).toBe(1);
  });

  it('alert dispatches go with history retention', async () => {
    const { apiKey, projectId } = await app.project('pro');
    const rule = await app.api(apiKey, 'POST', '/v1/project/alert-rules', { condition: { type: 'backlog_depth', threshold: 1 }, channels: [{ type: 'email', to: 'ops@example.com' }] });
    const old = `${idBefore('ald', Date.now() - 400 * 86_400_000)}0000000000000000`;
    const recent = `${idBefore('ald', Date.now())}0000000000000000`;
    for (const id of [old, recent]) {
      await app.rt.db.pool.query(`INSERT INTO alert_dispatches (id, project_id, rule_id, state, value, channels) VALUES ($1, $2, $3, 'firing', 1, '[]')`, [id, projectId, rule.body.id]);
    }
    let report = await runRetention(app.rt);
    for (let i = 0; i < 50 && !report.ran; i++) report = await runRetention(app.rt);
    expect(report.alertDispatchesDeleted).toBeGreaterThanOrEqual(1);
    const { rows } = await app.rt.db.pool.query('SELECT id FROM alert_dispatches WHERE project_id = $1 ORDER BY id', [projectId]);
    expect(rows.map((r) => r.id)).toEqual([recent]);
  });
});
