import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flushIngestCounts } from '../src/metrics/ingest-counts.ts';
import { readUsage } from '../src/projects/usage.ts';
import { foldCountersEveryPass, idBefore, runRetention } from '../src/retention/run.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { createWebhook, ingest } from './support/webhooks.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  foldCountersEveryPass(false);
  await app?.stop();
});

const q = (sql: string, values: unknown[] = []) => app.rt.db.pool.query(sql, values).then((r) => r.rows);

async function ingestSome(wh: { publicId: string; ingestSecret: string }, n: number, body = '{"n":1}') {
  for (let i = 0; i < n; i++) {
    const res = await ingest(app, wh.publicId, { body, headers: { authorization: `Bearer ${wh.ingestSecret}` } });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
  }
}

describe('retention', () => {
  it('ids of a time: every id created before it sorts below the bound', () => {
    const t = Date.UTC(2026, 10, 24, 12);
    expect(idBefore('evt', t) < idBefore('evt', t + 1)).toBe(true);
    expect(idBefore('evt', t)).toMatch(/^evt_[0-9a-z]{10}$/);
  });

  it('with second-long overrides: payloads purged (replay 409 payload_gone, counters drop), then history deleted; the override beats the tier', async () => {
    const { apiKey, projectId } = await app.project('starter');
    const short = await createWebhook(app, apiKey);
    const tier = await createWebhook(app, apiKey);
    const put = await app.api(apiKey, 'PUT', `/v1/webhooks/${short.id}/quota-overrides`, { history_retention_seconds: 3, payload_retention_seconds: 1 });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    await ingestSome(short, 4, '{"short":true}');
    await ingestSome(tier, 2, '{"tier":true}');
    // The engine's work: all but one of the short webhook's deliveries finished (one failed into the DLQ).
    const shortDeliveries = await q(`SELECT id, event_id FROM deliveries WHERE webhook_id = $1 ORDER BY id`, [short.id]);
    const [failed, ok1, ok2, pending] = shortDeliveries;
    await q(`UPDATE deliveries SET status = 'succeeded', attempts = 1, dispatch_body = '\\x7b7d', completed_at = now() WHERE id = ANY($1)`, [[ok1.id, ok2.id]]);
    await q(`UPDATE deliveries SET status = 'failed', attempts = 1, completed_at = now() WHERE id = $1`, [failed.id]);
    await q(`INSERT INTO delivery_attempts (id, project_id, delivery_id, number, started_at, outcome) SELECT 'att_' || id, project_id, id, 1, now(), 'succeeded' FROM deliveries WHERE id = ANY($1)`, [[ok1.id, ok2.id, failed.id]]);
    await q(`INSERT INTO dlq_entries (id, project_id, webhook_id, delivery_id, reason) VALUES ('dlq_' || $1, $2, $3, $1, 'http_500')`, [failed.id, projectId, short.id]);
    await q(`UPDATE deliveries SET status = 'succeeded' WHERE webhook_id = $1`, [tier.id]);
    const bytesBefore = await readUsage(app.rt, projectId);
    expect(bytesBefore.stored_payload_bytes).toBe(4 * 14 + 2 * 13);

    // 1.5 s later: past the short webhook's payload retention (1 s), not its history (3 s).
    const r1 = await runRetention(app.rt, { now: new Date(Date.now() + 1_500), batchSize: 2 });
    expect(r1).toMatchObject({ ran: true, complete: true, deliveriesDeleted: 0, eventsDeleted: 0, payloadsPurged: 3, dispatchesPurged: 3 });
    const events = await q(`SELECT id, body IS NULL AS gone, payload_purged_at FROM events WHERE webhook_id = $1 ORDER BY id`, [short.id]);
    // The unfinished delivery's event keeps its payload (it is still to be sent).
    expect(events.map((e) => e.gone)).toEqual(events.map((e) => e.id !== pending.event_id));
    expect(events.filter((e) => e.payload_purged_at).length).toBe(3);
    const replay = await app.api(apiKey, 'POST', `/v1/deliveries/${ok1.id}/replay`);
    expect(replay.status).toBe(409);
    expect(replay.body.error.code).toBe('payload_gone');
    const redrive = await app.api(apiKey, 'POST', `/v1/dlq/dlq_${failed.id}/redrive`);
    expect(redrive.status).toBe(409);
    expect(redrive.body.error.code).toBe('payload_gone');
    // Usage counters went down with the bodies (the update triggers).
    expect((await readUsage(app.rt, projectId)).stored_payload_bytes).toBe(1 * 14 + 2 * 13);
    expect((await readUsage(app.rt, projectId, short.id)).stored_payload_bytes).toBe(14);
    // The tier's webhook (7 days of payload) is untouched, and replays.
    const tierDelivery = (await q(`SELECT id FROM deliveries WHERE webhook_id = $1 LIMIT 1`, [tier.id]))[0];
    expect((await app.api(apiKey, 'POST', `/v1/deliveries/${tierDelivery.id}/replay`)).status).toBe(202);

    // A second pass resumes from its cursor: nothing new to do.
    const r2 = await runRetention(app.rt, { now: new Date(Date.now() + 1_500) });
    expect(r2).toMatchObject({ payloadsPurged: 0, dispatchesPurged: 0 });

    // 4 s later: past the short webhook's history. Finished deliveries go with their attempts and
    // DLQ entry, and their events; the unfinished one and its event stay.
    const r3 = await runRetention(app.rt, { now: new Date(Date.now() + 4_000), batchSize: 2 });
    expect(r3).toMatchObject({ deliveriesDeleted: 3, eventsDeleted: 3, dlqEntriesDeleted: 1 });
    expect((await q(`SELECT id FROM deliveries WHERE webhook_id = $1`, [short.id])).map((d) => d.id)).toEqual([pending.id]);
    expect(await q(`SELECT id FROM events WHERE webhook_id = $1`, [short.id])).toHaveLength(1);
    expect(await q(`SELECT 1 FROM delivery_attempts WHERE delivery_id = ANY($1)`, [[ok1.id, ok2.id, failed.id]])).toHaveLength(0);
    expect(await q(`SELECT 1 FROM dlq_entries WHERE delivery_id = $1`, [failed.id])).toHaveLength(0);
    expect((await app.api(apiKey, 'GET', `/v1/deliveries/${ok1.id}`)).status).toBe(404);
    // The tier's webhook keeps everything (14 days of history); so do the project's audit logs.
    expect(await q(`SELECT 1 FROM deliveries WHERE webhook_id = $1`, [tier.id])).toHaveLength(3);
    expect((await q(`SELECT count(*)::int AS n FROM audit_logs WHERE project_id = $1`, [projectId]))[0].n).toBeGreaterThan(0);
    const usage = await readUsage(app.rt, projectId);
    expect(usage.stored_payload_bytes).toBe(14 + 2 * 13);
    expect(usage.backlog_depth).toBe(2); // the pending delivery and the replay
  });

  it("removes project history past the tier's retention, and the job table's and counters' leftovers", async () => {
    const { projectId } = await app.project('free'); // 7 days of history
    const old = Date.now() - 8 * 86_400_000;
    const oldId = (prefix: string, n: number) => `${idBefore(prefix, old)}${String(n).padStart(16, '0')}`;
    await q(`INSERT INTO audit_logs (id, project_id, actor, action, target_type) VALUES ($1, $3, 'k', 'x', 'y'), ($2, $3, 'k', 'x', 'y')`, [oldId('aud', 1), oldId('aud', 2), projectId]);
    await q(`INSERT INTO audit_logs (id, project_id, actor, action, target_type) VALUES ($1, $2, 'k', 'recent', 'y')`, [`${idBefore('aud', Date.now())}0000000000000001`, projectId]);
    await q(`INSERT INTO replay_jobs (id, project_id, kind, status) VALUES ($1, $3, 'bulk', 'completed'), ($2, $3, 'bulk', 'running')`, [oldId('rpl', 1), oldId('rpl', 2), projectId]);
    // A DLQ entry past the history retention (its delivery is gone: DLQ entries have no foreign key).
    await q(`INSERT INTO dlq_entries (id, project_id, webhook_id, delivery_id, reason) VALUES ($1, $2, 'wh_gone', $3, 'x')`, [oldId('dlq', 1), projectId, oldId('del', 1)]);
    await q(`INSERT INTO rate_limit_windows (project_id, key, shard, window_start, count) VALUES ($3, 'ingest:p:gone', 0, $1, 3), ($3, 'ingest:p:now', 0, $2, 1)`, [
      Math.floor(Date.now() / 1000) - 7200,
      Math.floor(Date.now() / 1000),
      projectId,
    ]);
    for (let shard = 0; shard < 4; shard++) {
      await q(`INSERT INTO usage_counters (project_id, webhook_id, metric, period, shard, value) VALUES ($1, '', 'deliveries', '2020-01', $2, 10)`, [projectId, shard]);
    }
    await app.rt.workerUtils.addJob('retention_test_failed', {}, { maxAttempts: 1 });
    await q(`UPDATE graphile_worker._private_jobs SET attempts = max_attempts WHERE task_id = (SELECT id FROM graphile_worker._private_tasks WHERE identifier = 'retention_test_failed')`);

    foldCountersEveryPass(true);
    const r = await runRetention(app.rt);
    expect(r).toMatchObject({ auditLogsDeleted: 2, replayJobsDeleted: 1 });
    expect(r.rateWindowsDeleted).toBeGreaterThanOrEqual(1);
    expect((await q(`SELECT action FROM audit_logs WHERE project_id = $1 AND action IN ('x', 'recent')`, [projectId])).map((a) => a.action)).toEqual(['recent']);
    expect((await q(`SELECT status FROM replay_jobs WHERE project_id = $1`, [projectId])).map((j) => j.status)).toEqual(['running']);
    expect(r.dlqEntriesDeleted).toBeGreaterThanOrEqual(1);
    expect(await q(`SELECT 1 FROM dlq_entries WHERE project_id = $1`, [projectId])).toEqual([]);
    expect((await q(`SELECT key FROM rate_limit_windows WHERE key LIKE 'ingest:p:%' AND key IN ('ingest:p:gone', 'ingest:p:now')`)).map((k) => k.key)).toEqual(['ingest:p:now']);
    expect(await q(`SELECT shard, value::int FROM usage_counters WHERE project_id = $1 AND period = '2020-01'`, [projectId])).toEqual([{ shard: 0, value: 40 }]);
    expect(await q(`SELECT 1 FROM graphile_worker._private_jobs j JOIN graphile_worker._private_tasks t ON t.id = j.task_id WHERE t.identifier = 'retention_test_failed'`)).toHaveLength(0);
  });

  it('removes inbound dedupe keys whose window has passed, and keeps the others', async () => {
    const { apiKey, projectId } = await app.project('starter');
    const wh = await createWebhook(app, apiKey);
    await q(
      `INSERT INTO inbound_dedupe (project_id, webhook_id, key, event_id, delivery_id, expires_at)
       VALUES ($2, $1, 'old', 'evt_old', 'del_old', now() - interval '1 minute'), ($2, $1, 'live', 'evt_live', 'del_live', now() + interval '1 hour')`,
      [wh.id, projectId],
    );
    const r = await runRetention(app.rt);
    expect(r.dedupeKeysDeleted).toBeGreaterThanOrEqual(1);
    expect((await q(`SELECT key FROM inbound_dedupe WHERE webhook_id = $1`, [wh.id])).map((k) => k.key)).toEqual(['live']);
  });

  it('runs one pass at a time: a pass started while another runs does nothing (ran: false); once it ends, the next one runs', async () => {
    // A pass held inside its lock: its first look at the webhooks waits on a table lock of ours.
    // (pg_locks shows the locks of every database of the cluster: only this file's count.)
    const here = `database = (SELECT oid FROM pg_database WHERE datname = current_database())`;
    const waitingOnWebhooks = async () => (await q(`SELECT count(*)::int AS n FROM pg_locks WHERE ${here} AND locktype = 'relation' AND relation = 'webhooks'::regclass AND NOT granted`))[0].n as number;
    // This process writes its ingest counts once a second, joined with webhooks: a write pending
    // from the tests above would wait on our lock too. Written now, the pass is the only waiter.
    await flushIngestCounts(app.rt);
    const blocker = await app.rt.db.pool.connect();
    let held: Promise<Awaited<ReturnType<typeof runRetention>>> | undefined;
    try {
      await blocker.query('BEGIN');
      await blocker.query('LOCK TABLE webhooks IN ACCESS EXCLUSIVE MODE');
      held = runRetention(app.rt);
      // The pass holds the retention lock (727016) and waits for ours.
      await waitFor(async () => (await q(`SELECT count(*)::int AS n FROM pg_locks WHERE ${here} AND locktype = 'advisory' AND objid = 727016 AND granted`))[0].n === 1);
      await waitFor(async () => (await waitingOnWebhooks()) === 1);
      // Two more passes meanwhile: neither runs. (Had one run, it would wait on our lock too.)
      let answered = false;
      const more = Promise.all([runRetention(app.rt), runRetention(app.rt)]).finally(() => (answered = true));
      await waitFor(async () => answered || (await waitingOnWebhooks()) > 1);
      expect(answered, 'a second pass ran while one was running').toBe(true);
      expect((await more).map((r) => r.ran)).toEqual([false, false]);
    } finally {
      await blocker.query('COMMIT');
      blocker.release();
    }
    expect((await held!).ran).toBe(true);
    // The lock is given back at the end of a pass: one after another, each runs.
    expect((await runRetention(app.rt)).ran).toBe(true);
    expect((await runRetention(app.rt)).ran).toBe(true);
  });
});
