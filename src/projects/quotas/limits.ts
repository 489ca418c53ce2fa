import type pg from 'pg';
import type { Tier } from '../../config.ts';
import { QuotaExceeded, type QuotaName } from '../../errors.ts';
import type { Runtime } from '../../runtime.ts';
import { hasFeature } from '../gates.ts';
import { QUOTA_NAMES, TIER_QUOTAS, type TierQuotas } from '../tiers.ts';

/**
 * Effective quotas and what every check shares (the checks: ingest-check.ts, replay.ts,
 * file-storage.ts beside this file).
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
 * most the events of the ingest statements in flight (one event each, or a batch of a busy
 * webhook's events of at most 1 % of the smallest limit that counts events: src/ingest/store-batch.ts),
 * which keeps quota checks off the throughput path of high-volume custom quotas. There, far from every limit, a process also
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
export function enforcing(rt: Pick<Runtime, 'config'>): boolean {
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

export function tightened(projectLimits: TierQuotas, overrides: QuotaOverrides): TierQuotas {
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

export type Check = { quota: QuotaName; scope: 'project' | 'webhook'; limit: number; current: number; delta: number; retryAfterSec?: number };

export function firstExceeded(checks: Check[]): void {
  for (const c of checks) {
    if (c.current + c.delta > c.limit) throw new QuotaExceeded(c);
  }
}

export type Queryable = pg.PoolClient | pg.Pool;

/**
 * Serialises quota checks of one project (or webhook) until the caller's transaction ends.
 * Without a transaction (no client) there is nothing to hold it.
 */
export async function lockQuotaScope(client: pg.PoolClient | null, scope: string): Promise<void> {
  if (!client) return;
  await client.query({ name: 'quota_lock', text: 'SELECT pg_advisory_xact_lock(hashtextextended($1, 727003))', values: [scope] });
}

export function exactScope(project: ProjectQuotaSource, webhook: WebhookQuotaSource | null | undefined, pq: TierQuotas, wq: TierQuotas | null): string | null {
  if (pq.ingest_rate <= EXACT_RATE_LIMIT) return `project:${project.id}`;
  if (webhook && wq && wq.ingest_rate <= EXACT_RATE_LIMIT) return `webhook:${webhook.id}`;
  return null;
}

export const counterSum = (where: string) => `(SELECT coalesce(sum(value), 0) FROM usage_counters WHERE ${where})::bigint`;

/**
 * A process's recent readings of usage counters, by key (project, webhook): far from every limit
 * a reading under READING_MAX_AGE_MS old decides a check as a new one would (see
 * farFromLimit), so a busy project does not read its counters on every request. Used by the
 * ingest checks, the file-storage check and the SMTP refusal hint.
 */
export class RecentReadings<T> {
  private readonly readings = new Map<string, { at: number; value: T }>();

  /** The reading of `key` taken under `maxAgeMs` (at most READING_MAX_AGE_MS) ago, if any. */
  fresh(key: string, maxAgeMs = READING_MAX_AGE_MS): T | undefined {
    const r = this.readings.get(key);
    return r && Date.now() - r.at <= Math.min(maxAgeMs, READING_MAX_AGE_MS) ? r.value : undefined;
  }

  remember(key: string, value: T): void {
    if (this.readings.size >= 10_000 && !this.readings.has(key)) this.readings.clear();
    this.readings.set(key, { at: Date.now(), value });
  }
}

/** How old a reading may be and still decide far from the limits (RecentReadings). */
export const READING_MAX_AGE_MS = 250;

/**
 * Whether `used` (usage after the request) stays far from `limit`: at least 10 % of it, and at
 * least `floor` (e.g. 1,000 requests' worth), left. To pass a limit unseen, the project's processes
 * together would have to spend that headroom within READING_MAX_AGE_MS.
 */
export function farFromLimit(used: number, limit: number, floor: number): boolean {
  return used + headroom(limit, floor) <= limit;
}

/**
 * How many requests' worth (of the request's own size, where it counts bytes) a reading must leave
 * below a limit for a check to trust it without reading again: the ingest checks, the SMTP
 * refusal hint and the file-storage check all ask for this much (with 10 % of the limit).
 */
export const HEADROOM_REQUESTS = 1_000;

/** The headroom farFromLimit asks for: 10 % of `limit`, at least `floor`. */
export function headroom(limit: number, floor: number): number {
  return Math.max(limit * 0.1, floor);
}
