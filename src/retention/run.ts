import type pg from 'pg';
import { encodeTime } from 'ulid';
import { config as processConfig } from '../config.ts';
import { purgeExpiredFiles } from '../files/service.ts';
import { log } from '../log.ts';
import { projectQuotas, webhookQuotas } from '../projects/quotas/limits.ts';
import type { Runtime } from '../runtime.ts';
import { dropExpiredPartitions } from './partitions.ts';

// The partition job's entry points, offered through this public module (src/retention/partitions.ts).
export { ensureHistoryPartitions, PARTITION_CRONTAB, PARTITION_TASK } from './partitions.ts';

/**
 * Retention: what the history and payload retention quotas (tier, Enterprise custom quotas, a
 * webhook's overrides, which only tighten) say is old leaves, in small batches by index.
 *
 * Per webhook, with its effective limits:
 *   - history: finished deliveries (with their attempts, by cascade, and DLQ entries) created
 *     before it; then events that have no delivery left;
 *   - payload: event bodies and sources (email's raw message; `payload_purged_at` marks them) and dispatch snapshots
 *     (`dispatch_purged_at`) of finished deliveries; a replay or re-drive then answers 409
 *     `payload_gone`.
 * Per project (history, project limits): replay jobs that are done, audit-log rows, DLQ entries
 * left without a delivery. And the bookkeeping: permanently failed graphile-worker jobs (those that
 * succeed are deleted by graphile-worker itself), one-second rate windows older than an hour,
 * and the 32 shard rows of usage counters of closed months folded into one.
 *
 * Every id is a ULID, so "created before T" is an index range: `id < prefix_<T as ULID time>`
 * on (webhook_id, id) or (project_id, id); no pass scans a table. Each batch is its own short
 * statement (no long locks); usage counters go down through the same triggers every writer
 * fires (stored_payload_bytes as bodies are set to NULL or events deleted, backlog never, as
 * only finished deliveries go). The payload passes keep a cursor per webhook
 * (`retention_cursors`), so a pass cut short by its time budget resumes where it stopped.
 */

export const RETENTION_TASK = 'retention__run';
/**
 * graphile-worker's crontab line: every minute (the contract: at least once a minute), one job at
 * a time (its job key; graphile-worker's cron schedules each minute once across runners). A pass
 * also holds an advisory lock, so two never run together.
 */
export const RETENTION_CRONTAB = `* * * * * ${RETENTION_TASK} ?jobKey=retention&jobKeyMode=preserve_run_at&max=1`;

const TERMINAL = `('succeeded', 'failed', 'cancelled')`;
const ACTIVE = `('queued', 'scheduled', 'delivering', 'retrying')`;
const LOCK_KEY = 727_016;

export interface RetentionOptions {
  /** Rows per statement (default 500). */
  batchSize?: number;
  /** A pass stops after this long and the next resumes (default 45 s). */
  budgetMs?: number;
  /** "Now" for the cut-offs (tests). */
  now?: Date;
}

export interface RetentionReport {
  ran: boolean;
  deliveriesDeleted: number;
  eventsDeleted: number;
  payloadsPurged: number;
  dispatchesPurged: number;
  replayJobsDeleted: number;
  auditLogsDeleted: number;
  /** Automation runs (history retention, like attempts). */
  automationRunsDeleted: number;
  /** Operator-alert dispatches (history retention; src/alerts). */
  alertDispatchesDeleted: number;
  dlqEntriesDeleted: number;
  rateWindowsDeleted: number;
  dedupeKeysDeleted: number;
  /** Idempotency keys (CONTRACT §12) past their webhook's window. */
  idempotencyKeysDeleted: number;
  counterRowsFolded: number;
  /** File content removed (its payload retention ended): rows marked purged, file_storage_bytes down. */
  filesPurged: number;
  /** Metric roll-up buckets and backlog samples past history retention (src/metrics). */
  rollupsDeleted: number;
  /** Whole days of history dropped (partitions past every project's history retention: src/retention/partitions.ts). */
  partitionsDropped: string[];
  complete: boolean;
}

/** The smallest id of `prefix` created at `ms` or later: ids below it were created before. */
export function idBefore(prefix: string, ms: number): string {
  return `${prefix}_${encodeTime(Math.max(0, Math.floor(ms)), 10).toLowerCase()}`;
}

/** Runs one retention pass (unless another process is running one: `ran: false`). */
export async function runRetention(rt: Pick<Runtime, 'db' | 'workerUtils'> & Partial<Pick<Runtime, 'config'>>, opts: RetentionOptions = {}): Promise<RetentionReport> {
  const report: RetentionReport = {
    ran: false,
    deliveriesDeleted: 0,
    eventsDeleted: 0,
    payloadsPurged: 0,
    dispatchesPurged: 0,
    replayJobsDeleted: 0,
    auditLogsDeleted: 0,
    automationRunsDeleted: 0,
    alertDispatchesDeleted: 0,
    dlqEntriesDeleted: 0,
    rateWindowsDeleted: 0,
    dedupeKeysDeleted: 0,
    idempotencyKeysDeleted: 0,
    counterRowsFolded: 0,
    filesPurged: 0,
    rollupsDeleted: 0,
    partitionsDropped: [],
    complete: true,
  };
  // A session-level lock held across statements: on the server itself, never through a pooler.
  const lock = await rt.db.direct.connect();
  try {
    const { rows } = await lock.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [LOCK_KEY]);
    if (!rows[0].ok) return report;
    report.ran = true;
    try {
      await pass(rt, report, { batchSize: opts.batchSize ?? 500, deadline: Date.now() + (opts.budgetMs ?? 45_000), now: (opts.now ?? new Date()).getTime() });
    } finally {
      await lock.query('SELECT pg_advisory_unlock($1)', [LOCK_KEY]);
    }
  } finally {
    lock.release();
  }
  log.debug({ report }, 'retention pass');
  return report;
}

interface PassState {
  batchSize: number;
  deadline: number;
  now: number;
}

/** Runs `statement` (returning `n`, the rows it handled) until a batch comes back short or time is up. */
async function drain(db: pg.Pool, s: PassState, report: RetentionReport, statement: string, values: unknown[]): Promise<number> {
  let total = 0;
  for (;;) {
    const { rows } = await db.query<{ n: string }>(statement, [...values, s.batchSize]);
    const n = Number(rows[0]?.n ?? 0);
    total += n;
    if (n < s.batchSize) return total;
    if (Date.now() > s.deadline) {
      report.complete = false;
      return total;
    }
  }
}

const DELETE_DELIVERIES = `
WITH doomed AS (
  SELECT id FROM deliveries WHERE webhook_id = $1 AND id < $2 AND status IN ${TERMINAL} ORDER BY id LIMIT $3
), dlq AS (
  DELETE FROM dlq_entries WHERE delivery_id IN (SELECT id FROM doomed) RETURNING 1
), gone AS (
  DELETE FROM deliveries d USING doomed WHERE d.id = doomed.id RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS n, (SELECT count(*) FROM dlq) AS dlq`;

const DELETE_EVENTS = `
WITH doomed AS (
  SELECT e.id FROM events e WHERE e.webhook_id = $1 AND e.id < $2 AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id) ORDER BY e.id LIMIT $3
), gone AS (
  DELETE FROM events e USING doomed WHERE e.id = doomed.id RETURNING 1
)
SELECT count(*) AS n FROM gone`;

/**
 * A payload pass walks the id index from its cursor (inclusive) to the cut-off; rows still needed
 * by an unfinished delivery are left, and the cursor stops at the first of them so it is visited
 * again next time.
 */
const PURGE_EVENT_BODIES = `
WITH batch AS (
  SELECT e.id, EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND d.status IN ${ACTIVE}) AS busy
    FROM events e WHERE e.webhook_id = $1 AND e.id >= $2 AND e.id < $3 ORDER BY e.id LIMIT $4
), purged AS (
  UPDATE events e SET body = NULL, source_body = NULL, payload_purged_at = now() FROM batch
   WHERE e.id = batch.id AND NOT batch.busy AND (e.body IS NOT NULL OR e.source_body IS NOT NULL) RETURNING 1
)
SELECT (SELECT count(*) FROM purged) AS purged, (SELECT count(*) FROM batch) AS n,
       (SELECT min(id) FROM batch WHERE busy) AS first_busy, (SELECT max(id) FROM batch) AS last`;

const PURGE_DISPATCHES = `
WITH batch AS (
  SELECT d.id, d.status IN ${ACTIVE} AS busy FROM deliveries d WHERE d.webhook_id = $1 AND d.id >= $2 AND d.id < $3 ORDER BY d.id LIMIT $4
), purged AS (
  UPDATE deliveries d SET dispatch_body = NULL, dispatch_headers = NULL, dispatch_purged_at = now() FROM batch
   WHERE d.id = batch.id AND NOT batch.busy AND d.dispatch_purged_at IS NULL RETURNING 1
)
SELECT (SELECT count(*) FROM purged) AS purged, (SELECT count(*) FROM batch) AS n,
       (SELECT min(id) FROM batch WHERE busy) AS first_busy, (SELECT max(id) FROM batch) AS last`;

async function cursorWalk(db: pg.Pool, s: PassState, report: RetentionReport, webhookId: string, kind: 'payload' | 'dispatch', bound: string): Promise<number> {
  const statement = kind === 'payload' ? PURGE_EVENT_BODIES : PURGE_DISPATCHES;
  const { rows: c } = await db.query<{ last_id: string }>('SELECT last_id FROM retention_cursors WHERE webhook_id = $1 AND kind = $2', [webhookId, kind]);
  let cursor = c[0]?.last_id ?? '';
  const start = cursor;
  let total = 0;
  for (;;) {
    const { rows } = await db.query<{ purged: string; n: string; first_busy: string | null; last: string | null }>(statement, [webhookId, cursor, bound, s.batchSize]);
    const r = rows[0];
    total += Number(r.purged);
    if (r.first_busy) {
      cursor = r.first_busy;
      break;
    }
    if (r.last) cursor = r.last;
    if (Number(r.n) < s.batchSize) break;
    if (Date.now() > s.deadline) {
      report.complete = false;
      break;
    }
  }
  if (cursor !== start) {
    await db.query(
      `INSERT INTO retention_cursors (project_id, webhook_id, kind, last_id) SELECT w.project_id, w.id, $2, $3 FROM webhooks w WHERE w.id = $1
       ON CONFLICT (webhook_id, kind) DO UPDATE SET last_id = excluded.last_id`,
      [webhookId, kind, cursor],
    );
  }
  return total;
}

/** A webhook's metric buckets and backlog samples older than history retention, a batch of each by primary key. */
const DELETE_ROLLUPS = `WITH m AS (
  DELETE FROM webhook_metric_buckets WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM webhook_metric_buckets WHERE webhook_id = $1 AND size IN (60, 900, 7200, 21600) AND bucket_start < $2 LIMIT $3))
  RETURNING 1
), b AS (
  DELETE FROM webhook_backlog_samples WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM webhook_backlog_samples WHERE webhook_id = $1 AND size IN (60, 900, 7200, 21600) AND bucket_start < $2 LIMIT $3))
  RETURNING 1
) SELECT GREATEST((SELECT count(*) FROM m), (SELECT count(*) FROM b)) AS n`;

interface WebhookRow {
  id: string;
  project_id: string;
  quota_overrides: unknown;
  tier: string;
  custom_quotas: unknown;
}

async function pass(rt: Pick<Runtime, 'db' | 'workerUtils'> & Partial<Pick<Runtime, 'config'>>, report: RetentionReport, s: PassState): Promise<void> {
  const db = rt.db.pool;
  // File content whose payload retention ended (its expires_at, set from the webhook's effective
  // payload retention when the file came in): out of the store, then marked and counted down.
  const files = await purgeExpiredFiles({ db: rt.db, config: rt.config ?? processConfig }, { batchSize: s.batchSize, now: s.now, deadline: s.deadline });
  report.filesPurged += files.purged;
  if (!files.complete) report.complete = false;
  // Whole days past every project's history retention go at once; the batches below then work
  // only inside the days still needed by someone.
  const dropped = await dropExpiredPartitions(db, { now: s.now, deadline: s.deadline });
  report.partitionsDropped.push(...dropped.dropped);
  // Webhooks, by primary key in pages: each with its effective limits.
  for (let after = ''; ; ) {
    const { rows } = await db.query<WebhookRow>(
      `SELECT w.id, w.project_id, w.quota_overrides, p.tier, p.custom_quotas FROM webhooks w JOIN projects p ON p.id = w.project_id
        WHERE w.id > $1 ORDER BY w.id LIMIT 200`,
      [after],
    );
    for (const w of rows) {
      const q = webhookQuotas({ tier: w.tier, customQuotas: w.custom_quotas }, { quotaOverrides: w.quota_overrides });
      const history = s.now - q.history_retention_seconds * 1000;
      const payload = s.now - q.payload_retention_seconds * 1000;
      for (;;) {
        const { rows: d } = await db.query<{ n: string; dlq: string }>(DELETE_DELIVERIES, [w.id, idBefore('del', history), s.batchSize]);
        report.deliveriesDeleted += Number(d[0].n);
        report.dlqEntriesDeleted += Number(d[0].dlq);
        if (Number(d[0].n) < s.batchSize) break;
        if (Date.now() > s.deadline) {
          report.complete = false;
          break;
        }
      }
      report.eventsDeleted += await drain(db, s, report, DELETE_EVENTS, [w.id, idBefore('evt', history)]);
      report.rollupsDeleted += await drain(db, s, report, DELETE_ROLLUPS, [w.id, new Date(history)]);
      report.payloadsPurged += await cursorWalk(db, s, report, w.id, 'payload', idBefore('evt', payload));
      report.dispatchesPurged += await cursorWalk(db, s, report, w.id, 'dispatch', idBefore('del', payload));
      // Files of this webhook older than its payload retention as it is NOW (expires_at was fixed
      // at ingest; quota overrides may have tightened it since).
      const tightened = await purgeExpiredFiles({ db: rt.db, config: rt.config ?? processConfig }, { batchSize: s.batchSize, now: s.now, deadline: s.deadline, webhook: { id: w.id, idBefore: idBefore('file', payload) } });
      report.filesPurged += tightened.purged;
      if (!tightened.complete) report.complete = false;
      if (Date.now() > s.deadline) {
        report.complete = false;
        return;
      }
    }
    if (rows.length < 200) break;
    after = rows[rows.length - 1].id;
  }

  // Per project, with the project's limits.
  for (let after = ''; ; ) {
    const { rows } = await db.query<{ id: string; tier: string; custom_quotas: unknown }>('SELECT id, tier, custom_quotas FROM projects WHERE id > $1 ORDER BY id LIMIT 200', [after]);
    for (const p of rows) {
      const history = s.now - projectQuotas({ tier: p.tier, customQuotas: p.custom_quotas }).history_retention_seconds * 1000;
      report.replayJobsDeleted += await drain(
        db,
        s,
        report,
        `WITH gone AS (DELETE FROM replay_jobs WHERE id IN (
           SELECT id FROM replay_jobs WHERE project_id = $1 AND id < $2 AND status NOT IN ('queued', 'running') ORDER BY id LIMIT $3) RETURNING 1)
         SELECT count(*) AS n FROM gone`,
        [p.id, idBefore('rpl', history)],
      );
      // The project's rows that only history keeps, oldest first by id (ids are ULIDs: older than =
      // below), deleted by their primary key (a DLQ entry's is (delivery_id, id)).
      const olderRows = (table: 'audit_logs' | 'dlq_entries' | 'automation_runs' | 'alert_dispatches', prefix: string, key = 'id') =>
        drain(
          db,
          s,
          report,
          `WITH gone AS (DELETE FROM ${table} WHERE (${key}) IN (SELECT ${key} FROM ${table} WHERE project_id = $1 AND id < $2 ORDER BY id LIMIT $3) RETURNING 1)
           SELECT count(*) AS n FROM gone`,
          [p.id, idBefore(prefix, history)],
        );
      report.auditLogsDeleted += await olderRows('audit_logs', 'aud');
      report.dlqEntriesDeleted += await olderRows('dlq_entries', 'dlq', 'delivery_id, id');
      report.automationRunsDeleted += await olderRows('automation_runs', 'run');
      report.alertDispatchesDeleted += await olderRows('alert_dispatches', 'ald');
      if (Date.now() > s.deadline) {
        report.complete = false;
        return;
      }
    }
    if (rows.length < 200) break;
    after = rows[rows.length - 1].id;
  }

  await housekeeping(rt, report, s);
}

/** graphile-worker's permanently failed jobs and unused queues, old rate windows, closed months' counter shards. */
async function housekeeping(rt: Pick<Runtime, 'db' | 'workerUtils'>, report: RetentionReport, s: PassState): Promise<void> {
  const db = rt.db.pool;
  await rt.workerUtils.cleanup({ tasks: ['DELETE_PERMAFAILED_JOBS', 'GC_JOB_QUEUES'] });
  // Ingest's one-second windows: a row is reused by its key's next hit, so one idle for an hour only takes room.
  report.rateWindowsDeleted += await drain(
    db,
    s,
    report,
    `WITH gone AS (DELETE FROM rate_limit_windows WHERE ctid IN (SELECT ctid FROM rate_limit_windows WHERE window_start < $1 LIMIT $2) RETURNING 1)
     SELECT count(*) AS n FROM gone`,
    [Math.floor(s.now / 1000) - 3600],
  );
  // Inbound dedupe keys (provider packs) past their window: an expired key is only reused when the
  // same delivery id comes back, so keys that never do would pile up. By the expires_at index.
  report.dedupeKeysDeleted += await drain(
    db,
    s,
    report,
    `WITH gone AS (DELETE FROM inbound_dedupe WHERE ctid IN (SELECT ctid FROM inbound_dedupe WHERE expires_at < $1 LIMIT $2) RETURNING 1)
     SELECT count(*) AS n FROM gone`,
    [new Date(s.now)],
  );
  // Idempotency keys past their window, the same way (their table of their own, never partitioned);
  // the deliveries keep their idempotency_key for their history's life.
  report.idempotencyKeysDeleted += await drain(
    db,
    s,
    report,
    `WITH gone AS (DELETE FROM ingest_idempotency_keys WHERE ctid IN (SELECT ctid FROM ingest_idempotency_keys WHERE expires_at < $1 LIMIT $2) RETURNING 1)
     SELECT count(*) AS n FROM gone`,
    [new Date(s.now)],
  );
  // Counters of closed months (periods 'YYYY-MM', 'YYYY-MM-DD', … before this month) no longer
  // take writes: their shard rows are folded into shard 0, at most once an hour.
  if (new Date(s.now).getUTCMinutes() !== 7 && !foldNow) return;
  const month = new Date(s.now).toISOString().slice(0, 7);
  report.counterRowsFolded += await drain(
    db,
    s,
    report,
    `WITH batch AS (
       SELECT project_id, webhook_id, metric, period, shard FROM usage_counters WHERE period < $1 AND shard <> 0 LIMIT $2
     ), moved AS (
       DELETE FROM usage_counters u USING batch b
        WHERE (u.project_id, u.webhook_id, u.metric, u.period, u.shard) = (b.project_id, b.webhook_id, b.metric, b.period, b.shard)
       RETURNING u.project_id, u.webhook_id, u.metric, u.period, u.value
     ), folded AS (
       INSERT INTO usage_counters AS u (project_id, webhook_id, metric, period, shard, value)
       SELECT project_id, webhook_id, metric, period, 0, sum(value) FROM moved GROUP BY 1, 2, 3, 4
       ON CONFLICT (project_id, webhook_id, metric, period, shard) DO UPDATE SET value = u.value + excluded.value
     )
     SELECT count(*) AS n FROM moved`,
    [month],
  );
}

/** Tests: fold closed months' counters on every pass, not only at minute 7 of the hour. */
let foldNow = false;
export function foldCountersEveryPass(on: boolean): void {
  foldNow = on;
}
