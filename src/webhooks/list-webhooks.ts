import { InvalidRequest } from '../errors.ts';
import { paginate, type PageRequest } from '../pagination/cursor.ts';
import type { Runtime } from '../runtime.ts';

type Rt = Pick<Runtime, 'db'>;

const STATUSES = ['active', 'paused', 'archived'];

/** Newest first; the cursor is bound to the project and the status filter. */
export async function listWebhooks(rt: Rt, projectId: string, req: PageRequest & { status?: string | null }) {
  const status = req.status ?? null;
  if (status !== null && !STATUSES.includes(status)) throw new InvalidRequest(`status must be one of ${STATUSES.join(', ')}.`, 'status');
  return paginate(req, {
    scope: `webhooks:${projectId}`,
    filters: { status },
    order: 'desc',
    fetch: (range, order, take) => rt.db.prisma.webhook.findMany({ where: { projectId, ...(status ? { status } : {}), id: range }, orderBy: { id: order }, take }),
  });
}
