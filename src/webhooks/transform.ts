import { InvalidRequest } from '../errors.ts';
import { Prisma } from '../generated/prisma/client.ts';
import { requireFeature } from '../projects/gates.ts';
import { getProject } from '../projects/service.ts';
import type { Runtime } from '../runtime.ts';
import { resolvePinnedVersion } from '../automations/service.ts';
import { jsonataTransform, viewTransform, type TransformView } from '../webhook-config/transform.ts';
import { getWebhook } from '../webhook-config/get-webhook.ts';

type Rt = Pick<Runtime, 'db' | 'config'>;

export async function getTransform(rt: Rt, projectId: string, webhookId: string): Promise<TransformView> {
  return viewTransform((await getWebhook(rt, projectId, webhookId)).transform);
}

export interface TransformInput {
  kind?: string | null;
  expression?: string | null;
  automationId?: string | null;
  version?: number | null;
}

/**
 * `{kind:"jsonata", expression}` sets a classic transform; `{kind:"automation", automationId,
 * version?}` pins an Automation version (latest when left out); both Starter and above.
 * `{kind:null}` removes it.
 */
export async function setTransform(rt: Rt, projectId: string, webhookId: string, input: TransformInput): Promise<TransformView> {
  await getWebhook(rt, projectId, webhookId);
  const { tier } = await getProject(rt, projectId);
  if (input.kind === undefined) throw new InvalidRequest('kind is required: "jsonata", "automation", or null to remove the transform.', 'kind');
  if (input.kind === null) {
    for (const f of ['expression', 'automationId', 'version'] as const) {
      if (input[f] !== undefined && input[f] !== null) throw new InvalidRequest(`${f} is not taken when kind is null.`, f);
    }
    await rt.db.prisma.webhook.update({ where: { id: webhookId }, data: { transform: Prisma.DbNull } });
    return viewTransform(null);
  }
  if (input.kind === 'automation') {
    requireFeature(tier, 'automations');
    if (input.expression !== undefined && input.expression !== null) throw new InvalidRequest('expression is only taken with kind "jsonata".', 'expression');
    const pinned = await resolvePinnedVersion(rt, projectId, input.automationId, input.version);
    const transform = { kind: 'automation' as const, ...pinned };
    await rt.db.prisma.webhook.update({ where: { id: webhookId }, data: { transform } });
    return viewTransform(transform);
  }
  if (input.kind !== 'jsonata') throw new InvalidRequest('kind must be "jsonata", "automation" or null.', 'kind');
  requireFeature(tier, 'classic_transforms');
  for (const f of ['automationId', 'version'] as const) {
    if (input[f] !== undefined && input[f] !== null) throw new InvalidRequest(`${f} is only taken with kind "automation".`, f);
  }
  const transform = jsonataTransform(input.expression);
  await rt.db.prisma.webhook.update({ where: { id: webhookId }, data: { transform } });
  return viewTransform(transform);
}
