import { z } from 'zod';
import { encryptSecret } from '../encryption.ts';
import { InvalidRequest, NotFound } from '../errors.ts';
import type { AlertDispatch, AlertRule } from '../generated/prisma/client.ts';
import { newId } from '../ids.ts';
import { paginate, type Page, type PageRequest } from '../pagination/cursor.ts';
import { requireFeature } from '../projects/gates.ts';
import { getProject } from '../projects/service.ts';
import type { Runtime } from '../runtime.ts';
import { assertStorable, parseInput } from '../validation.ts';
import { getWebhook } from '../webhook-config/get-webhook.ts';
import { generateWebhookSecret } from '../webhook-config/secrets.ts';

type Rt = Pick<Runtime, 'db'>;

export const CONDITION_TYPES = ['failure_rate', 'consecutive_failures', 'dlq_added', 'backlog_depth'] as const;
export type ConditionType = (typeof CONDITION_TYPES)[number];

const conditionSchema = z
  .object({
    type: z.enum(CONDITION_TYPES),
    threshold: z.number().finite().min(0),
    /** The look-back of failure_rate and dlq_added (whole minutes of roll-ups); ignored by the other two. */
    windowSeconds: z.number().int().min(60).max(86_400).default(300),
  })
  .strict()
  .refine((c) => c.type !== 'failure_rate' || c.threshold <= 1, { message: 'a failure_rate threshold is a fraction, 0..1', path: ['threshold'] });

const channelSchema = z.discriminatedUnion('type', [
  z
    .object({ type: z.literal('webhook'), url: z.string().max(2048).url().refine((u) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol), 'must be an http or https URL') })
    .strict(),
  z.object({ type: z.literal('email'), to: z.string().email().max(320) }).strict(),
]);
export type AlertChannel = z.infer<typeof channelSchema>;
const channelsSchema = z.array(channelSchema).min(1).max(10);

export interface AlertRuleInput {
  name?: unknown;
  webhookId?: unknown;
  condition?: unknown;
  channels?: unknown;
  cooldownSeconds?: unknown;
  enabled?: unknown;
}

/** Checks in the contract's order: 404 (the rule), then the tier gate (403). */
async function gate(rt: Rt, projectId: string) {
  requireFeature((await getProject(rt, projectId)).tier, 'operator_alerting');
}

async function validate(rt: Rt, projectId: string, input: AlertRuleInput, create: boolean) {
  const out: Partial<{ name: string; webhookId: string | null; condition: z.infer<typeof conditionSchema>; channels: AlertChannel[]; cooldownSeconds: number; enabled: boolean }> = {};
  if (create && (input.condition === undefined || input.condition === null)) throw new InvalidRequest('condition is required.', 'condition');
  if (create && (input.channels === undefined || input.channels === null)) throw new InvalidRequest('channels is required.', 'channels');
  if (input.name !== undefined && input.name !== null) out.name = parseInput(z.string().trim().max(200), input.name, 'name');
  if (input.webhookId !== undefined) {
    if (input.webhookId === null) out.webhookId = null;
    else {
      if (typeof input.webhookId !== 'string') throw new InvalidRequest('webhookId must be a webhook id or null.', 'webhookId');
      await getWebhook(rt, projectId, input.webhookId).catch(() => {
        throw new InvalidRequest(`No webhook with id ${input.webhookId}.`, 'webhookId');
      });
      out.webhookId = input.webhookId;
    }
  }
  if (input.condition !== undefined && input.condition !== null) out.condition = parseInput(conditionSchema, input.condition, 'condition');
  if (input.channels !== undefined && input.channels !== null) out.channels = parseInput(channelsSchema, input.channels, 'channels');
  if (input.cooldownSeconds !== undefined && input.cooldownSeconds !== null) out.cooldownSeconds = parseInput(z.number().int().min(0).max(30 * 86_400), input.cooldownSeconds, 'cooldownSeconds');
  if (input.enabled !== undefined && input.enabled !== null) {
    if (typeof input.enabled !== 'boolean') throw new InvalidRequest('enabled must be true or false.', 'enabled');
    out.enabled = input.enabled;
  }
  assertStorable({ name: out.name, channels: out.channels }, '');
  return out;
}

export async function getAlertRule(rt: Rt, projectId: string, ruleId: string): Promise<AlertRule> {
  const rule = await rt.db.prisma.alertRule.findFirst({ where: { id: ruleId, projectId } });
  if (!rule) throw new NotFound('alert rule', ruleId);
  await gate(rt, projectId);
  return rule;
}

export async function listAlertRules(rt: Rt, projectId: string, page: PageRequest): Promise<Page<AlertRule>> {
  await gate(rt, projectId);
  return paginate(page, {
    scope: `alert-rules:${projectId}`,
    filters: {},
    order: 'asc',
    fetch: (range, order, take) => rt.db.prisma.alertRule.findMany({ where: { projectId, id: range }, orderBy: { id: order }, take }),
  });
}

/** Creates a rule; its signingSecret (for its webhook channels) is answered here only. */
export async function createAlertRule(rt: Rt, projectId: string, input: AlertRuleInput): Promise<AlertRule & { signingSecret: string }> {
  await gate(rt, projectId);
  const v = await validate(rt, projectId, input, true);
  const secret = generateWebhookSecret();
  const rule = await rt.db.prisma.alertRule.create({
    data: {
      id: newId('alr'),
      projectId,
      name: v.name ?? '',
      webhookId: v.webhookId ?? null,
      conditionType: v.condition!.type,
      threshold: v.condition!.threshold,
      windowSeconds: v.condition!.windowSeconds,
      channels: v.channels!,
      cooldownSeconds: v.cooldownSeconds ?? 3600,
      enabled: v.enabled ?? true,
      secretEnc: encryptSecret(secret),
    },
  });
  return { ...rule, signingSecret: secret };
}

export async function updateAlertRule(rt: Rt, projectId: string, ruleId: string, input: AlertRuleInput): Promise<AlertRule> {
  await getAlertRule(rt, projectId, ruleId);
  const v = await validate(rt, projectId, input, false);
  return rt.db.prisma.alertRule.update({
    where: { id: ruleId },
    data: {
      ...(v.name !== undefined ? { name: v.name } : {}),
      ...(v.webhookId !== undefined ? { webhookId: v.webhookId } : {}),
      ...(v.condition ? { conditionType: v.condition.type, threshold: v.condition.threshold, windowSeconds: v.condition.windowSeconds } : {}),
      ...(v.channels ? { channels: v.channels } : {}),
      ...(v.cooldownSeconds !== undefined ? { cooldownSeconds: v.cooldownSeconds } : {}),
      ...(v.enabled !== undefined ? { enabled: v.enabled } : {}),
    },
  });
}

export async function deleteAlertRule(rt: Rt, projectId: string, ruleId: string) {
  await getAlertRule(rt, projectId, ruleId);
  await rt.db.prisma.alertRule.delete({ where: { id: ruleId } });
  return { id: ruleId, deleted: true };
}

export async function listAlertDispatches(rt: Rt, projectId: string, filter: { ruleId?: string | null; state?: string | null }, page: PageRequest): Promise<Page<AlertDispatch>> {
  await gate(rt, projectId);
  if (filter.state != null && filter.state !== 'firing' && filter.state !== 'resolved') throw new InvalidRequest('state must be firing or resolved.', 'state');
  const filters = { ruleId: filter.ruleId ?? null, state: filter.state ?? null };
  // Newest first: ids are ULIDs.
  return paginate(page, {
    scope: `alert-dispatches:${projectId}`,
    filters,
    order: 'desc',
    fetch: (range, order, take) =>
      rt.db.prisma.alertDispatch.findMany({
        where: { projectId, ...(filters.ruleId ? { ruleId: filters.ruleId } : {}), ...(filters.state ? { state: filters.state } : {}), id: range },
        orderBy: { id: order },
        take,
      }),
  });
}
