import type { Prisma } from '../generated/prisma/client.ts';
import { InvalidRequest } from '../errors.ts';
import { parseDestinationObject, updateDestinationData } from '../destinations/service.ts';
import { getProject } from '../projects/service.ts';
import type { Runtime } from '../runtime.ts';
import { parseInput } from '../validation.ts';
import type { RetryPolicy } from '../webhook-config/retry-policy.ts';
import { requireControlFeatures, resolveControls, type Controls } from './controls.ts';
import { requireDefaultDestinationType, webhookNameSchema, type CreateWebhookInput } from './create-webhook.ts';
import { getWebhook } from '../webhook-config/get-webhook.ts';
import { ingestTargetsChanged } from '../db/local-changes.ts';

type Rt = Pick<Runtime, 'db'>;

/**
 * Changes the name, the controls and the default destination (`url` points it at a URL,
 * `destination` replaces it). Left-out fields keep their values; `null` resets a
 * nullable control. Works in every state, so paused webhooks stay editable.
 */
export async function updateWebhook(rt: Rt, projectId: string, webhookId: string, input: CreateWebhookInput) {
  const current = await getWebhook(rt, projectId, webhookId);
  const project = await getProject(rt, projectId);
  requireControlFeatures(project.tier, input);
  requireDefaultDestinationType(project.tier, input.destination);

  for (const f of ['name', 'deliveryMode', 'maxInFlight', 'timeoutMs'] as const) {
    if (input[f] === null) throw new InvalidRequest(`${f} cannot be null.`, f);
  }
  const name = input.name === undefined ? current.name : parseInput(webhookNameSchema, input.name, 'name');
  const controls = resolveControls(input, {
    deliveryMode: current.deliveryMode as Controls['deliveryMode'],
    maxInFlight: current.maxInFlight,
    timeoutMs: current.timeoutMs,
    retryPolicy: current.retryPolicy as unknown as RetryPolicy,
    defaultDelaySeconds: current.defaultDelaySeconds,
    throttleRatePerSecond: current.throttleRatePerSecond,
    customHeaders: current.customHeaders as Record<string, string>,
    dedupeWindowSeconds: current.dedupeWindowSeconds,
    idempotencyWindowSeconds: current.idempotencyWindowSeconds,
    formAccess: current.formAccess as Controls['formAccess'],
    formAllowedOrigins: current.formAllowedOrigins,
  });

  const updated = await rt.db.prisma.$transaction(async (tx) => {
    const hasUrl = input.url !== undefined && input.url !== null;
    const hasDestination = input.destination !== undefined && input.destination !== null;
    if (hasUrl || hasDestination) {
      if (hasUrl && hasDestination) throw new InvalidRequest('Send either url or destination, not both.', 'destination');
      const dest = await tx.destination.findFirstOrThrow({ where: { webhookId, isDefault: true } });
      let data;
      if (hasDestination) data = updateDestinationData(dest, parseDestinationObject(input.destination), 'destination');
      else {
        // Keeps the method and headers of a webhook destination; another type becomes a plain webhook one.
        const config = dest.type === 'webhook' ? { ...(dest.config as object), url: input.url } : { url: input.url };
        try {
          data = updateDestinationData(dest, { type: 'webhook', config });
        } catch (e) {
          throw e instanceof InvalidRequest ? new InvalidRequest('url must be an http or https URL.', 'url') : e;
        }
      }
      await tx.destination.update({ where: { id: dest.id }, data: data as Prisma.DestinationUpdateInput });
    }
    return tx.webhook.update({ where: { id: webhookId }, data: { name, ...controls, retryPolicy: controls.retryPolicy as unknown as Prisma.InputJsonValue } });
  });
  // State, dedupe and idempotency windows, form controls, delay, mode, the default destination: what ingest reads.
  ingestTargetsChanged(rt, { webhookId });
  return updated;
}
