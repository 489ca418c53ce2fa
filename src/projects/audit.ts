import type pg from 'pg';
import type { PrismaClient } from '../generated/prisma/client.ts';
import { newId } from '../ids.ts';
import { paginate, type PageRequest } from '../pagination/cursor.ts';
import type { Runtime } from '../runtime.ts';
import { requireFeature } from './gates.ts';
import { getProject } from './service.ts';

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

export interface AuditLogFilters {
  action?: string | null;
  targetType?: string | null;
  targetId?: string | null;
}

/** Newest first, cursor-paginated; Business tier and above (403 below). */
export async function listAuditLogs(rt: Pick<Runtime, 'db'>, projectId: string, req: PageRequest & AuditLogFilters) {
  const project = await getProject(rt, projectId);
  requireFeature(project.tier, 'audit_log_api');
  const filters = { action: req.action ?? null, targetType: req.targetType ?? null, targetId: req.targetId ?? null };
  return paginate(req, `audit-logs:${projectId}`, filters, (after, take) =>
    rt.db.prisma.auditLog.findMany({
      where: {
        projectId,
        ...(after ? { id: { lt: after } } : {}),
        ...(filters.action ? { action: filters.action } : {}),
        ...(filters.targetType ? { targetType: filters.targetType } : {}),
        ...(filters.targetId ? { targetId: filters.targetId } : {}),
      },
      orderBy: { id: 'desc' },
      take,
    }),
  );
}
