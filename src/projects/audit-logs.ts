import { paginate, type PageRequest } from '../pagination/cursor.ts';
import type { Runtime } from '../runtime.ts';
import { requireFeature } from './gates.ts';
import { getProject } from './service.ts';

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
  return paginate(req, {
    scope: `audit-logs:${projectId}`,
    filters,
    order: 'desc',
    fetch: (range, order, take) =>
      rt.db.prisma.auditLog.findMany({
        where: {
          projectId,
          id: range,
          ...(filters.action ? { action: filters.action } : {}),
          ...(filters.targetType ? { targetType: filters.targetType } : {}),
          ...(filters.targetId ? { targetId: filters.targetId } : {}),
        },
        orderBy: { id: order },
        take,
      }),
  });
}
