import type pg from 'pg';
import type { NamedParams } from '../../db/named-params.ts';
import type { Runtime } from '../../runtime.ts';
import { counterSum, enforcing, farFromLimit, HEADROOM_REQUESTS, RecentReadings, firstExceeded, lockQuotaScope, projectQuotas, webhookOverrides, webhookQuotas, type Check, type ProjectQuotaSource, type Queryable, type WebhookQuotaSource } from './limits.ts';

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

/** A check is "near" its limit when, after this request, less than 10 % of it (or these bytes) would be left (farFromLimit). */
const HEADROOM_BYTES = 64 * 1024 * 1024;

interface FileStorageLimits {
  project: number;
  /** Null: the webhook does not override the quota. */
  webhook: number | null;
}

function limitsOf(project: ProjectQuotaSource, webhook: WebhookQuotaSource | null): FileStorageLimits {
  return {
    project: projectQuotas(project).file_storage_bytes,
    webhook: webhook && webhookOverrides(webhook).file_storage_bytes !== undefined ? webhookQuotas(project, webhook).file_storage_bytes : null,
  };
}

async function readFileStorage(db: Queryable, projectId: string, webhookId: string | null): Promise<{ project: number; webhook: number }> {
  const { rows } = await db.query({
    name: 'file_storage_usage',
    text: `SELECT ${counterSum(`project_id = $1 AND webhook_id = '' AND metric = 'file_storage_bytes' AND period = 'current'`)} AS project_bytes,
                  ${counterSum(`project_id = $1 AND webhook_id = $2 AND metric = 'file_storage_bytes' AND period = 'current'`)} AS webhook_bytes`,
    values: [projectId, webhookId ?? ''],
  });
  return { project: Number(rows[0].project_bytes), webhook: Number(rows[0].webhook_bytes) };
}

const near = (limit: number | null, current: number, bytes: number, floor = HEADROOM_BYTES) => limit !== null && !farFromLimit(current + bytes, limit, floor);

/**
 * The usage the checks compare. Far from the limits it is read without a lock: concurrent
 * uploads may then overshoot by at most what is in flight, as ingest's checks above the exact
 * threshold do (limits.ts), and uploads of one project do not queue behind one another. Near a
 * limit (or with `exact`), the project's quota lock is taken first (in the caller's
 * transaction), so the check is exact.
 */
async function checkedUsage(client: pg.PoolClient | null, db: Queryable, project: ProjectQuotaSource, webhook: WebhookQuotaSource | null, limits: FileStorageLimits, bytes: number) {
  let usage = await readFileStorage(db, project.id, webhook?.id ?? null);
  if (client && (near(limits.project, usage.project, bytes) || near(limits.webhook, usage.webhook, bytes))) {
    await lockQuotaScope(client, `project:${project.id}`);
    usage = await readFileStorage(db, project.id, webhook?.id ?? null);
  }
  rememberReading(project, webhook, usage);
  return usage;
}

/** A process's last reading of a project's (and webhook's) file storage usage. */
const readings = new RecentReadings<{ project: number; webhook: number }>();
const readingKey = (project: ProjectQuotaSource, webhook: WebhookQuotaSource | null) => `${project.id} ${webhook?.id ?? ''}`;

function rememberReading(project: ProjectQuotaSource, webhook: WebhookQuotaSource | null, usage: { project: number; webhook: number }) {
  readings.remember(readingKey(project, webhook), usage);
}

/**
 * Whether this process read the usage under `maxAgeMs` (at most READING_MAX_AGE_MS) ago and it
 * was then far from every limit (see `near`), `bytes` included: a check may then run without the
 * quota lock, as checkedUsage does far from the limits.
 */
function farFromLimits(project: ProjectQuotaSource, webhook: WebhookQuotaSource | null, limits: FileStorageLimits, bytes: number, maxAgeMs?: number, floor?: number): boolean {
  const r = readings.fresh(readingKey(project, webhook), maxAgeMs);
  if (!r) return false;
  return !near(limits.project, r.project, bytes, floor) && !near(limits.webhook, r.webhook, bytes, floor);
}

/**
 * How old a reading far from the limits may be for an ingest statement to count its files
 * without reading the usage again (fileStorageCheck). Younger than READING_MAX_AGE_MS, so that
 * under steady uploads a statement that reads (and refreshes the reading) comes before it
 * expires: the requests after it would otherwise take the quota lock, one after the other.
 */
const SKIP_READ_MAX_AGE_MS = 100;

/**
 * Whether `bytes` of files would fit the quota by this process's recent reading, far from every
 * limit (true when QUOTA_ENFORCEMENT is off). A channel that keeps only what fits (email) takes
 * the one-statement path (fileStorageCheck) only then.
 */
export function fileStorageAmple(rt: Pick<Runtime, 'config'>, input: FileStorageQuotaInput): boolean {
  if (!enforcing(rt)) return true;
  return farFromLimits(input.project, input.webhook, limitsOf(input.project, input.webhook), Math.max(0, Math.floor(input.bytes)));
}

/** What the ingest statement returns of the file-storage check (fileStorageCheckCte). */
export interface FileStorageRow {
  files_fit?: boolean | null;
  /** [project bytes, webhook bytes] before this request; bigint[] arrives as strings. */
  file_usage?: (string | number)[] | null;
}

/** The name of the check's CTE, and the condition the event insert is gated on. */
const FILE_QUOTA = 'file_quota';
export const FILE_STORAGE_FITS = `(SELECT fits FROM ${FILE_QUOTA})`;

/**
 * enforceFileStorageQuota as common table expressions, for the statement that stores an event
 * with its files (src/ingest/store-event.ts): `file_quota`, one row: the usage it read (`usage`)
 * and `fits`, which gates the event insert (FILE_STORAGE_FITS). Parameters: `files_project_id`,
 * `files_webhook_id`, `files_bytes`, `files_limit_project`, `files_limit_webhook` (NULL: not
 * checked); FileStorageCheck.values gives them.
 */
export const fileStorageCheckCte = (p: NamedParams) => `
${FILE_QUOTA} AS MATERIALIZED (
  SELECT ARRAY[u.project_bytes, u.webhook_bytes] AS usage,
         coalesce(u.project_bytes + ${p.$('files_bytes', 'bigint')} <= ${p.$('files_limit_project', 'bigint')}, true)
           AND coalesce(u.webhook_bytes + ${p.$('files_bytes', 'bigint')} <= ${p.$('files_limit_webhook', 'bigint')}, true) AS fits
    FROM (SELECT ${counterSum(`project_id = ${p.$('files_project_id', 'text')} AND webhook_id = '' AND metric = 'file_storage_bytes' AND period = 'current'`)} AS project_bytes,
                 ${counterSum(`project_id = ${p.$('files_project_id', 'text')} AND webhook_id = coalesce(${p.$('files_webhook_id', 'text')}, '') AND metric = 'file_storage_bytes' AND period = 'current'`)} AS webhook_bytes) u
)`;

/**
 * Counts the files' bytes in file_storage_bytes (as addFileStorage does), in the statement that
 * stores the event, only when `storedCte` (the event insert) wrote a row. Parameters:
 * `files_project_id`, `files_webhook_id`, `files_bytes`.
 */
export const fileStorageCountCte = (p: NamedParams, storedCte: string) => `
file_storage_hit AS (
  INSERT INTO usage_counters AS u (project_id, webhook_id, metric, period, shard, value)
  SELECT ${p.$('files_project_id', 'text')}, w, 'file_storage_bytes', 'current', usage_counter_shard(), ${p.$('files_bytes', 'bigint')}
    FROM unnest(ARRAY['', ${p.$('files_webhook_id', 'text')}]) WITH ORDINALITY AS s(w, i)
   WHERE w IS NOT NULL AND EXISTS (SELECT FROM ${storedCte})
   ORDER BY s.i
  ON CONFLICT (project_id, webhook_id, metric, period, shard) DO UPDATE SET value = u.value + excluded.value
)`;

/** The values fileStorageCountCte names (and fileStorageCheckCte, with FileStorageCheck.values). */
export const fileStorageCountValues = (input: { projectId: string; webhookId: string | null; bytes: number }) => ({
  files_project_id: input.projectId,
  files_webhook_id: input.webhookId,
  files_bytes: Math.max(0, Math.floor(input.bytes)),
});

/** enforceFileStorageQuota, prepared for the statement that embeds fileStorageCheckCte. */
export interface FileStorageCheck {
  values: Record<string, unknown>;
  /** Near a limit (or without a recent reading): take `lock` in the statement's transaction first, so the check is exact. */
  exact: boolean;
  lock(client: pg.PoolClient): Promise<void>;
  /** Remembers the usage read; throws QuotaExceeded (409 file_storage_bytes) when the files did not fit. */
  enforce(row: FileStorageRow): void;
}

/**
 * The file-storage check of files stored with their event in one statement: the same limits,
 * order and exactness as enforceFileStorageQuota (far from the limits by this process's reading
 * of the last 250 ms, no lock; else the project's quota lock first). Null when
 * QUOTA_ENFORCEMENT is off (the bytes are still counted: fileStorageCountCte).
 *
 * Also null with `countOnly` (the caller's ingest checks are not exact: no quota lock is taken
 * for them) when this process read the usage under SKIP_READ_MAX_AGE_MS ago and it was far from
 * every limit, leaving HEADROOM_REQUESTS uploads of this size and 10 % of the limit: the
 * bytes are then counted without reading the usage's shards again, which is most of the check's
 * cost. As with the ingest checks (ingest-check.ts), the project's processes together would have
 * to upload that headroom within those 100 ms to pass a limit unseen. Where the ingest checks
 * are exact (a small ingest rate, under the project's quota lock), so is this one: it reads.
 */
export function fileStorageCheck(rt: Pick<Runtime, 'config'>, input: FileStorageQuotaInput, opts: { countOnly?: boolean } = {}): FileStorageCheck | null {
  if (!enforcing(rt)) return null;
  const { project, webhook } = input;
  const bytes = Math.max(0, Math.floor(input.bytes));
  const limits = limitsOf(project, webhook);
  if (opts.countOnly && farFromLimits(project, webhook, limits, bytes, SKIP_READ_MAX_AGE_MS, Math.max(HEADROOM_BYTES, HEADROOM_REQUESTS * bytes))) return null;
  return {
    values: { ...fileStorageCountValues({ projectId: project.id, webhookId: webhook?.id ?? null, bytes }), files_limit_project: limits.project, files_limit_webhook: limits.webhook },
    exact: !farFromLimits(project, webhook, limits, bytes),
    lock: (client) => lockQuotaScope(client, `project:${project.id}`),
    enforce(row) {
      const usage = (row.file_usage ?? []).map(Number);
      if (usage.length === 2) rememberReading(project, webhook, { project: usage[0], webhook: usage[1] });
      if (row.files_fit !== false) return;
      const checks: Check[] = [{ quota: 'file_storage_bytes', scope: 'project', limit: limits.project, current: usage[0], delta: bytes }];
      if (limits.webhook !== null) checks.push({ quota: 'file_storage_bytes', scope: 'webhook', limit: limits.webhook, current: usage[1], delta: bytes });
      firstExceeded(checks);
      throw new Error('file storage check: the statement refused files no check refuses');
    },
  };
}

/**
 * File storage bytes (409), for the project and, where overridden, the webhook. Checks and
 * counts `bytes` in the caller's transaction (exact near a limit: see checkedUsage); when the
 * files are deleted, call releaseFileStorage in the deleting transaction.
 */
export async function enforceFileStorageQuota(rt: Runtime, client: pg.PoolClient | null, input: FileStorageQuotaInput): Promise<void> {
  const { project, webhook } = input;
  const bytes = Math.max(0, Math.floor(input.bytes));
  const db: Queryable = client ?? rt.db.pool;
  if (enforcing(rt)) {
    const limits = limitsOf(project, webhook);
    const usage = await checkedUsage(client, db, project, webhook, limits, bytes);
    const checks: Check[] = [{ quota: 'file_storage_bytes', scope: 'project', limit: limits.project, current: usage.project, delta: bytes }];
    if (limits.webhook !== null) checks.push({ quota: 'file_storage_bytes', scope: 'webhook', limit: limits.webhook, current: usage.webhook, delta: bytes });
    firstExceeded(checks);
  }
  await addFileStorage(db, project.id, webhook?.id ?? null, bytes);
}

/** Counts file bytes a caller already checked in this transaction (fileStorageRoom), without checking again. */
export async function countFileStorage(db: Queryable, input: { projectId: string; webhookId: string | null; bytes: number }): Promise<void> {
  await addFileStorage(db, input.projectId, input.webhookId, Math.max(0, Math.floor(input.bytes)));
}

/** Gives back file storage counted by enforceFileStorageQuota (deleted or expired files). */
export async function releaseFileStorage(db: Queryable, input: { projectId: string; webhookId: string | null; bytes: number }): Promise<void> {
  await addFileStorage(db, input.projectId, input.webhookId, -Math.max(0, Math.floor(input.bytes)));
}

/**
 * Bytes of file content that still fit the project's (and, where overridden, the webhook's)
 * file_storage_bytes quota, read in the caller's transaction (under the quota lock when `bytes`,
 * what the caller would like to keep, comes near a limit; Infinity when QUOTA_ENFORCEMENT is
 * off). For channels that keep what fits and metadata only for the rest (email); count what is
 * kept with enforceFileStorageQuota in the same transaction.
 */
export async function fileStorageRoom(rt: Runtime, client: pg.PoolClient, input: Omit<FileStorageQuotaInput, 'bytes'> & { bytes: number }): Promise<number> {
  if (!enforcing(rt)) return Infinity;
  const { project, webhook } = input;
  const limits = limitsOf(project, webhook);
  const usage = await checkedUsage(client, client, project, webhook, limits, Math.max(0, input.bytes));
  let room = limits.project - usage.project;
  if (limits.webhook !== null) room = Math.min(room, limits.webhook - usage.webhook);
  return Math.max(0, room);
}
