import { InvalidRequest, NotFound } from '../errors.ts';
import { paginate, type PageRequest } from '../pagination/cursor.ts';
import type { Runtime } from '../runtime.ts';

type Rt = Pick<Runtime, 'db'>;

const STATUSES = ['queued', 'scheduled', 'delivering', 'retrying', 'succeeded', 'failed', 'cancelled'];

export interface DeliveryFilters {
  webhookId?: string | null;
  status?: string | null;
  eventId?: string | null;
  /** The producer's idempotency key (CONTRACT §12). */
  idempotencyKey?: string | null;
  from?: string | null;
  to?: string | null;
}

export function parseTime(value: string | null | undefined, param: string): Date | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const d = /^\d+$/.test(value) ? new Date(Number(value) * 1000) : new Date(value);
  if (Number.isNaN(d.getTime())) throw new InvalidRequest(`${param} must be an ISO 8601 timestamp or Unix seconds.`, param);
  return d;
}

/** Prisma `where` for a delivery filter set, always scoped to the project. */
export function deliveryWhere(projectId: string, f: DeliveryFilters) {
  if (f.status && !STATUSES.includes(f.status)) throw new InvalidRequest(`status must be one of ${STATUSES.join(', ')}.`, 'status');
  const from = parseTime(f.from, 'from');
  const to = parseTime(f.to, 'to');
  return {
    projectId,
    ...(f.webhookId ? { webhookId: f.webhookId } : {}),
    ...(f.status ? { status: f.status } : {}),
    ...(f.eventId ? { eventId: f.eventId } : {}),
    ...(f.idempotencyKey ? { idempotencyKey: f.idempotencyKey } : {}),
    ...(from || to ? { createdAt: { ...(from ? { gte: from } : {}), ...(to ? { lt: to } : {}) } } : {}),
  };
}

export async function listDeliveries(rt: Rt, projectId: string, filters: DeliveryFilters, page: PageRequest) {
  const where = deliveryWhere(projectId, filters);
  const canonical = { webhookId: filters.webhookId ?? null, status: filters.status ?? null, eventId: filters.eventId ?? null, ...(filters.idempotencyKey ? { idempotencyKey: filters.idempotencyKey } : {}), from: filters.from ?? null, to: filters.to ?? null };
  return paginate(page, {
    scope: `deliveries:${projectId}`,
    filters: canonical,
    order: 'desc',
    fetch: (range, order, take) => rt.db.prisma.delivery.findMany({ where: { ...where, id: range }, orderBy: { id: order }, take }),
  });
}

export async function listWebhookDeliveries(rt: Rt, projectId: string, webhookId: string, filters: Omit<DeliveryFilters, 'webhookId'>, page: PageRequest) {
  const webhook = await rt.db.prisma.webhook.findFirst({ where: { id: webhookId, projectId }, select: { id: true } });
  if (!webhook) throw new NotFound('webhook', webhookId);
  return listDeliveries(rt, projectId, { ...filters, webhookId }, page);
}

export async function getDelivery(rt: Rt, projectId: string, deliveryId: string) {
  const d = await rt.db.prisma.delivery.findFirst({ where: { id: deliveryId, projectId } });
  if (!d) throw new NotFound('delivery', deliveryId);
  return d;
}

export async function listDeliveryAttempts(rt: Rt, projectId: string, deliveryId: string, page: PageRequest) {
  await getDelivery(rt, projectId, deliveryId);
  return paginate(page, {
    scope: `attempts:${deliveryId}`,
    filters: {},
    order: 'asc',
    fetch: (range, order, take) => rt.db.prisma.deliveryAttempt.findMany({ where: { deliveryId, number: range }, orderBy: { number: order }, take }),
    positionOf: (a) => String(a.number),
    keyOf: Number,
  });
}
