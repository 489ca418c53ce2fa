import { InvalidRequest } from '../errors.ts';
import type { Runtime } from '../runtime.ts';
import { getWebhook } from '../webhook-config/get-webhook.ts';
import { mergeHistogram, quantiles, type Histogram } from './sketch.ts';

type Rt = Pick<Runtime, 'db'>;

/**
 * The windows of CONTRACT §9: their length, the answer's bucket size and the roll-up rows they
 * are read from: the roll-ups keep one row size per answer bucket (ROLLUP_SIZES), so an answer
 * reads at most its bucket count times the shards (≤ 120 × 17 rows: 16 of ingest, 1 of results;
 * up to 8 more per bucket written before the 16 shards), whatever the window.
 */
export const WINDOWS = {
  '1h': { seconds: 3_600, bucketSeconds: 60, rowSize: 60 },
  '24h': { seconds: 86_400, bucketSeconds: 900, rowSize: 900 },
  '7d': { seconds: 604_800, bucketSeconds: 7_200, rowSize: 7_200 },
  '30d': { seconds: 2_592_000, bucketSeconds: 21_600, rowSize: 21_600 },
} as const;
export type WindowName = keyof typeof WINDOWS;

/** `window`: 1h, 24h, 7d or 30d; absent: 24h; anything else 400. */
export function parseWindow(window: unknown): WindowName {
  if (window === undefined || window === null) return '24h';
  if (typeof window === 'string' && Object.hasOwn(WINDOWS, window)) return window as WindowName;
  throw new InvalidRequest('window must be one of 1h, 24h, 7d, 30d.', 'window');
}

/** The window's answer buckets: `count` of `bucketSeconds` each, the last holding `now`. */
export function windowRange(window: WindowName, now = new Date()) {
  const w = WINDOWS[window];
  const count = w.seconds / w.bucketSeconds;
  const last = Math.floor(now.getTime() / 1000 / w.bucketSeconds) * w.bucketSeconds;
  const from = last - (count - 1) * w.bucketSeconds;
  return { ...w, count, from, to: Math.floor(now.getTime() / 1000) };
}

export interface WebhookMetrics {
  webhookId: string;
  window: WindowName;
  from: Date;
  to: Date;
  bucketSeconds: number;
  totals: { ingested: number; succeeded: number; failed: number; attempts: number; retries: number };
  successRate: number | null;
  latencyMs: { p50: number | null; p95: number | null; p99: number | null };
  statusCodes: Record<'2xx' | '3xx' | '4xx' | '5xx' | 'network' | 'timeout', number>;
  series: { t: Date; ingested: number; succeeded: number; failed: number; attempts: number }[];
}

interface BucketSums {
  t: string;
  ingested: string;
  succeeded: string;
  failed: string;
  attempts: string;
  retries: string;
  s2: string;
  s3: string;
  s4: string;
  s5: string;
  net: string;
  tmo: string;
}

/** A webhook's metrics over a window (archived webhooks too), from the roll-ups alone. */
export async function webhookMetrics(rt: Rt, projectId: string, webhookId: string, window: unknown): Promise<WebhookMetrics> {
  const webhook = await getWebhook(rt, projectId, webhookId);
  const name = parseWindow(window);
  const range = windowRange(name);
  const fromAt = new Date(range.from * 1000);
  const [sums, hist] = await Promise.all([
    rt.db.pool.query<BucketSums>({
      name: 'metrics_buckets',
      text: `SELECT (floor(extract(epoch FROM bucket_start) / $4) * $4)::bigint AS t, sum(ingested) AS ingested, sum(succeeded) AS succeeded,
                    sum(failed) AS failed, sum(attempts) AS attempts, sum(retries) AS retries, sum(status_2xx) AS s2, sum(status_3xx) AS s3,
                    sum(status_4xx) AS s4, sum(status_5xx) AS s5, sum(network) AS net, sum(timeout) AS tmo
               FROM webhook_metric_buckets WHERE webhook_id = $1 AND size = $2 AND bucket_start >= $3 GROUP BY 1`,
      values: [webhook.id, range.rowSize, fromAt, range.bucketSeconds],
    }),
    rt.db.pool.query<{ k: string; n: string }>({
      name: 'metrics_latency',
      text: `SELECT h.key AS k, sum(h.value::bigint) AS n
               FROM webhook_metric_buckets b CROSS JOIN LATERAL jsonb_each_text(b.latency) h
              WHERE b.webhook_id = $1 AND b.size = $2 AND b.bucket_start >= $3 AND b.shard = 8 AND b.latency <> '{}'::jsonb
              GROUP BY 1`,
      values: [webhook.id, range.rowSize, fromAt],
    }),
  ]);
  const byT = new Map(sums.rows.map((r) => [Number(r.t), r]));
  const totals = { ingested: 0, succeeded: 0, failed: 0, attempts: 0, retries: 0 };
  const statusCodes = { '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0, network: 0, timeout: 0 };
  for (const r of sums.rows) {
    totals.ingested += Number(r.ingested);
    totals.succeeded += Number(r.succeeded);
    totals.failed += Number(r.failed);
    totals.attempts += Number(r.attempts);
    totals.retries += Number(r.retries);
    statusCodes['2xx'] += Number(r.s2);
    statusCodes['3xx'] += Number(r.s3);
    statusCodes['4xx'] += Number(r.s4);
    statusCodes['5xx'] += Number(r.s5);
    statusCodes.network += Number(r.net);
    statusCodes.timeout += Number(r.tmo);
  }
  const series = [];
  for (let i = 0; i < range.count; i++) {
    const t = range.from + i * range.bucketSeconds;
    const r = byT.get(t);
    series.push({ t: new Date(t * 1000), ingested: Number(r?.ingested ?? 0), succeeded: Number(r?.succeeded ?? 0), failed: Number(r?.failed ?? 0), attempts: Number(r?.attempts ?? 0) });
  }
  const h: Histogram = new Map();
  for (const r of hist.rows) mergeHistogram(h, { [r.k]: r.n });
  const [p50, p95, p99] = quantiles(h, [0.5, 0.95, 0.99]);
  const finished = totals.succeeded + totals.failed;
  return {
    webhookId: webhook.id,
    window: name,
    from: fromAt,
    to: new Date(range.to * 1000),
    bucketSeconds: range.bucketSeconds,
    totals,
    successRate: finished === 0 ? null : totals.succeeded / finished,
    latencyMs: { p50, p95, p99 },
    statusCodes,
    series,
  };
}

export interface WebhookBacklog {
  webhookId: string;
  window: WindowName;
  depth: number;
  oldestPendingAt: Date | null;
  byStatus: { queued: number; scheduled: number; retrying: number; delivering: number };
  dlqDepth: number;
  series: { t: Date; depth: number }[];
}

/**
 * A webhook's backlog now (its pending deliveries by status, read by the (webhook_id, status,
 * seq) index: the backlog is bounded by the backlog_depth quota) and its sampled depth over the
 * window (webhook_backlog_samples: the highest depth sampled in each bucket).
 */
export async function webhookBacklog(rt: Rt, projectId: string, webhookId: string, window: unknown): Promise<WebhookBacklog> {
  const webhook = await getWebhook(rt, projectId, webhookId);
  const name = parseWindow(window);
  const range = windowRange(name);
  const fromAt = new Date(range.from * 1000);
  const [now, samples] = await Promise.all([
    rt.db.pool.query<{ status: string; n: string; oldest: Date | null; dlq: string }>({
      name: 'backlog_now',
      // Each status a literal, so every count and the oldest are ranges of the (webhook_id, status, seq) index.
      text: ['queued', 'scheduled', 'retrying', 'delivering']
        .map(
          (st) => `SELECT '${st}' AS status, (SELECT count(*) FROM deliveries d WHERE d.webhook_id = $1 AND d.status = '${st}') AS n,
                    (SELECT d.created_at FROM deliveries d WHERE d.webhook_id = $1 AND d.status = '${st}' ORDER BY d.seq LIMIT 1) AS oldest,
                    (SELECT count(*) FROM dlq_entries e WHERE e.webhook_id = $1 AND e.redriven_at IS NULL) AS dlq`,
        )
        .join(' UNION ALL '),
      values: [webhook.id],
    }),
    rt.db.pool.query<{ t: string; depth: string }>({
      name: 'backlog_samples',
      text: `SELECT (floor(extract(epoch FROM bucket_start) / $4) * $4)::bigint AS t, max(depth) AS depth
               FROM webhook_backlog_samples WHERE webhook_id = $1 AND size = $2 AND bucket_start >= $3 GROUP BY 1`,
      values: [webhook.id, range.rowSize, fromAt, range.bucketSeconds],
    }),
  ]);
  const byStatus = { queued: 0, scheduled: 0, retrying: 0, delivering: 0 };
  let oldest: Date | null = null;
  for (const r of now.rows) {
    byStatus[r.status as keyof typeof byStatus] = Number(r.n);
    if (r.oldest && (!oldest || r.oldest < oldest)) oldest = r.oldest;
  }
  const byT = new Map(samples.rows.map((r) => [Number(r.t), Number(r.depth)]));
  const series = [];
  for (let i = 0; i < range.count; i++) {
    const t = range.from + i * range.bucketSeconds;
    series.push({ t: new Date(t * 1000), depth: byT.get(t) ?? 0 });
  }
  return {
    webhookId: webhook.id,
    window: name,
    depth: byStatus.queued + byStatus.scheduled + byStatus.retrying + byStatus.delivering,
    oldestPendingAt: oldest,
    byStatus,
    dlqDepth: Number(now.rows[0]?.dlq ?? 0),
    series,
  };
}
