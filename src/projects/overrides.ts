import { InvalidRequest, NotFound } from '../errors.ts';
import type { Runtime } from '../runtime.ts';
import { ADMIN_ACTOR, recordAudit } from './audit.ts';
import { OVERRIDABLE_QUOTAS, projectQuotas, webhookOverrides, webhookQuotas, type OverridableQuota, type QuotaOverrides } from './quotas/limits.ts';
import { getProject } from './service.ts';
import type { TierQuotas } from './tiers.ts';
import { ingestTargetsChanged } from '../db/local-changes.ts';

type Rt = Pick<Runtime, 'db'>;

export interface WebhookQuotaView {
  webhookId: string;
  /** What the webhook sets; a quota left out follows the project. */
  quotaOverrides: QuotaOverrides;
  /** The limits that apply to the webhook: the project's, tightened by the overrides. */
  effectiveQuotas: TierQuotas;
}

async function findWebhook(rt: Rt, projectId: string, webhookId: string) {
  const webhook = await rt.db.prisma.webhook.findFirst({ where: { id: webhookId, projectId }, select: { id: true, quotaOverrides: true } });
  if (!webhook) throw new NotFound('webhook', webhookId);
  return webhook;
}

export async function getWebhookQuotaOverrides(rt: Rt, projectId: string, webhookId: string): Promise<WebhookQuotaView> {
  const webhook = await findWebhook(rt, projectId, webhookId);
  const project = await getProject(rt, projectId);
  return { webhookId: webhook.id, quotaOverrides: webhookOverrides(webhook), effectiveQuotas: webhookQuotas(project, webhook) };
}

/**
 * Merges `changes` into the webhook's overrides: a number sets one, null removes it, a quota left
 * out keeps its value. An override may only tighten: a value above the project's effective limit
 * is 400 (param: the quota), as is anything but a non-negative integer.
 */
export async function setWebhookQuotaOverrides(
  rt: Rt,
  projectId: string,
  webhookId: string,
  changes: Partial<Record<string, number | null | undefined>>,
  actor = ADMIN_ACTOR,
): Promise<WebhookQuotaView> {
  const webhook = await findWebhook(rt, projectId, webhookId);
  const project = await getProject(rt, projectId);
  const limits = projectQuotas(project);
  const next: QuotaOverrides = { ...webhookOverrides(webhook) };
  const applied: Record<string, number | null> = {};
  for (const [key, value] of Object.entries(changes)) {
    if (value === undefined) continue;
    if (!(OVERRIDABLE_QUOTAS as readonly string[]).includes(key)) {
      throw new InvalidRequest(`${key} cannot be overridden per webhook; one of ${OVERRIDABLE_QUOTAS.join(', ')}.`, key);
    }
    const quota = key as OverridableQuota;
    if (value === null) {
      delete next[quota];
    } else {
      if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) throw new InvalidRequest(`${quota} must be a non-negative integer.`, quota);
      if (value > limits[quota]) {
        throw new InvalidRequest(`${quota} overrides may only tighten the project's limit of ${limits[quota]}.`, quota);
      }
      next[quota] = value;
    }
    applied[quota] = value;
  }
  if (Object.keys(applied).length > 0) {
    await rt.db.prisma.$transaction(async (tx) => {
      await tx.webhook.update({ where: { id: webhook.id }, data: { quotaOverrides: next } });
      await recordAudit(tx, { projectId, actor, action: 'webhook.quota_overrides_updated', targetType: 'webhook', targetId: webhook.id, data: applied });
    });
    ingestTargetsChanged(rt, { webhookId: webhook.id });
  }
  return { webhookId: webhook.id, quotaOverrides: next, effectiveQuotas: webhookQuotas(project, { quotaOverrides: next }) };
}
