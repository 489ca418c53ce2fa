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

/**
 * Bytes of file content that still fit the project's (and, where overridden, the webhook's)
 * file_storage_bytes quota, read under the quota lock in the caller's transaction (Infinity when
 * QUOTA_ENFORCEMENT is off). For channels that keep what fits and metadata only for the rest
 * (email); count what is kept with enforceFileStorageQuota in the same transaction.
 */
export async function fileStorageRoom(rt: Runtime, client: pg.PoolClient, input: Omit<FileStorageQuotaInput, 'bytes'>): Promise<number> {
  if (!enforcing(rt)) return Infinity;
  const { project, webhook } = input;
  await lockQuotaScope(client, `project:${project.id}`);
  const { rows } = await client.query({
    name: 'file_storage_usage',
    text: `SELECT ${counterSum(`project_id = $1 AND webhook_id = '' AND metric = 'file_storage_bytes' AND period = 'current'`)} AS project_bytes,
                  ${counterSum(`project_id = $1 AND webhook_id = $2 AND metric = 'file_storage_bytes' AND period = 'current'`)} AS webhook_bytes`,
    values: [project.id, webhook?.id ?? ''],
  });
  let room = projectQuotas(project).file_storage_bytes - Number(rows[0].project_bytes);
  if (webhook && webhookOverrides(webhook).file_storage_bytes !== undefined) room = Math.min(room, webhookQuotas(project, webhook).file_storage_bytes - Number(rows[0].webhook_bytes));
  return Math.max(0, room);
}
