import type pg from 'pg';
import type { Runtime } from '../../runtime.ts';
import { counterSum, enforcing, firstExceeded, lockQuotaScope, projectQuotas, webhookOverrides, webhookQuotas, type Check, type ProjectQuotaSource, type Queryable, type WebhookQuotaSource } from './limits.ts';

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

/** A check is "near" its limit when, after this request, less than this share of it (or these bytes) would be left. */
const HEADROOM_SHARE = 0.1;
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

const near = (limit: number | null, current: number, bytes: number) => limit !== null && current + bytes + Math.max(limit * HEADROOM_SHARE, HEADROOM_BYTES) > limit;

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
  return usage;
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
