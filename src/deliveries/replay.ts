import type pg from 'pg';
import { inTransaction } from '../db/client.ts';
import { InvalidRequest, InvalidState, NotFound, PayloadGone, QuotaExceeded } from '../errors.ts';
import { newId } from '../ids.ts';
import { paginate, type PageRequest } from '../pagination/cursor.ts';
import { requireFeature } from '../projects/gates.ts';
import { enforceReplayQuota } from '../projects/quotas/replay.ts';
import { getProject } from '../projects/service.ts';
import type { Runtime } from '../runtime.ts';
import { insertDelivery } from './enqueue.ts';
import type { Prisma } from '../generated/prisma/client.ts';
import { deliveryWhere, parseTime, type DeliveryFilters } from './delivery-reads.ts';

type Rt = Pick<Runtime, 'db'>;
export const BULK_REPLAY_TASK = 'replays__run';

export interface DlqFilters {
  webhookId?: string | null;
  from?: string | null;
  to?: string | null;
  /** pending (default): not yet re-driven; redriven; all. */
  state?: string | null;
}

/**
 * A new delivery that re-sends a source delivery's dispatch snapshot to the snapshot
 * destination, byte for byte, with the same event id (so the same `webhook-id`).
 * Runs inside the caller's transaction. PayloadGone when the retained bytes are gone.
 */
async function replayInto(rt: Rt, client: pg.PoolClient, sourceId: string, replayJobId: string): Promise<string> {
  const { rows } = await client.query(
    `SELECT d.id, d.project_id, d.webhook_id, d.event_id, d.destination_id, d.destination, d.dispatch_body, d.dispatch_content_type,
            d.dispatch_headers, d.dispatch_purged_at IS NOT NULL AS dispatch_purged, d.automation_id, d.automation_version, e.body IS NOT NULL AS has_event_body, e.content_type,
            p.tier, p.custom_quotas, p.overage_enabled, w.quota_overrides
       FROM deliveries d JOIN events e ON e.id = d.event_id JOIN projects p ON p.id = d.project_id JOIN webhooks w ON w.id = d.webhook_id
      WHERE d.id = $1`,
    [sourceId],
  );
  const s = rows[0];
  if (!s) throw new NotFound('delivery', sourceId);
  // Payload retention removed the snapshot (and, as old, the event's body): nothing to re-send byte for byte.
  if (s.dispatch_purged || (!s.dispatch_body && !s.has_event_body)) throw new PayloadGone();
  // Replay volume (24 h), monthly deliveries and backlog depth, counted in this transaction.
  await enforceReplayQuota(rt as Runtime, client, {
    project: { id: s.project_id, tier: s.tier, customQuotas: s.custom_quotas, overageEnabled: s.overage_enabled },
    webhook: { id: s.webhook_id, quotaOverrides: s.quota_overrides },
    count: 1,
  });
  const { id } = await insertDelivery(client, {
    projectId: s.project_id,
    webhookId: s.webhook_id,
    eventId: s.event_id,
    destinationId: s.destination_id,
    destination: s.destination,
    replayOfId: s.id,
    replayJobId,
    dispatch: s.dispatch_body || s.dispatch_headers
      ? { body: s.dispatch_body ?? null, contentType: s.dispatch_content_type ?? s.content_type, headers: s.dispatch_headers ?? (s.content_type ? { 'content-type': s.content_type } : {}) }
      : null,
  });
  // The snapshot an Automation produced is re-sent as is (no code runs): the replay records the version that made it.
  if (s.dispatch_body && s.automation_id) {
    await client.query('UPDATE deliveries SET automation_id = $2, automation_version = $3 WHERE id = $1', [id, s.automation_id, s.automation_version]);
  }
  return id;
}

async function insertReplayJob(client: pg.PoolClient, job: { id: string; projectId: string; kind: string; sourceDeliveryId?: string | null; filter?: unknown; status: string; total: number; created: number }) {
  await client.query(
    `INSERT INTO replay_jobs (id, project_id, kind, source_delivery_id, filter, status, total, created, completed_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, CASE WHEN $6 = 'completed' THEN now() ELSE NULL END)`,
    [job.id, job.projectId, job.kind, job.sourceDeliveryId ?? null, job.filter === undefined ? null : JSON.stringify(job.filter), job.status, job.total, job.created],
  );
}

/**
 * Whether a DLQ entry was re-driven, its row locked until the transaction ends: two concurrent
 * re-drives of one entry must not both send. By its primary key (delivery_id, id): one partition.
 */
async function redrivenAlready(client: pg.PoolClient, deliveryId: string, entryId: string): Promise<boolean> {
  const { rows } = await client.query('SELECT redriven_at FROM dlq_entries WHERE delivery_id = $1 AND id = $2 FOR UPDATE', [deliveryId, entryId]);
  return !!rows[0]?.redriven_at;
}

async function markRedriven(client: pg.PoolClient, deliveryId: string, entryId: string, redriveDeliveryId: string) {
  await client.query('UPDATE dlq_entries SET redriven_at = now(), redrive_delivery_id = $3 WHERE delivery_id = $1 AND id = $2', [deliveryId, entryId, redriveDeliveryId]);
}

export async function replayDelivery(rt: Rt, projectId: string, deliveryId: string) {
  const source = await rt.db.prisma.delivery.findFirst({ where: { id: deliveryId, projectId }, select: { id: true } });
  if (!source) throw new NotFound('delivery', deliveryId);
  const jobId = newId('rpl');
  await inTransaction(rt.db.pool, async (client) => {
    const newDeliveryId = await replayInto(rt, client, deliveryId, jobId);
    await insertReplayJob(client, { id: jobId, projectId, kind: 'single', sourceDeliveryId: deliveryId, filter: { deliveryIds: [newDeliveryId] }, status: 'completed', total: 1, created: 1 });
  });
  return getReplayJob(rt, projectId, jobId);
}

export async function redriveDlqEntry(rt: Rt, projectId: string, entryId: string) {
  const entry = await rt.db.prisma.dlqEntry.findFirst({ where: { id: entryId, projectId } });
  if (!entry) throw new NotFound('DLQ entry', entryId);
  const jobId = newId('rpl');
  await inTransaction(rt.db.pool, async (client) => {
    // Re-check under a row lock: two concurrent re-drives of one entry must not both send.
    if (await redrivenAlready(client, entry.deliveryId, entryId)) throw new InvalidState('This DLQ entry has already been re-driven.');
    const newDeliveryId = await replayInto(rt, client, entry.deliveryId, jobId);
    await markRedriven(client, entry.deliveryId, entryId, newDeliveryId);
    await insertReplayJob(client, { id: jobId, projectId, kind: 'redrive', sourceDeliveryId: entry.deliveryId, filter: { dlqEntryId: entryId, deliveryIds: [newDeliveryId] }, status: 'completed', total: 1, created: 1 });
  });
  return getReplayJob(rt, projectId, jobId);
}

export async function getReplayJob(rt: Rt, projectId: string, id: string) {
  const job = await rt.db.prisma.replayJob.findFirst({ where: { id, projectId } });
  if (!job) throw new NotFound('replay job', id);
  return job;
}

export async function listReplayJobsOfDelivery(rt: Rt, projectId: string, deliveryId: string, page: PageRequest) {
  const source = await rt.db.prisma.delivery.findFirst({ where: { id: deliveryId, projectId }, select: { id: true } });
  if (!source) throw new NotFound('delivery', deliveryId);
  return paginate(page, {
    scope: `replay-jobs:${deliveryId}`,
    filters: {},
    order: 'desc',
    fetch: (range, order, take) => rt.db.prisma.replayJob.findMany({ where: { projectId, sourceDeliveryId: deliveryId, id: range }, orderBy: { id: order }, take }),
  });
}

function dlqWhere(projectId: string, f: DlqFilters) {
  const from = parseTime(f.from, 'from');
  const to = parseTime(f.to, 'to');
  const state = f.state ?? 'pending';
  if (!['pending', 'redriven', 'all'].includes(state)) throw new InvalidRequest('state must be pending, redriven or all.', 'state');
  return {
    projectId,
    ...(f.webhookId ? { webhookId: f.webhookId } : {}),
    ...(state === 'pending' ? { redrivenAt: null } : state === 'redriven' ? { redrivenAt: { not: null } } : {}),
    ...(from || to ? { createdAt: { ...(from ? { gte: from } : {}), ...(to ? { lt: to } : {}) } } : {}),
  };
}

const dlqScope = (f: DlqFilters) => ({ webhookId: f.webhookId ?? null, from: f.from ?? null, to: f.to ?? null, state: f.state ?? 'pending' });

export async function listDlq(rt: Rt, projectId: string, filters: DlqFilters, page: PageRequest) {
  const where = dlqWhere(projectId, filters);
  return paginate(page, {
    scope: `dlq:${projectId}`,
    filters: dlqScope(filters),
    order: 'desc',
    fetch: (range, order, take) => rt.db.prisma.dlqEntry.findMany({ where: { ...where, id: range }, orderBy: { id: order }, take }),
  });
}

/** Payloads make export rows large: smaller pages than other lists. */
export const DLQ_EXPORT_PAGE_SIZE = { def: 20, max: 20 };

/** DLQ rows with their retained payloads (base64), 20 rows a page at most. */
export async function exportDlq(rt: Rt, projectId: string, filters: DlqFilters, page: PageRequest) {
  const where = dlqWhere(projectId, filters);
  const result = await paginate(page, {
    scope: `dlq-export:${projectId}`,
    filters: dlqScope(filters),
    order: 'desc',
    fetch: (range, order, take) => rt.db.prisma.dlqEntry.findMany({ where: { ...where, id: range }, orderBy: { id: order }, take }),
    limits: DLQ_EXPORT_PAGE_SIZE,
  });
  const ids = result.items.map((e) => e.deliveryId);
  const deliveries = await rt.db.prisma.delivery.findMany({
    where: { id: { in: ids } },
    select: { id: true, eventId: true, status: true, attempts: true, lastAttempt: true, dispatchBody: true, dispatchContentType: true, event: { select: { body: true, contentType: true, sourceBody: true, sourceContentType: true } } },
  });
  const byId = new Map(deliveries.map((d) => [d.id, d]));
  return {
    ...result,
    items: result.items.map((e) => {
      const d = byId.get(e.deliveryId);
      const body = d?.dispatchBody ?? d?.event.body ?? null;
      return {
        id: e.id,
        deliveryId: e.deliveryId,
        webhookId: e.webhookId,
        eventId: d?.eventId ?? null,
        reason: e.reason,
        attempts: d?.attempts ?? 0,
        lastAttempt: d?.lastAttempt ?? null,
        createdAt: e.createdAt,
        redrivenAt: e.redrivenAt,
        contentType: d?.dispatchContentType ?? d?.event.contentType ?? null,
        payloadBase64: body ? Buffer.from(body).toString('base64') : null,
        sourceContentType: d?.event.sourceBody ? d.event.sourceContentType : null,
        sourceBase64: d?.event.sourceBody ? Buffer.from(d.event.sourceBody).toString('base64') : null,
      };
    }),
  };
}

/** Bulk replay (Starter+): a job that replays every delivery matching the filter. */
export async function createBulkReplay(rt: Runtime, projectId: string, filters: DeliveryFilters) {
  const project = await getProject(rt, projectId);
  requireFeature(project.tier, 'bulk_replay');
  const where = deliveryWhere(projectId, filters);
  const total = await rt.db.prisma.delivery.count({ where });
  const id = newId('rpl');
  await inTransaction(rt.db.pool, async (client) => {
    await insertReplayJob(client, { id, projectId, kind: 'bulk', filter: filters, status: 'queued', total, created: 0 });
    await client.query(`SELECT graphile_worker.add_job($1, json_build_object('replayJobId', $2::text), max_attempts := 5)`, [BULK_REPLAY_TASK, id]);
  });
  return getReplayJob(rt, projectId, id);
}

/** Bulk DLQ re-drive (Starter+): a job that re-drives every pending DLQ entry matching the filter. */
export async function createBulkRedrive(rt: Runtime, projectId: string, filters: DlqFilters) {
  const project = await getProject(rt, projectId);
  requireFeature(project.tier, 'bulk_replay');
  const where = dlqWhere(projectId, { ...filters, state: 'pending' });
  const total = await rt.db.prisma.dlqEntry.count({ where });
  const id = newId('rpl');
  await inTransaction(rt.db.pool, async (client) => {
    await insertReplayJob(client, { id, projectId, kind: 'bulk_redrive', filter: { ...filters, state: 'pending' }, status: 'queued', total, created: 0 });
    await client.query(`SELECT graphile_worker.add_job($1, json_build_object('replayJobId', $2::text), max_attempts := 5)`, [BULK_REPLAY_TASK, id]);
  });
  return getReplayJob(rt, projectId, id);
}

/** The bulk job's work, in pages; safe to run again after a crash (already-replayed sources are skipped). */
export async function runBulkReplay(rt: Rt, replayJobId: string) {
  const job = await rt.db.prisma.replayJob.findUnique({ where: { id: replayJobId } });
  if (!job || job.status === 'completed') return;
  await rt.db.prisma.replayJob.update({ where: { id: job.id }, data: { status: 'running' } });
  const filter = (job.filter ?? {}) as DeliveryFilters & Record<string, unknown>;
  let created = 0;
  let skipped = 0;
  let after: string | undefined;
  for (let page = 0; page < 10_000; page++) {
    const sources: { sourceId: string; dlqId?: string; pos: string }[] =
      job.kind === 'bulk_redrive'
        ? (
            await rt.db.prisma.dlqEntry.findMany({
              where: { ...dlqWhere(job.projectId, filter), ...(after ? { id: { gt: after } } : {}) },
              orderBy: { id: 'asc' },
              take: 200,
            })
          ).map((e) => ({ sourceId: e.deliveryId, dlqId: e.id, pos: e.id }))
        : (
            await rt.db.prisma.delivery.findMany({
              // Only deliveries that existed when the job was created: its own replays must not feed it.
              where: { AND: [deliveryWhere(job.projectId, filter), { createdAt: { lte: job.createdAt } }, ...(after ? [{ id: { gt: after } }] : [])] },
              orderBy: { id: 'asc' },
              take: 200,
              select: { id: true },
            })
          ).map((d) => ({ sourceId: d.id, pos: d.id }));
    if (sources.length === 0) break;
    for (const s of sources) {
      try {
        await inTransaction(rt.db.pool, async (client) => {
          if (s.dlqId) {
            if (await redrivenAlready(client, s.sourceId, s.dlqId)) throw new InvalidState('already re-driven');
          } else {
            const { rows } = await client.query('SELECT 1 FROM deliveries WHERE replay_of_id = $1 AND replay_job_id = $2 LIMIT 1', [s.sourceId, job.id]);
            if (rows.length) throw new InvalidState('already replayed by this job');
          }
          const replayId = await replayInto(rt, client, s.sourceId, job.id);
          if (s.dlqId) await markRedriven(client, s.sourceId, s.dlqId, replayId);
        });
        created++;
      } catch (err) {
        if (err instanceof PayloadGone || err instanceof InvalidState) skipped++;
        else if (err instanceof QuotaExceeded) {
          // Out of replay quota: stop here; what was replayed stays replayed.
          await rt.db.prisma.replayJob.update({
            where: { id: job.id },
            data: { status: 'stopped', created, completedAt: new Date(), filter: { ...filter, skipped, stoppedBy: err.toBody().error } as Prisma.InputJsonValue },
          });
          return;
        } else throw err;
      }
    }
    after = sources[sources.length - 1].pos;
    await rt.db.prisma.replayJob.update({ where: { id: job.id }, data: { created } });
  }
  await rt.db.prisma.replayJob.update({
    where: { id: job.id },
    data: { status: 'completed', created, completedAt: new Date(), filter: { ...filter, skipped } },
  });
}
