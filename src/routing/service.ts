import type { Prisma } from '../generated/prisma/client.ts';
import type { Runtime } from '../runtime.ts';
import { getWebhook } from '../webhook-config/get-webhook.ts';
import { validateRules, type RoutingRule } from './rules.ts';
import { ingestTargetsChanged } from '../db/local-changes.ts';

type Rt = Pick<Runtime, 'db'>;

export async function getRouting(rt: Rt, projectId: string, webhookId: string): Promise<{ rules: RoutingRule[] }> {
  const webhook = await getWebhook(rt, projectId, webhookId);
  return { rules: (webhook.routing as unknown as RoutingRule[]) ?? [] };
}

/** Replaces the webhook's rules as a whole; an empty list routes everything to the default destination. */
export async function setRouting(rt: Rt, projectId: string, webhookId: string, rawRules: unknown): Promise<{ rules: RoutingRule[] }> {
  await getWebhook(rt, projectId, webhookId);
  const set = await rt.db.prisma.$transaction(async (tx) => {
    // Holding the destinations while the rules are written keeps a concurrent delete from leaving a rule dangling.
    const destinations = await tx.$queryRaw<{ id: string }[]>`SELECT id FROM destinations WHERE webhook_id = ${webhookId} FOR SHARE`;
    const rules = validateRules(rawRules ?? [], new Set(destinations.map((d) => d.id)));
    await tx.webhook.update({ where: { id: webhookId }, data: { routing: rules as unknown as Prisma.InputJsonValue } });
    return { rules };
  });
  ingestTargetsChanged(rt, { webhookId });
  return set;
}
