import type pg from 'pg';
import type { Runtime } from '../../runtime.ts';
import { counterSum, enforcing, firstExceeded, lockQuotaScope, overageActive, projectQuotas, webhookOverrides, webhookQuotas, type Check, type ProjectQuotaSource, type Queryable, type WebhookQuotaSource } from './limits.ts';

const HOUR_MS = 3_600_000;

/** usage_counters period of the UTC hour containing `ms`: "2026-11-21T14". */
export function hourPeriod(ms: number): string {
  return new Date(ms).toISOString().slice(0, 13);
}

function hourStartMs(period: string): number {
  return Date.parse(`${period}:00:00Z`);
}

const REPLAY_USAGE_SQL = `
SELECT (extract(epoch FROM now()) * 1000)::bigint AS now_ms,
  to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM') AS month,
  ceil(extract(epoch FROM date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month' - (now() AT TIME ZONE 'UTC')))::int AS month_left,
  (SELECT coalesce(json_agg(json_build_array(webhook_id, period, v)), '[]') FROM (
     SELECT webhook_id, period, sum(value)::bigint AS v FROM usage_counters
     WHERE project_id = $1 AND webhook_id = ANY($2::text[]) AND metric = 'replays'
       AND period >= to_char(date_trunc('hour', now() AT TIME ZONE 'UTC') - interval '23 hours', 'YYYY-MM-DD"T"HH24')
     GROUP BY webhook_id, period) b) AS buckets,
  ${counterSum(`project_id = $1 AND webhook_id = '' AND metric = 'deliveries' AND period = to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM')`)} AS monthly_deliveries,
  ${counterSum(`project_id = $1 AND webhook_id = '' AND metric = 'backlog_depth' AND period = 'current'`)} AS project_backlog,
  ${counterSum(`project_id = $1 AND webhook_id = $3 AND metric = 'backlog_depth' AND period = 'current'`)} AS webhook_backlog`;

/** When enough of the last 24 hours' replays leave the window for `count` more to fit. */
function replayRetryAfter(buckets: [string, number][], nowMs: number, current: number, count: number, limit: number): number | undefined {
  if (count > limit) return undefined;
  let freed = 0;
  for (const [period, v] of buckets.sort((a, b) => a[0].localeCompare(b[0]))) {
    freed += v;
    if (current - freed + count <= limit) return Math.max(1, Math.ceil((hourStartMs(period) + 24 * HOUR_MS - nowMs) / 1000));
  }
  return undefined;
}

export interface ReplayQuotaInput {
  project: ProjectQuotaSource;
  /** The webhook whose deliveries are replayed; null for a replay that spans webhooks (project scope only). */
  webhook?: WebhookQuotaSource | null;
  /** Number of deliveries this replay (or re-drive) creates. */
  count: number;
}

/**
 * Replay volume per rolling 24 hours (hourly buckets), checked and counted for the project and,
 * where the webhook overrides replay_volume, the webhook (429 with retryAfterSec). Replays also
 * create deliveries, so monthly deliveries (429) and backlog depth (409) are checked for `count`.
 *
 * For the delivery engine: call it inside the transaction that creates the replay (or re-drive)
 * deliveries, before inserting them; the count is recorded in that transaction, so roll back
 * when it throws.
 */
export async function enforceReplayQuota(rt: Runtime, client: pg.PoolClient | null, input: ReplayQuotaInput): Promise<void> {
  const { project } = input;
  const webhook = input.webhook ?? null;
  const count = Math.max(0, Math.floor(input.count));
  if (count === 0) return;
  const db: Queryable = client ?? rt.db.pool;
  await lockQuotaScope(client, `project:${project.id}`);
  const pq = projectQuotas(project);
  const overrides = webhook ? webhookOverrides(webhook) : {};
  const wq = webhook ? webhookQuotas(project, webhook) : pq;
  const scopes = webhook ? ['', webhook.id] : [''];
  const { rows } = await db.query({ name: 'replay_quota', text: REPLAY_USAGE_SQL, values: [project.id, scopes, webhook?.id ?? ''] });
  const r = rows[0];
  const buckets = (r.buckets as [string, string, number][]).map(([w, p, v]) => ({ w, p, v: Number(v) }));
  const of = (w: string) => buckets.filter((b) => b.w === w).map((b) => [b.p, b.v] as [string, number]);
  const projectReplays = of('').reduce((s, [, v]) => s + v, 0);
  const checks: Check[] = [
    { quota: 'replay_volume', scope: 'project', limit: pq.replay_volume, current: projectReplays, delta: count, retryAfterSec: replayRetryAfter(of(''), r.now_ms, projectReplays, count, pq.replay_volume) },
  ];
  if (webhook && overrides.replay_volume !== undefined) {
    const webhookReplays = of(webhook.id).reduce((s, [, v]) => s + v, 0);
    checks.push({ quota: 'replay_volume', scope: 'webhook', limit: wq.replay_volume, current: webhookReplays, delta: count, retryAfterSec: replayRetryAfter(of(webhook.id), r.now_ms, webhookReplays, count, wq.replay_volume) });
  }
  if (!overageActive(project)) {
    checks.push({ quota: 'monthly_deliveries', scope: 'project', limit: pq.monthly_deliveries, current: r.monthly_deliveries, delta: count, retryAfterSec: r.month_left });
  }
  checks.push({ quota: 'backlog_depth', scope: 'project', limit: pq.backlog_depth, current: r.project_backlog, delta: count });
  if (webhook && overrides.backlog_depth !== undefined) {
    checks.push({ quota: 'backlog_depth', scope: 'webhook', limit: wq.backlog_depth, current: r.webhook_backlog, delta: count });
  }
  if (enforcing(rt)) firstExceeded(checks);
  await db.query({
    name: 'replay_count',
    text: `INSERT INTO usage_counters AS u (project_id, webhook_id, metric, period, shard, value)
           SELECT $1, w, 'replays', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24'), 0, $3 FROM unnest($2::text[]) WITH ORDINALITY AS s(w, i) ORDER BY s.i
           ON CONFLICT (project_id, webhook_id, metric, period, shard) DO UPDATE SET value = u.value + excluded.value`,
    values: [project.id, scopes, count],
  });
}
