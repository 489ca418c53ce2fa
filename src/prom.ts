import client from 'prom-client';
import type pg from 'pg';

/**
 * This process's Prometheus metrics (prom-client): one registry, served as text on `GET /metrics`
 * (API processes, when METRICS_TOKEN is set) or on METRICS_PORT (worker-only processes). Each
 * process exposes its own; docs/observability.md names every series. Base units, `_total` for
 * counters, `_seconds` for durations.
 */
export const registry = new client.Registry();
client.collectDefaultMetrics({ register: registry, prefix: 'relay_' });

export const httpRequests = new client.Counter({
  name: 'relay_http_requests_total',
  help: 'HTTP requests answered, by route (REST operationId or path group), method and status.',
  labelNames: ['route', 'method', 'status'] as const,
  registers: [registry],
});
export const httpDuration = new client.Histogram({
  name: 'relay_http_request_duration_seconds',
  help: 'Time to answer an HTTP request, by route.',
  labelNames: ['route'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [registry],
});
export const ingestEvents = new client.Counter({
  name: 'relay_ingest_events_total',
  help: 'Inbound events by channel (http, form, email, cron) and result (accepted, duplicate, refused), with the refusal reason (the error code).',
  labelNames: ['channel', 'result', 'reason'] as const,
  registers: [registry],
});
export const deliveryOutcomes = new client.Counter({
  name: 'relay_delivery_attempts_total',
  help: 'Delivery attempts recorded by this process, by outcome: succeeded, retry (will be retried), failed (to the DLQ).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});
export const deliveriesFinished = new client.Counter({
  name: 'relay_deliveries_total',
  help: 'Deliveries that finished on this process, by outcome (succeeded, failed).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});
export const attemptDuration = new client.Histogram({
  name: 'relay_delivery_attempt_duration_seconds',
  help: 'Duration of one delivery attempt (request sent to answer, timeout or network error).',
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  registers: [registry],
});
export const jobStartDelay = new client.Histogram({
  name: 'relay_job_start_delay_seconds',
  help: "graphile-worker job latency: from the job's run_at to its start on this runner, by task.",
  labelNames: ['task'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  registers: [registry],
});
export const pubsubLag = new client.Histogram({
  name: 'relay_pubsub_lag_seconds',
  help: 'Pub/sub (PostgreSQL NOTIFY) lag: from publish to receipt by this process.',
  buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
  registers: [registry],
});

/** What the scrape-time gauges read: this process's pools, and a pool to query the database with. */
interface Source {
  pools: Record<string, pg.Pool>;
}
const sources = new Set<Source>();

/** Registers a process's pools for the gauges read at scrape time; returns the unregister. */
export function watchDatabase(pools: Record<string, pg.Pool>): () => void {
  const s = { pools };
  sources.add(s);
  return () => sources.delete(s);
}

const anyPool = () => {
  for (const s of sources) return Object.values(s.pools)[0];
  return undefined;
};

new client.Gauge({
  name: 'relay_db_pool_connections',
  help: "This process's PostgreSQL connection pools: connections by pool (main, relaxed) and state (total, idle, waiting clients).",
  labelNames: ['pool', 'state'] as const,
  registers: [registry],
  collect() {
    this.reset();
    for (const s of sources) {
      for (const [name, pool] of Object.entries(s.pools)) {
        this.inc({ pool: name, state: 'total' }, pool.totalCount);
        this.inc({ pool: name, state: 'idle' }, pool.idleCount);
        this.inc({ pool: name, state: 'waiting' }, pool.waitingCount);
      }
    }
  },
});

new client.Gauge({
  name: 'relay_backlog_depth',
  help: 'Deliveries not yet finished (queued, scheduled, delivering, retrying), all projects (the usage counters).',
  registers: [registry],
  async collect() {
    const pool = anyPool();
    if (!pool) return;
    const { rows } = await pool.query(`SELECT coalesce(sum(value), 0) AS n FROM usage_counters WHERE metric = 'backlog_depth' AND period = 'current' AND webhook_id = ''`);
    this.set(Number(rows[0].n));
  },
});

new client.Gauge({
  name: 'relay_job_queue_depth',
  help: 'graphile-worker jobs by task and state: ready (due, not locked), scheduled (run_at later), running (locked).',
  labelNames: ['task', 'state'] as const,
  registers: [registry],
  async collect() {
    const pool = anyPool();
    if (!pool) return;
    const { rows } = await pool.query<{ task: string; state: string; n: string }>(
      `SELECT t.identifier AS task, CASE WHEN j.locked_at IS NOT NULL THEN 'running' WHEN j.run_at <= now() THEN 'ready' ELSE 'scheduled' END AS state, count(*) AS n
         FROM graphile_worker._private_jobs j JOIN graphile_worker._private_tasks t ON t.id = j.task_id
        WHERE j.attempts < j.max_attempts GROUP BY 1, 2`,
    );
    this.reset();
    for (const r of rows) this.set({ task: r.task, state: r.state }, Number(r.n));
  },
});

/** The registry's text, in Prometheus's exposition format. */
export async function metricsText(): Promise<{ contentType: string; body: string }> {
  return { contentType: registry.contentType, body: await registry.metrics() };
}
