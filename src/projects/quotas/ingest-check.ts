import type pg from 'pg';
import type { QuotaName } from '../../errors.ts';
import type { NamedParams } from '../../db/named-params.ts';
import type { Runtime } from '../../runtime.ts';
import { enforcing, exactScope, farFromLimit, HEADROOM_REQUESTS, RecentReadings, firstExceeded, lockQuotaScope, overageActive, projectQuotas, tightened, webhookOverrides, type Check, type ProjectQuotaSource, type WebhookQuotaSource } from './limits.ts';

/**
 * The ingest checks in their contract order (the first exceeded one is the refusal): `column` is
 * the usage ingestQuotaCte reads for it; its limit is the statement parameter `limit_<column>`
 * (NULL: not checked).
 */
const INGEST_CHECKS = [
  { quota: 'ingest_rate', scope: 'project', column: 'project_rate' },
  { quota: 'ingest_rate', scope: 'webhook', column: 'webhook_rate' },
  { quota: 'monthly_deliveries', scope: 'project', column: 'monthly_deliveries' },
  { quota: 'backlog_depth', scope: 'project', column: 'project_backlog' },
  { quota: 'backlog_depth', scope: 'webhook', column: 'webhook_backlog' },
  { quota: 'stored_payload_bytes', scope: 'project', column: 'project_stored' },
  { quota: 'stored_payload_bytes', scope: 'webhook', column: 'webhook_stored' },
] as const satisfies readonly { quota: QuotaName; scope: Check['scope']; column: string }[];

const limitParam = (column: string) => `limit_${column}`;

const ingestAdmitted = (p: NamedParams) =>
  INGEST_CHECKS.map((c) => `coalesce(${c.column} + ${c.quota === 'stored_payload_bytes' ? p.$('quota_bytes', 'bigint') : p.$('quota_events', 'bigint')} <= ${p.$(limitParam(c.column), 'bigint')}, true)`).join(
    '\n             AND ',
  );

/** The usage counters' reads (see ingestQuotaCte): each counter is one index range, its shards. */
const COUNTER_READS = `        LATERAL (SELECT coalesce(sum(value), 0)::bigint AS monthly_deliveries
                   FROM usage_counters WHERE project_id = a.project_id AND webhook_id = '' AND metric = 'deliveries' AND period = a.month) d,
        LATERAL (SELECT coalesce(sum(value) FILTER (WHERE webhook_id = ''), 0)::bigint AS project_backlog,
                        coalesce(sum(value) FILTER (WHERE webhook_id <> ''), 0)::bigint AS webhook_backlog
                   FROM usage_counters WHERE project_id = a.project_id AND webhook_id IN ('', a.webhook_id) AND metric = 'backlog_depth' AND period = 'current') b,
        LATERAL (SELECT coalesce(sum(value) FILTER (WHERE webhook_id = ''), 0)::bigint AS project_stored,
                        coalesce(sum(value) FILTER (WHERE webhook_id <> ''), 0)::bigint AS webhook_stored
                   FROM usage_counters WHERE project_id = a.project_id AND webhook_id IN ('', a.webhook_id) AND metric = 'stored_payload_bytes' AND period = 'current') s`;

/** In place of COUNTER_READS, when the process's recent reading leaves ample headroom (see counterReadNeeded). */
const SKIPPED_COUNTER_READS = `
        LATERAL (SELECT NULL::bigint AS monthly_deliveries) d,
        LATERAL (SELECT NULL::bigint AS project_backlog, NULL::bigint AS webhook_backlog) b,
        LATERAL (SELECT NULL::bigint AS project_stored, NULL::bigint AS webhook_stored) s`;

/**
 * The ingest checks as common table expressions, for the statement that stores the event
 * (src/ingest/store-event.ts, which also embeds INGEST_RATE_HIT_CTE): counting this request in
 * the current one-second rate window and checking every quota cost no round trip of their own. It defines `ingest_quota`, one row:
 * `admitted`, true when no check is exceeded (store only then), and, when one is, `usage`: the
 * figures the checks compared, in INGEST_CHECKS order, then the seconds left in the month. Reads
 * see the statement's snapshot, i.e. the usage before this request.
 *
 * Parameters (IngestQuotaCheck.values gives them): `quota_project_id`; `quota_rate_keys`, the
 * rate-window keys to count this request in (the project's, then the webhook's where its ingest
 * rate is checked); `quota_webhook_id`, the webhook where its backlog or stored bytes are
 * checked, else NULL; `quota_bytes`, the payload bytes to retain; `quota_events`, how many events
 * the statement stores (all or none: each counts once); `limit_<column>` for each
 * check (NULL: not checked).
 *
 * Without `readCounters`, only the rate windows are read and the counters' limits must be NULL:
 * the form for a request whose process read the counters a moment ago, far from every limit
 * (counterReadNeeded). With it, `usage` is returned also when the request is admitted, to be
 * remembered for that decision.
 *
 * Each counter is one index range (its shards), the webhook's beside the project's. The values
 * reach the reads through the materialized `ingest_quota_args`, out of the planner's sight: it
 * estimates them the same for every request, so the prepared statement keeps one generic plan
 * instead of being planned again for each request's project (which costs more than the checks).
 */
export function ingestQuotaCte(p: NamedParams, readCounters: boolean): string {
  return `
ingest_quota_args AS MATERIALIZED (
  SELECT ${p.$('quota_project_id', 'text')} AS project_id, ${p.$('quota_rate_keys', 'text[]')} AS rate_keys, ${p.$('quota_webhook_id', 'text')} AS webhook_id,
         ${p.$('quota_bytes', 'bigint')} AS bytes, ${p.$('quota_events', 'bigint')} AS events,
         floor(extract(epoch FROM statement_timestamp()))::bigint AS w,
         to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM') AS month
), ingest_quota AS MATERIALIZED (
  SELECT admitted,
         CASE WHEN NOT admitted OR ${readCounters} THEN ARRAY[${INGEST_CHECKS.map((c) => c.column).join(', ')},
           ceil(extract(epoch FROM date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month' - (now() AT TIME ZONE 'UTC')))::bigint] END AS usage
    FROM (
      SELECT r.*, d.*, b.*, s.*,
             ${ingestAdmitted(p)} AS admitted
        FROM ingest_quota_args a,
        LATERAL (SELECT coalesce(sum(count) FILTER (WHERE key = a.rate_keys[1]), 0)::bigint AS project_rate,
                        coalesce(sum(count) FILTER (WHERE key = a.rate_keys[2]), 0)::bigint AS webhook_rate
                   FROM rate_limit_windows WHERE key = ANY(a.rate_keys) AND window_start = a.w) r,
${readCounters ? COUNTER_READS : SKIPPED_COUNTER_READS}
    ) checked
)`;
}

/**
 * Counts the request in its one-second rate windows, in the statement that embeds
 * ingestQuotaCte, after `storedCte` (the name of that statement's event insert, which returns a
 * row only when the checks admitted the request and the webhook takes events): a refused request
 * is not counted, also when the statement commits on its own. Both keys (the project's and its
 * webhook's) belong to the request's project: the rows' project_id.
 */
export const ingestRateHitCte = (storedCte: string) => `
ingest_rate_hit AS (
  INSERT INTO rate_limit_windows AS r (project_id, key, shard, window_start, count)
  SELECT a.project_id, k.key, usage_counter_shard(), a.w, a.events FROM ingest_quota_args a, unnest(a.rate_keys) AS k(key)
   WHERE EXISTS (SELECT FROM ${storedCte})
  ON CONFLICT (key, shard) DO UPDATE
    SET count = CASE WHEN r.window_start = excluded.window_start THEN r.count + excluded.count ELSE excluded.count END,
        window_start = excluded.window_start
)`;

/** What the statement returns of `ingest_quota`. */
export interface IngestQuotaRow {
  admitted: boolean;
  /** Null when admitted; bigint[] arrives as strings. */
  usage: (string | number)[] | null;
}

export interface IngestQuotaInput {
  project: ProjectQuotaSource;
  webhook: WebhookQuotaSource;
  /** Size of the payload that would be retained (of all the events, with `events`). */
  bodyBytes: number;
  /** How many events the statement stores together, all or none (default 1: see src/ingest/store-batch.ts). */
  events?: number;
  /** false: the request is neither checked against nor counted in the ingest rate (cron ticks); default true. */
  ingestRate?: boolean;
}

/** The ingest checks of one request, prepared for the statement that embeds ingestQuotaCte. */
export interface IngestQuotaCheck {
  /** The statement parameters ingestQuotaCte names, by name. */
  values: Record<string, unknown>;
  /**
   * Takes the lock that makes small rate limits exact (see the top of this file), when they
   * apply; call it in the ingest transaction before the statement.
   */
  lock(client: pg.PoolClient): Promise<void>;
  /** Small rate limits apply: the check needs `lock` and a transaction around it and the statement. */
  exact: boolean;
  /** The statement must read the usage counters (ingestQuotaCte(true)); else only the rate windows. */
  readCounters: boolean;
  /** Throws the QuotaExceeded the statement's `ingest_quota` row shows, if any (the first in the contract's order). */
  enforce(row: IngestQuotaRow): void;
  /** The smallest limit that counts events (ingest rate, monthly deliveries, backlog depth) that applies, read or not this time; null: none. */
  smallestCountLimit: number | null;
}

/** Index in INGEST_CHECKS of the first check on a usage counter (the ones before are rate checks). */
const FIRST_COUNTER_CHECK = INGEST_CHECKS.findIndex((c) => c.quota !== 'ingest_rate');

/** A process's last reading of a project's (and webhook's) usage counters, in INGEST_CHECKS order. */
const counterReadings = new RecentReadings<number[]>();

/**
 * Whether a request (of a project without exact limits) must read the usage counters: unless
 * this process read them under READING_MAX_AGE_MS ago and every counter then stood at
 * most 90 % of its limit and at least HEADROOM_REQUESTS requests' worth below it. Reading three
 * counters' shards is most of the checks' cost; far from the limits, a reading a quarter of a
 * second old decides the same. To pass a limit unseen, the projects' processes together would
 * have to spend that headroom within those 250 ms, on top of the overshoot by in-flight
 * requests that limits above the exact threshold already allow (see the top of this file).
 */
function counterReadNeeded(usage: number[] | undefined, limits: (number | null)[], bytes: number, events: number): boolean {
  if (!usage) return true;
  for (let i = FIRST_COUNTER_CHECK; i < limits.length; i++) {
    const limit = limits[i];
    if (limit === null) continue;
    const perRequest = INGEST_CHECKS[i].quota === 'stored_payload_bytes' ? Math.max(bytes, 1) : events;
    if (!farFromLimit(usage[i], limit, HEADROOM_REQUESTS * perRequest)) return true;
  }
  return false;
}

/**
 * Quota checks on the ingest path: ingest rate (429), monthly deliveries (429), backlog depth
 * and stored payload bytes (409), for the project and, where the webhook overrides them, the
 * webhook. Null when QUOTA_ENFORCEMENT is off: ingest then skips the check altogether (it is
 * the hot path), and the one-second rate windows, which serve only this check, are not counted.
 *
 * Run the statement inside the ingest transaction: this request's rate-limit hit is part of
 * that transaction, and the event and delivery inserts count the delivery, backlog and payload
 * bytes themselves (triggers). When enforce throws, roll back.
 */
export function ingestQuotaCheck(rt: Pick<Runtime, 'config'>, input: IngestQuotaInput): IngestQuotaCheck | null {
  if (!enforcing(rt)) return null;
  const { project, webhook } = input;
  const pq = projectQuotas(project);
  const overrides = webhookOverrides(webhook);
  const wq = tightened(pq, overrides);
  const scope = exactScope(project, webhook, pq, wq);
  const bytes = Math.max(0, Math.floor(input.bodyBytes));
  const events = input.events ?? 1;
  // In INGEST_CHECKS order. Webhook-scope usage is checked (and read) only where the webhook overrides that quota.
  const rated = input.ingestRate !== false;
  const limits = [
    rated ? pq.ingest_rate : null,
    rated && overrides.ingest_rate !== undefined ? wq.ingest_rate : null,
    overageActive(project) ? null : pq.monthly_deliveries,
    pq.backlog_depth,
    overrides.backlog_depth !== undefined ? wq.backlog_depth : null,
    pq.stored_payload_bytes,
    overrides.stored_payload_bytes !== undefined ? wq.stored_payload_bytes : null,
  ];
  // No keys: nothing is counted in the rate windows (and their reads sum nothing).
  const rateKeys = !rated ? [] : overrides.ingest_rate !== undefined ? [`ingest:p:${project.id}`, `ingest:w:${webhook.id}`] : [`ingest:p:${project.id}`];
  const readsWebhookUsage = overrides.backlog_depth !== undefined || overrides.stored_payload_bytes !== undefined;
  const readingKey = `${project.id} ${readsWebhookUsage ? webhook.id : ''}`;
  const smallestCountLimit = limits.reduce<number | null>((min, limit, i) => (limit === null || INGEST_CHECKS[i].quota === 'stored_payload_bytes' || (min !== null && min <= limit) ? min : limit), null);
  const readCounters = scope !== null || counterReadNeeded(counterReadings.fresh(readingKey), limits, bytes, events);
  if (!readCounters) for (let i = FIRST_COUNTER_CHECK; i < limits.length; i++) limits[i] = null;
  return {
    values: {
      quota_project_id: project.id,
      quota_rate_keys: rateKeys,
      quota_webhook_id: readsWebhookUsage ? webhook.id : null,
      quota_bytes: bytes,
      quota_events: events,
      ...Object.fromEntries(INGEST_CHECKS.map((c, i) => [limitParam(c.column), limits[i]])),
    },
    lock: (client) => (scope ? lockQuotaScope(client, scope) : Promise.resolve()),
    exact: scope !== null,
    smallestCountLimit,
    readCounters,
    enforce(row) {
      if (readCounters && row.usage) counterReadings.remember(readingKey, row.usage.map(Number));
      if (row.admitted) return;
      const usage = (row.usage ?? []).map(Number);
      const monthLeft = usage[INGEST_CHECKS.length];
      const checks: Check[] = [];
      INGEST_CHECKS.forEach((c, i) => {
        const limit = limits[i];
        if (limit === null) return;
        const retryAfterSec = c.quota === 'ingest_rate' ? 1 : c.quota === 'monthly_deliveries' ? monthLeft : undefined;
        checks.push({ quota: c.quota, scope: c.scope, limit, current: usage[i], delta: c.quota === 'stored_payload_bytes' ? bytes : 1, retryAfterSec });
      });
      firstExceeded(checks);
      // The statement compares the same figures, so one of them is exceeded.
      throw new Error('ingest quota check: the statement refused a request no check refuses');
    },
  };
}
