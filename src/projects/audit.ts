import type pg from 'pg';
import type { PrismaClient } from '../generated/prisma/client.ts';
import { newId } from '../ids.ts';

/**
 * Audit log: one row per management write, written in the same transaction as the write when the
 * caller has one. `actor` is the API key id of the caller, or `admin` for the operator CLI.
 * `action` is `<target type>.<verb>`, e.g. `api_key.created`, `project.updated`,
 * `webhook.quota_overrides_updated`, `webhook.signing_secret_rotated`, `delivery.replayed`.
 */
export interface AuditEntry {
  projectId: string;
  actor: string;
  action: string;
  targetType: string;
  targetId?: string | null;
  /** What changed; never secrets. */
  data?: Record<string, unknown>;
}

export const ADMIN_ACTOR = 'admin';

type PrismaLike = Pick<PrismaClient, 'auditLog'>;
type SqlLike = pg.PoolClient | pg.Pool | pg.Client;

/** Writes one audit row with a Prisma client (or interactive transaction) or a pg client. */
export async function recordAudit(db: PrismaLike | SqlLike, entry: AuditEntry): Promise<void> {
  const id = newId('aud');
  const data = entry.data ?? {};
  if ('auditLog' in db) {
    await db.auditLog.create({
      data: { id, projectId: entry.projectId, actor: entry.actor, action: entry.action, targetType: entry.targetType, targetId: entry.targetId ?? null, data: data as object },
    });
    return;
  }
  await db.query(
    `INSERT INTO audit_logs (id, project_id, actor, action, target_type, target_id, data) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [id, entry.projectId, entry.actor, entry.action, entry.targetType, entry.targetId ?? null, JSON.stringify(data)],
  );
}
