import type { Prisma } from '../generated/prisma/client.ts';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { InvalidRequest } from '../errors.ts';
import { buildDestination, createDefaultDestination, parseDestinationObject, requireDestinationType } from '../destinations/service.ts';
import { newId } from '../ids.ts';
import { getProject } from '../projects/service.ts';
import type { Runtime } from '../runtime.ts';
import { parseInput } from '../validation.ts';
import { defaultControls, requireControlFeatures, resolveControls, type ControlsInput } from './controls.ts';
import { createInitialSecrets } from '../webhook-config/secrets.ts';

type Rt = Pick<Runtime, 'db'>;

export interface CreateWebhookInput extends ControlsInput {
  name?: string | null;
  url?: string | null;
  destination?: unknown;
}

export const webhookNameSchema = z.string().trim().max(200);

/** hook_ + 128 random bits in lower-case hex: safe in URLs and in case-folding mail addresses. */
function newPublicId(): string {
  return `hook_${randomBytes(16).toString('hex')}`;
}

/**
 * The default destination, validated and sealed: from `url` (a webhook destination) or
 * from a whole `destination` object `{name?, type, config}`.
 */
export function buildDefaultDestination(input: { url?: string | null; destination?: unknown }) {
  const hasUrl = input.url !== undefined && input.url !== null;
  const hasDestination = input.destination !== undefined && input.destination !== null;
  if (hasUrl && hasDestination) throw new InvalidRequest('Send either url or destination, not both.', 'destination');
  if (hasDestination) return buildDestination(parseDestinationObject(input.destination), 'destination');
  if (!hasUrl) throw new InvalidRequest('url (or a destination object) is required.', 'url');
  try {
    return buildDestination({ type: 'webhook', config: { url: input.url } }, '');
  } catch (e) {
    throw e instanceof InvalidRequest ? new InvalidRequest('url must be an http or https URL.', 'url') : e;
  }
}

/** 403 for a typed (non-webhook) destination below Pro, checked before the destination is validated. */
export function requireDefaultDestinationType(tier: string, destination: unknown) {
  if (destination && typeof destination === 'object') requireDestinationType(tier, (destination as { type?: unknown }).type);
}

/**
 * Creates an active webhook with both secrets (version 1) and its default destination,
 * all in one transaction. The secrets are returned here and on rotation only.
 */
export async function createWebhook(rt: Rt, projectId: string, input: CreateWebhookInput) {
  const project = await getProject(rt, projectId);
  requireControlFeatures(project.tier, input);
  requireDefaultDestinationType(project.tier, input.destination);

  const name = input.name === undefined || input.name === null ? '' : parseInput(webhookNameSchema, input.name, 'name');
  const controls = resolveControls(input, defaultControls());
  const destination = buildDefaultDestination(input);

  return rt.db.prisma.$transaction(async (tx) => {
    const webhook = await tx.webhook.create({
      data: { id: newId('wh'), projectId, publicId: newPublicId(), name, status: 'active', ...controls, retryPolicy: controls.retryPolicy as unknown as Prisma.InputJsonValue },
    });
    const secrets = await createInitialSecrets(tx, projectId, webhook.id);
    await createDefaultDestination(tx, webhook, destination);
    return { ...webhook, ...secrets };
  });
}
