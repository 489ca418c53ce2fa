// Reading a webhook's metrics and backlog with 1,000,000 deliveries stored: every window is
// answered from the roll-ups, so the stored history does not show in the answer time.
import pg from 'pg';
import { managementCall } from '../alternated-rounds.ts';
import type { Result, Scenario } from '../scenario.ts';

const DELIVERIES = 1_000_000;
const DAYS = 30;
const WINDOWS = ['1h', '24h', '7d', '30d'] as const;

/**
 * 1,000,000 events and finished deliveries of one webhook, spread over 30 days, and the
 * roll-ups that traffic leaves: per minute, 8 ingest shard rows and one results row (with a
 * latency sketch of ~20 occupied indexes), and the same per hour; a backlog sample per minute.
 */
async function seed(databaseUrl: string, projectId: string, webhookId: string, log: (m: string) => void) {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const started = Date.now();
    // The roll-ups of that traffic (~23 deliveries a minute).
    for (const size of [60, 900, 7200, 21600]) {
      await db.query(
        `INSERT INTO webhook_metric_buckets (webhook_id, size, bucket_start, shard, project_id, ingested)
         SELECT $1::text, $3::int, metrics_bucket(t, $3::int), s, $2::text, (($4::float8 / ($5::int * 86400 / $3::int)) / 8)::bigint + 1
           FROM generate_series(now() - make_interval(days => $5::int), now(), make_interval(secs => $3::int)) t CROSS JOIN generate_series(0, 7) s
         ON CONFLICT DO NOTHING`,
        [webhookId, projectId, size, DELIVERIES, DAYS],
      );
      await db.query(
        `INSERT INTO webhook_metric_buckets (webhook_id, size, bucket_start, shard, project_id, succeeded, failed, attempts, retries, status_2xx, status_5xx, latency)
         SELECT $1::text, $3::int, metrics_bucket(t, $3::int), 8, $2::text, n * 97 / 100, n * 3 / 100, n * 105 / 100, n * 5 / 100, n * 97 / 100, n * 8 / 100,
                (SELECT jsonb_object_agg((230 + i)::text, 1 + (n / 20)) FROM generate_series(0, 19) i)
           FROM (SELECT t, ($4::bigint / ($5::int * 86400 / $3::int))::bigint + 1 AS n FROM generate_series(now() - make_interval(days => $5::int), now(), make_interval(secs => $3::int)) t) x
         ON CONFLICT DO NOTHING`,
        [webhookId, projectId, size, DELIVERIES, DAYS],
      );
      await db.query(
        `INSERT INTO webhook_backlog_samples (webhook_id, size, bucket_start, project_id, depth)
         SELECT $1::text, $3::int, metrics_bucket(t, $3::int), $2::text, (random() * 100)::int + 1 FROM generate_series(now() - make_interval(days => $4::int), now(), make_interval(secs => $3::int)) t
         ON CONFLICT DO NOTHING`,
        [webhookId, projectId, size, DAYS],
      );
    }
    for (let from = 0; from < DELIVERIES; from += 100_000) {
      await db.query(
        `WITH e AS (
           INSERT INTO events (id, project_id, webhook_id, channel, method, path, content_type, body, body_size, received_at)
           SELECT 'evt_seed' || lpad(g::text, 8, '0'), $1, $2, 'http', 'POST', '/', 'application/json', NULL, 0, now() - make_interval(secs => (g::float8 / $4) * $5 * 86400)
             FROM generate_series($3::int + 1, $3::int + 100000) g
           RETURNING id, received_at)
         INSERT INTO deliveries (id, project_id, webhook_id, event_id, destination, status, attempts, created_at, updated_at, completed_at)
         SELECT 'del_seed' || substr(e.id, 9), $1, $2, e.id, '{}'::jsonb, CASE WHEN random() < 0.97 THEN 'succeeded' ELSE 'failed' END, 1, e.received_at, e.received_at, e.received_at + interval '120 ms'
           FROM e`,
        [projectId, webhookId, from, DELIVERIES, DAYS],
      );
      log(`seeded ${from + 100_000} deliveries`);
    }
    // As autovacuum leaves a table that was written over 30 days: visibility map set, statistics taken.
    for (const table of ['events', 'deliveries', 'webhook_metric_buckets', 'webhook_backlog_samples']) await db.query(`VACUUM (ANALYZE) ${table}`);
    const { rows } = await db.query(`SELECT (SELECT count(*) FROM deliveries WHERE webhook_id = $1) AS d, (SELECT count(*) FROM webhook_metric_buckets WHERE webhook_id = $1) AS b`, [webhookId]);
    log(`seeded in ${((Date.now() - started) / 1000).toFixed(0)} s: ${rows[0].d} deliveries, ${rows[0].b} roll-up rows`);
  } finally {
    await db.end();
  }
}

const metricsRead: Scenario = {
  name: 'metrics-read',
  description:
    `GET /v1/webhooks/{id}/metrics and /backlog for each window (1h, 24h, 7d, 30d) of a webhook with ${DELIVERIES.toLocaleString('en')} deliveries stored over ${DAYS} days ` +
    '(and the roll-up rows that traffic leaves: 9 per bucket of each of the four sizes, a latency sketch each, a backlog sample per minute), 4 connections. ' +
    'Budget: p99 < 50 ms for every window. Baseline: the bare read (a primary-key SELECT over HTTP).',
  baseline: 'read',
  timeoutMs: 20 * 60_000,
  async run(ctx) {
    const created = await managementCall(ctx.serviceUrl, ctx.apiKey, 'POST', '/v1/webhooks', { name: 'bench metrics', url: 'http://127.0.0.1:9/hook' });
    if (created.status !== 201) throw new Error(`POST /v1/webhooks answered ${created.status} ${JSON.stringify(created.body)}`);
    const webhookId = created.body.id as string;
    await seed(ctx.databaseUrl, ctx.projectId, webhookId, ctx.log);
    const probe = await managementCall(ctx.serviceUrl, ctx.apiKey, 'GET', `/v1/webhooks/${webhookId}/metrics?window=30d`);
    if (probe.status !== 200 || probe.body.totals.ingested < DELIVERIES) throw new Error(`metrics answered ${probe.status} ${JSON.stringify(probe.body).slice(0, 300)}`);
    const results: Result[] = [];
    const headers = { authorization: `Bearer ${ctx.apiKey}` };
    for (const kind of ['metrics', 'backlog'] as const) {
      for (const window of WINDOWS) {
        const figures = await ctx.autocannon({ path: `/v1/webhooks/${webhookId}/${kind}?window=${window}`, headers, connections: 4 });
        ctx.log(`${kind} ${window}: ${Math.round(figures.throughput)} req/s, p50 ${figures.p50Ms} ms, p99 ${figures.p99Ms} ms`);
        results.push({ name: `${kind} window=${window} (1M deliveries stored)`, ...figures, notes: figures.p99Ms < 50 ? 'p99 within the 50 ms budget' : 'p99 OVER the 50 ms budget' });
      }
    }
    return results;
  },
};

export default metricsRead;
