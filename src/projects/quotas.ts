import type pg from 'pg';
import { QuotaExceeded, type QuotaName } from '../errors.ts';
import type { Runtime } from '../runtime.ts';
import { hasFeature } from './gates.ts';
import { QUOTA_NAMES, TIER_QUOTAS, type TierQuotas } from './tiers.ts';
import type { Tier } from '../config.ts';

/**
 * Effective quotas and the checks that enforce them.
 *
 * Limits: the tier table, then an Enterprise project's custom quotas, then a webhook's
 * overrides, which may only tighten (a webhook's limit is the smaller of the two).
 *
 * Usage lives in PostgreSQL (usage_counters, rate_limit_windows), shared by every process.
 * Deliveries, backlog depth and stored payload bytes are counted by triggers on deliveries and
 * events (migration usage_counter_triggers), so every writer keeps them right; the checks here
 * read them. Counters are sharded by connection so busy projects do not queue on one row lock.
 *
 * Exactness: a project (or webhook) whose ingest rate limit is at most EXACT_RATE_LIMIT
 * req/s, which covers every tier table value, takes a transaction-level advisory lock first, so
 * concurrent requests are checked one after another and no limit is overshot. Above that, the
 * check is a single statement without that lock: concurrent ingests may overshoot a limit by at
 * most the number of ingest transactions in flight, which keeps quota checks off the
 * throughput path of high-volume custom quotas. There, far from every limit, a process also
 * reads the usage counters at most every 250 ms (counterReadNeeded); near one, on every request.
 */

export type ProjectQuotaSource = { id: string; tier: string; customQuotas: unknown; overageEnabled?: boolean };
export type WebhookQuotaSource = { id: string; quotaOverrides: unknown };

/** Quotas a webhook override may tighten (monthly deliveries are per project only). */
export const OVERRIDABLE_QUOTAS = [
  'ingest_rate',
  'stored_payload_bytes',
  'file_storage_bytes',
  'backlog_depth',
  'replay_volume',
  'history_retention_seconds',
  'payload_retention_seconds',
] as const satisfies readonly (keyof TierQuotas)[];
export type OverridableQuota = (typeof OVERRIDABLE_QUOTAS)[number];
export type QuotaOverrides = Partial<Record<OverridableQuota, number>>;

export const EXACT_RATE_LIMIT = 200;

/**
 * QUOTA_ENFORCEMENT=off (single-tenant self-hosting, benchmarking the checks' cost): nothing is
 * refused. Ingest skips its check altogether (it is the hot path); usage is still counted, so
 * turning enforcement back on starts from the real figures.
 */
function enforcing(rt: Pick<Runtime, 'config'>): boolean {
  return rt.config.QUOTA_ENFORCEMENT !== 'off';
}

function tierTable(tier: string): TierQuotas {
  return TIER_QUOTAS[tier as Tier] ?? TIER_QUOTAS.free;
}

function isQuotaValue(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/** The project's limits: its tier's, with Enterprise custom quotas on top. */
export function projectQuotas(project: Pick<ProjectQuotaSource, 'tier' | 'customQuotas'>): TierQuotas {
  const quotas = { ...tierTable(project.tier) };
  if (project.tier === 'enterprise' && project.customQuotas && typeof project.customQuotas === 'object') {
    for (const name of QUOTA_NAMES) {
      const v = (project.customQuotas as Record<string, unknown>)[name];
      if (isQuotaValue(v)) quotas[name] = v;
    }
  }
  return quotas;
}

/** The webhook's stored overrides (well-formed entries only). */
export function webhookOverrides(webhook: Pick<WebhookQuotaSource, 'quotaOverrides'>): QuotaOverrides {
  const out: QuotaOverrides = {};
  const raw = webhook.quotaOverrides;
  if (!raw || typeof raw !== 'object') return out;
  for (const name of OVERRIDABLE_QUOTAS) {
    const v = (raw as Record<string, unknown>)[name];
    if (isQuotaValue(v)) out[name] = v;
  }
  return out;
}

/** The limits that apply to one webhook: the project's, tightened by the webhook's overrides. */
export function webhookQuotas(project: Pick<ProjectQuotaSource, 'tier' | 'customQuotas'>, webhook: Pick<WebhookQuotaSource, 'quotaOverrides'>): TierQuotas {
  return tightened(projectQuotas(project), webhookOverrides(webhook));
}

function tightened(projectLimits: TierQuotas, overrides: QuotaOverrides): TierQuotas {
  const quotas = { ...projectLimits };
  for (const [name, v] of Object.entries(overrides) as [OverridableQuota, number][]) {
    quotas[name] = Math.min(quotas[name], v);
  }
  return quotas;
}

/** Whether the project may pass its monthly delivery limit (paid tier and opted in). */
export function overageActive(project: Pick<ProjectQuotaSource, 'tier' | 'overageEnabled'>): boolean {
  return !!project.overageEnabled && hasFeature(project.tier, 'overage');
}

type Check = { quota: QuotaName; scope: 'project' | 'webhook'; limit: number; current: number; delta: number; retryAfterSec?: number };

function firstExceeded(checks: Check[]): void {
  for (const c of checks) {
    if (c.current + c.delta > c.limit) throw new QuotaExceeded(c);
  }
}

type Queryable = pg.PoolClient | pg.Pool;

/**
 * Serialises quota checks of one project (or webhook) until the caller's transaction ends.
 * Without a transaction (no client) there is nothing to hold it.
 */
async function lockQuotaScope(client: pg.PoolClient | null, scope: string): Promise<void> {
  if (!client) return;
  await client.query({ name: 'quota_lock', text: 'SELECT pg_advisory_xact_lock(hashtextextended($1, 727003))', values: [scope] });
}

function exactScope(project: ProjectQuotaSource, webhook: WebhookQuotaSource | null | undefined, pq: TierQuotas, wq: TierQuotas | null): string | null {
  if (pq.ingest_rate <= EXACT_RATE_LIMIT) return `project:${project.id}`;
  if (webhook && wq && wq.ingest_rate <= EXACT_RATE_LIMIT) return `webhook:${webhook.id}`;
  return null;
}

const counterSum = (where: string) => `(SELECT coalesce(sum(value), 0) FROM usage_counters WHERE ${where})::bigint`;

/**
 * The ingest checks in their contract order (the first exceeded one is the refusal): `column` is
 * the usage ingestQuotaCte reads for it, `limit` its limit's parameter (NULL: not checked).
 */
const INGEST_CHECKS = [
  { quota: 'ingest_rate', scope: 'project', column: 'project_rate', limit: 5 },
  { quota: 'ingest_rate', scope: 'webhook', column: 'webhook_rate', limit: 6 },
  { quota: 'monthly_deliveries', scope: 'project', column: 'monthly_deliveries', limit: 7 },
  { quota: 'backlog_depth', scope: 'project', column: 'project_backlog', limit: 8 },
  { quota: 'backlog_depth', scope: 'webhook', column: 'webhook_backlog', limit: 9 },
  { quota: 'stored_payload_bytes', scope: 'project', column: 'project_stored', limit: 10 },
  { quota: 'stored_payload_bytes', scope: 'webhook', column: 'webhook_stored', limit: 11 },
] as const satisfies readonly { quota: QuotaName; scope: Check['scope']; column: string; limit: number }[];

/** Number of parameters ingestQuotaCte takes ($1 … $11); a statement that embeds it numbers its own after them. */
export const INGEST_QUOTA_PARAMS = 11;

const ingestDelta = (quota: QuotaName) => (quota === 'stored_payload_bytes' ? '$4::bigint' : '1');
const ingestAdmitted = INGEST_CHECKS.map((c) => `coalesce(${c.column} + ${ingestDelta(c.quota)} <= $${c.limit}::bigint, true)`).join('\n             AND ');

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
 * Parameters: $1 the project id; $2 the rate-window keys to count this request in (the
 * project's, then the webhook's where its ingest rate is checked); $3 the webhook id where its
 * backlog or stored bytes are checked, else NULL; $4 the payload bytes to retain; $5 … $11 the
 * limits, in INGEST_CHECKS order (NULL: not checked).
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
export function ingestQuotaCte(readCounters: boolean): string {
  return `
ingest_quota_args AS MATERIALIZED (
  SELECT $1::text AS project_id, $2::text[] AS rate_keys, $3::text AS webhook_id, $4::bigint AS bytes,
         floor(extract(epoch FROM statement_timestamp()))::bigint AS w,
         to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM') AS month
), ingest_quota AS MATERIALIZED (
  SELECT admitted,
         CASE WHEN NOT admitted OR ${readCounters} THEN ARRAY[${INGEST_CHECKS.map((c) => c.column).join(', ')},
           ceil(extract(epoch FROM date_trunc('month', now() AT TIME ZONE 'UTC') + interval '1 month' - (now() AT TIME ZONE 'UTC')))::bigint] END AS usage
    FROM (
      SELECT r.*, d.*, b.*, s.*,
             ${ingestAdmitted} AS admitted
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
 * ingestQuotaCte, after that statement's `stored` CTE (the event insert, which returns a row
 * only when the checks admitted the request and the webhook takes events): a refused request is
 * not counted, also when the statement commits on its own.
 */
export const INGEST_RATE_HIT_CTE = `
ingest_rate_hit AS (
  INSERT INTO rate_limit_windows AS r (key, shard, window_start, count)
  SELECT k.key, usage_counter_shard(), a.w, 1 FROM ingest_quota_args a, unnest(a.rate_keys) AS k(key)
   WHERE EXISTS (SELECT FROM stored)
  ON CONFLICT (key, shard) DO UPDATE
    SET count = CASE WHEN r.window_start = excluded.window_start THEN r.count + 1 ELSE 1 END,
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
  /** Size of the payload that would be retained. */
  bodyBytes: number;
}

/** The ingest checks of one request, prepared for the statement that embeds ingestQuotaCte. */
export interface IngestQuotaCheck {
  /** Values of $1 … $INGEST_QUOTA_PARAMS. */
  values: unknown[];
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
}

/** Index in INGEST_CHECKS of the first check on a usage counter (the ones before are rate checks). */
const FIRST_COUNTER_CHECK = INGEST_CHECKS.findIndex((c) => c.quota !== 'ingest_rate');

/** A process's last reading of a project's (and webhook's) usage counters, in INGEST_CHECKS order. */
interface CounterReading {
  at: number;
  usage: number[];
}
const counterReadings = new Map<string, CounterReading>();
const COUNTER_READING_MAX_AGE_MS = 250;
const HEADROOM_SHARE = 0.1;
const HEADROOM_REQUESTS = 1_000;

function rememberCounterReading(key: string, usage: number[]) {
  if (counterReadings.size >= 10_000 && !counterReadings.has(key)) counterReadings.clear();
  counterReadings.set(key, { at: Date.now(), usage });
}

/**
 * Whether a request (of a project without exact limits) must read the usage counters: unless
 * this process read them under COUNTER_READING_MAX_AGE_MS ago and every counter then stood at
 * most 90 % of its limit and at least HEADROOM_REQUESTS requests' worth below it. Reading three
 * counters' shards is most of the checks' cost; far from the limits, a reading a quarter of a
 * second old decides the same. To pass a limit unseen, the projects' processes together would
 * have to spend that headroom within those 250 ms, on top of the overshoot by in-flight
 * requests that limits above the exact threshold already allow (see the top of this file).
 */
function counterReadNeeded(reading: CounterReading | undefined, limits: (number | null)[], bytes: number): boolean {
  if (!reading || Date.now() - reading.at > COUNTER_READING_MAX_AGE_MS) return true;
  for (let i = FIRST_COUNTER_CHECK; i < limits.length; i++) {
    const limit = limits[i];
    if (limit === null) continue;
    const perRequest = INGEST_CHECKS[i].quota === 'stored_payload_bytes' ? Math.max(bytes, 1) : 1;
    if (reading.usage[i] + Math.max(limit * HEADROOM_SHARE, HEADROOM_REQUESTS * perRequest) > limit) return true;
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
  // In INGEST_CHECKS order. Webhook-scope usage is checked (and read) only where the webhook overrides that quota.
  const limits = [
    pq.ingest_rate,
    overrides.ingest_rate !== undefined ? wq.ingest_rate : null,
    overageActive(project) ? null : pq.monthly_deliveries,
    pq.backlog_depth,
    overrides.backlog_depth !== undefined ? wq.backlog_depth : null,
    pq.stored_payload_bytes,
    overrides.stored_payload_bytes !== undefined ? wq.stored_payload_bytes : null,
  ];
  const rateKeys = overrides.ingest_rate !== undefined ? [`ingest:p:${project.id}`, `ingest:w:${webhook.id}`] : [`ingest:p:${project.id}`];
  const readsWebhookUsage = overrides.backlog_depth !== undefined || overrides.stored_payload_bytes !== undefined;
  const readingKey = `${project.id} ${readsWebhookUsage ? webhook.id : ''}`;
  const readCounters = scope !== null || counterReadNeeded(counterReadings.get(readingKey), limits, bytes);
  if (!readCounters) for (let i = FIRST_COUNTER_CHECK; i < limits.length; i++) limits[i] = null;
  return {
    values: [project.id, rateKeys, readsWebhookUsage ? webhook.id : null, bytes, ...limits],
    lock: (client) => (scope ? lockQuotaScope(client, scope) : Promise.resolve()),
    exact: scope !== null,
    readCounters,
    enforce(row) {
      if (readCounters && row.usage) rememberCounterReading(readingKey, row.usage.map(Number));
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

// ---------------------------------------------------------------- replays

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

// ---------------------------------------------------------------- file storage

export interface FileStorageQuotaInput {
  project: ProjectQuotaSource;
  webhook: WebhookQuotaSource | null;
  /** Bytes of file content about to be stored. */
  bytes: number;
}

async function addFileStorage(db: Queryable, projectId: string, webhookId: string | null, bytes: number) {
  await db.query({
    name: 'file_storage_add',
    text: `INSERT INTO usage_counters AS u (project_id, webhook_id, metric, period, shard, value)
           SELECT $1, w, 'file_storage_bytes', 'current', usage_counter_shard(), $3 FROM unnest($2::text[]) WITH ORDINALITY AS s(w, i) ORDER BY s.i
           ON CONFLICT (project_id, webhook_id, metric, period, shard) DO UPDATE SET value = u.value + excluded.value`,
    values: [projectId, webhookId ? ['', webhookId] : [''], bytes],
  });
}

/**
 * File storage bytes (409), for the project and, where overridden, the webhook. Checks and
 * counts `bytes` in the caller's transaction; when the files are deleted, call releaseFileStorage
 * in the deleting transaction.
 */
export async function enforceFileStorageQuota(rt: Runtime, client: pg.PoolClient | null, input: FileStorageQuotaInput): Promise<void> {
  const { project, webhook } = input;
  const bytes = Math.max(0, Math.floor(input.bytes));
  const db: Queryable = client ?? rt.db.pool;
  await lockQuotaScope(client, `project:${project.id}`);
  const pq = projectQuotas(project);
  const { rows } = await db.query({
    name: 'file_storage_usage',
    text: `SELECT ${counterSum(`project_id = $1 AND webhook_id = '' AND metric = 'file_storage_bytes' AND period = 'current'`)} AS project_bytes,
                  ${counterSum(`project_id = $1 AND webhook_id = $2 AND metric = 'file_storage_bytes' AND period = 'current'`)} AS webhook_bytes`,
    values: [project.id, webhook?.id ?? ''],
  });
  const checks: Check[] = [{ quota: 'file_storage_bytes', scope: 'project', limit: pq.file_storage_bytes, current: rows[0].project_bytes, delta: bytes }];
  if (webhook && webhookOverrides(webhook).file_storage_bytes !== undefined) {
    checks.push({ quota: 'file_storage_bytes', scope: 'webhook', limit: webhookQuotas(project, webhook).file_storage_bytes, current: rows[0].webhook_bytes, delta: bytes });
  }
  if (enforcing(rt)) firstExceeded(checks);
  await addFileStorage(db, project.id, webhook?.id ?? null, bytes);
}

/** Gives back file storage counted by enforceFileStorageQuota (deleted or expired files). */
export async function releaseFileStorage(db: Queryable, input: { projectId: string; webhookId: string | null; bytes: number }): Promise<void> {
  await addFileStorage(db, input.projectId, input.webhookId, -Math.max(0, Math.floor(input.bytes)));
}
