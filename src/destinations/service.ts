import { z } from 'zod';
import { InvalidRequest, InvalidState, NotFound } from '../errors.ts';
import type { Destination, Prisma } from '../generated/prisma/client.ts';
import { newId } from '../ids.ts';
import { requireFeature } from '../projects/gates.ts';
import { getProject } from '../projects/service.ts';
import type { Runtime } from '../runtime.ts';
import { parseInput } from '../validation.ts';
import { getWebhook } from '../webhook-config/get-webhook.ts';
import { assertDestinationType, publicConfig, sealConfig, type DestinationType, type StoredConfig } from './config.ts';
import { findDestinationPack } from './packs/index.ts';
import { ingestTargetsChanged } from '../db/local-changes.ts';

type Rt = Pick<Runtime, 'db'>;

export const DEFAULT_DESTINATION_NAME = 'default';
const MAX_DESTINATIONS = 50;
const nameSchema = z.string().trim().min(1).max(200);

/**
 * 403 before any validation, as the contract orders checks: typed (non-HTTP) destinations are Pro
 * and above; a pack says whether it is one (every tier may use `webhook` and `cli`, CONTRACT §13).
 */
export function requireDestinationType(tier: string, type: unknown): void {
  if (typeof type === 'string' && findDestinationPack(type)?.gated) requireFeature(tier, 'typed_destinations');
}

export interface DestinationInput {
  name?: unknown;
  type: unknown;
  config?: unknown;
}

const destinationObject = z.object({ name: z.unknown().optional(), type: z.unknown(), config: z.unknown().optional() }).strict();

/** `destination` as a whole object on webhook create/update: `{name?, type, config}`. */
export function parseDestinationObject(raw: unknown, param = 'destination'): DestinationInput {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new InvalidRequest(`${param} must be an object.`, param);
  return parseInput(destinationObject, raw, param) as DestinationInput;
}

/** A validated, sealed destination ready to store (400 with `param` on bad input). */
export function buildDestination(input: DestinationInput, param: string, previous?: Destination) {
  const at = (field: string) => (param ? `${param}.${field}` : field);
  const type = assertDestinationType(input.type, at('type'));
  const name = input.name === undefined ? undefined : parseInput(nameSchema, input.name, at('name'));
  const prevConfig = previous && previous.type === type ? (previous.config as StoredConfig) : undefined;
  const config = sealConfig(type, input.config, at('config'), prevConfig);
  return { type, name, config };
}

export async function createDefaultDestination(
  tx: Prisma.TransactionClient,
  webhook: { id: string; projectId: string },
  d: { type: DestinationType; name?: string; config: StoredConfig },
) {
  return tx.destination.create({
    data: { id: newId('dst'), projectId: webhook.projectId, webhookId: webhook.id, name: d.name ?? DEFAULT_DESTINATION_NAME, type: d.type, config: d.config as Prisma.InputJsonValue, isDefault: true },
  });
}

export async function listDestinations(rt: Rt, projectId: string, webhookId: string) {
  await getWebhook(rt, projectId, webhookId);
  return rt.db.prisma.destination.findMany({ where: { webhookId }, orderBy: [{ isDefault: 'desc' }, { id: 'asc' }] });
}

export async function getDestination(rt: Rt, projectId: string, webhookId: string, destinationId: string) {
  await getWebhook(rt, projectId, webhookId);
  const d = await rt.db.prisma.destination.findFirst({ where: { id: destinationId, webhookId } });
  if (!d) throw new NotFound('destination', destinationId);
  return d;
}

function nameTaken(e: unknown): boolean {
  return (e as { code?: unknown } | null)?.code === 'P2002';
}

export async function createDestination(rt: Rt, projectId: string, webhookId: string, input: DestinationInput) {
  const webhook = await getWebhook(rt, projectId, webhookId);
  const project = await getProject(rt, projectId);
  requireDestinationType(project.tier, input.type);
  if (input.name === undefined) throw new InvalidRequest('name is required.', 'name');
  const built = buildDestination(input, '');
  if ((await rt.db.prisma.destination.count({ where: { webhookId } })) >= MAX_DESTINATIONS) {
    throw new InvalidRequest(`A webhook has at most ${MAX_DESTINATIONS} destinations.`);
  }
  try {
    const created = await rt.db.prisma.destination.create({
      data: { id: newId('dst'), projectId, webhookId: webhook.id, name: built.name!, type: built.type, config: built.config as Prisma.InputJsonValue, isDefault: false },
    });
    ingestTargetsChanged(rt, { webhookId });
    return created;
  } catch (e) {
    if (nameTaken(e)) throw new InvalidRequest(`This webhook already has a destination named ${built.name}.`, 'name');
    throw e;
  }
}

/** Changes name, type or config (config is replaced as a whole; stored credentials are kept when left out). */
export async function updateDestination(rt: Rt, projectId: string, webhookId: string, destinationId: string, input: Partial<DestinationInput>) {
  const current = await getDestination(rt, projectId, webhookId, destinationId);
  const project = await getProject(rt, projectId);
  if (input.type !== undefined) requireDestinationType(project.tier, input.type);
  const data = updateDestinationData(current, input);
  try {
    const updated = await rt.db.prisma.destination.update({ where: { id: current.id }, data: data as Prisma.DestinationUpdateInput });
    ingestTargetsChanged(rt, { webhookId });
    return updated;
  } catch (e) {
    if (nameTaken(e)) throw new InvalidRequest(`This webhook already has a destination named ${String(input.name)}.`, 'name');
    throw e;
  }
}

/** The row changes for an update of `current` (validated, credentials sealed). */
export function updateDestinationData(current: Destination, input: Partial<DestinationInput>, param = '') {
  const at = (field: string) => (param ? `${param}.${field}` : field);
  const data: { name?: string; type?: string; config?: StoredConfig } = {};
  if (input.name !== undefined) data.name = parseInput(nameSchema, input.name, at('name'));
  if (input.type !== undefined || input.config !== undefined) {
    const type = input.type === undefined ? current.type : input.type;
    if (type !== current.type && input.config === undefined) throw new InvalidRequest('config is required when the type changes.', at('config'));
    const built = buildDestination({ type, config: input.config ?? publicConfig(current.config) }, param, current);
    data.type = built.type;
    data.config = built.config;
  }
  return data;
}

export async function deleteDestination(rt: Rt, projectId: string, webhookId: string, destinationId: string) {
  const webhook = await getWebhook(rt, projectId, webhookId);
  const d = await rt.db.prisma.destination.findFirst({ where: { id: destinationId, webhookId } });
  if (!d) throw new NotFound('destination', destinationId);
  if (d.isDefault) throw new InvalidState('The default destination cannot be deleted; update it instead.');
  const rules = (webhook.routing as { destinationId: string; name: string }[]) ?? [];
  const user = rules.find((r) => r.destinationId === d.id);
  if (user) throw new InvalidState(`The destination is used by routing rule "${user.name}"; change the routing first.`);
  // Guarded delete: a routing change committed since the read above must not leave a dangling rule.
  const deleted = await rt.db.pool.query(
    `DELETE FROM destinations d WHERE d.id = $1 AND d.webhook_id = $2 AND NOT d.is_default
       AND NOT EXISTS (SELECT 1 FROM webhooks w, jsonb_array_elements(w.routing) r WHERE w.id = d.webhook_id AND r->>'destinationId' = d.id)`,
    [d.id, webhookId],
  );
  if (deleted.rowCount === 0) throw new InvalidState('The destination is in use by routing.');
  ingestTargetsChanged(rt, { webhookId });
  return { id: d.id, deleted: true };
}
