import { makeWorkerUtils } from 'graphile-worker';
import { KILOBYTE_EVENT } from '../baselines/index.ts';
import { connectDatabase } from '../../src/db/client.ts';
import { idBefore, runRetention } from '../../src/retention/run.ts';
import type { Scenario } from '../scenario.ts';

const ROWS = 1_000_000;

/**
 * HTTP ingest's latency alone, then while a retention pass deletes ROWS old rows (half finished
 * deliveries, half their events, on another webhook of the project whose history retention is
 * one second). The figure to watch is p99 during the pass against p99 without it.
 */
const retentionUnderIngest: Scenario = {
  name: 'retention-under-ingest',
  description:
    `HTTP ingest (~1 KB, as ingest-http) measured alone, then while a retention pass deletes ${ROWS.toLocaleString('en')} rows ` +
    '(finished deliveries and their events of another webhook, history retention 1 s) in its batches. p99 ratio: during / alone.',
  timeoutMs: 25 * 60_000,
  async run(ctx) {
    const api = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${ctx.serviceUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${ctx.apiKey}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const live = (await api('POST', '/v1/webhooks', { name: 'live', url: 'http://127.0.0.1:9/hook', defaultDelaySeconds: 86_400 })).body;
    const old = (await api('POST', '/v1/webhooks', { name: 'old', url: 'http://127.0.0.1:9/hook' })).body;
    const db = connectDatabase(ctx.databaseUrl, 4, 4);
    const workerUtils = await makeWorkerUtils({ pgPool: db.pool });
    try {
      // Rows an hour old: kept by the tier's 30 days until the webhook's override (1 s) is set.
      const hourAgo = Date.now() - 3_600_000;
      const evtPrefix = `${idBefore('evt', hourAgo)}`;
      const delPrefix = `${idBefore('del', hourAgo)}`;
      const half = ROWS / 2;
      const seeded = Date.now();
      for (let from = 0; from < half; from += 100_000) {
        await db.pool.query(
          `WITH e AS (
             INSERT INTO events (id, project_id, webhook_id, channel, body, body_size)
             SELECT $5 || lpad(i::text, 16, '0'), $1, $2, 'http', '\\x7b7d'::bytea, 2 FROM generate_series($3::int, $4::int) i RETURNING id
           )
           INSERT INTO deliveries (id, project_id, webhook_id, event_id, destination, status, attempts, completed_at)
           SELECT $6 || substr(id, 15), $1, $2, id, '{}', 'succeeded', 1, now() FROM e`,
          [ctx.projectId, old.id, from, Math.min(half, from + 100_000) - 1, evtPrefix, delPrefix],
        );
      }
      await db.pool.query('VACUUM ANALYZE events');
      await db.pool.query('VACUUM ANALYZE deliveries');
      ctx.log(`${ROWS} old rows seeded in ${((Date.now() - seeded) / 1000).toFixed(0)} s`);

      const request = { method: 'POST' as const, path: `/i/${live.publicId}`, headers: { 'content-type': 'application/json', 'x-webhook-secret': live.ingestSecret }, body: KILOBYTE_EVENT };
      const alone = await ctx.autocannon(request);
      // Now the rows are past the webhook's retention: passes (this process's, or the service's own
      // from its crontab, one at a time) delete them while ingest is measured again.
      await api('PUT', `/v1/webhooks/${old.id}/quota-overrides`, { history_retention_seconds: 1 });
      const started = Date.now();
      let finished = 0;
      const remaining = async () =>
        Number((await db.pool.query(`SELECT (SELECT count(*) FROM deliveries WHERE webhook_id = $1) + (SELECT count(*) FROM events WHERE webhook_id = $1) AS n`, [old.id])).rows[0].n);
      const deleting = (async () => {
        while ((await remaining()) > 0 && !ctx.signal.aborted) {
          const r = await runRetention({ db, workerUtils }, { budgetMs: 20 * 60_000 });
          if (!r.ran) await new Promise((res) => setTimeout(res, 250));
        }
        finished = Date.now();
      })();
      const during = await ctx.autocannon(request);
      const stillRunning = finished === 0;
      await deleting;
      const seconds = (finished - started) / 1000;
      const report = { deliveriesDeleted: half, eventsDeleted: half };
      ctx.log(`retention: ${ROWS} rows deleted in ${seconds.toFixed(1)} s`);
      return [
        { name: 'ingest alone', ...alone },
        {
          name: 'ingest during retention',
          ...during,
          baseline: 'ingest alone',
          notes:
            `retention deleted ${report.deliveriesDeleted.toLocaleString('en')} deliveries + ${report.eventsDeleted.toLocaleString('en')} events in ${seconds.toFixed(1)} s ` +
            `(${Math.round((report.deliveriesDeleted + report.eventsDeleted) / seconds).toLocaleString('en')} rows/s)` +
            `${stillRunning ? '; still deleting when the measurement ended' : '; the pass ended during the measurement'}.`,
        },
      ];
    } finally {
      await workerUtils.release();
      await db.close();
      await api('POST', `/v1/webhooks/${old.id}/archive`);
      await api('POST', `/v1/webhooks/${live.id}/archive`);
    }
  },
};

export default retentionUnderIngest;
