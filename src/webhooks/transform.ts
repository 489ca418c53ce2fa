import jsonata from 'jsonata';
import { InvalidRequest } from '../errors.ts';
import { Prisma } from '../generated/prisma/client.ts';
import { requireFeature } from '../projects/gates.ts';
import { getProject } from '../projects/service.ts';
import type { Runtime } from '../runtime.ts';
import { getWebhook } from './get-webhook.ts';

type Rt = Pick<Runtime, 'db'>;

export type Transform = { kind: 'jsonata'; expression: string };
export type TransformView = { kind: 'jsonata' | null; expression: string | null };

const MAX_EXPRESSION_LENGTH = 64 * 1024;
// Bounds for one evaluation, so a transform cannot hold a request or a runner.
const LIMITS = { timeout: 1000, stack: 500, sequence: 100_000 };

function compile(expression: string): jsonata.Expression {
  return jsonata(expression, LIMITS);
}

export function viewTransform(stored: unknown): TransformView {
  const t = stored as Transform | null;
  return t?.kind === 'jsonata' ? { kind: 'jsonata', expression: t.expression } : { kind: null, expression: null };
}

export async function getTransform(rt: Rt, projectId: string, webhookId: string): Promise<TransformView> {
  return viewTransform((await getWebhook(rt, projectId, webhookId)).transform);
}

export interface TransformInput {
  kind?: string | null;
  expression?: string | null;
  automationId?: string | null;
  version?: number | null;
}

/** `{kind:"jsonata", expression}` sets a classic transform (Starter and above); `{kind:null}` removes it. */
export async function setTransform(rt: Rt, projectId: string, webhookId: string, input: TransformInput): Promise<TransformView> {
  await getWebhook(rt, projectId, webhookId);
  const { tier } = await getProject(rt, projectId);
  if (input.kind === undefined) throw new InvalidRequest('kind is required: "jsonata", or null to remove the transform.', 'kind');
  if (input.kind === null) {
    for (const f of ['expression', 'automationId', 'version'] as const) {
      if (input[f] !== undefined && input[f] !== null) throw new InvalidRequest(`${f} is not taken when kind is null.`, f);
    }
    await rt.db.prisma.webhook.update({ where: { id: webhookId }, data: { transform: Prisma.DbNull } });
    return viewTransform(null);
  }
  if (input.kind === 'automation') {
    requireFeature(tier, 'automations');
    throw new InvalidRequest('Automation transforms are not available on this deployment; use kind "jsonata".', 'kind');
  }
  if (input.kind !== 'jsonata') throw new InvalidRequest('kind must be "jsonata", "automation" or null.', 'kind');
  requireFeature(tier, 'classic_transforms');
  for (const f of ['automationId', 'version'] as const) {
    if (input[f] !== undefined && input[f] !== null) throw new InvalidRequest(`${f} is only taken with kind "automation".`, f);
  }
  const expression = input.expression;
  if (typeof expression !== 'string' || expression.trim() === '') throw new InvalidRequest('expression is required.', 'expression');
  if (expression.length > MAX_EXPRESSION_LENGTH) throw new InvalidRequest(`expression is longer than ${MAX_EXPRESSION_LENGTH} characters.`, 'expression');
  try {
    compile(expression);
  } catch (e) {
    const err = e as jsonata.JsonataError;
    throw new InvalidRequest(`expression does not compile: ${err.message}${err.position !== undefined ? ` (at ${err.position})` : ''}`, 'expression');
  }
  const transform: Transform = { kind: 'jsonata', expression };
  await rt.db.prisma.webhook.update({ where: { id: webhookId }, data: { transform } });
  return viewTransform(transform);
}

/**
 * Runs a stored transform over an event payload, as the delivery engine and test-delivery
 * both do: the expression's input is the payload parsed as JSON (a payload that is not
 * JSON fails), and its result is sent as JSON (`null` when it yields nothing).
 */
export async function applyTransform(transform: unknown, payload: Buffer): Promise<{ body: Buffer; contentType: string; value: unknown }> {
  const t = transform as Transform;
  if (t?.kind !== 'jsonata') throw new Error(`transform failed: unsupported kind ${String((t as { kind?: unknown })?.kind)}`);
  let input: unknown;
  try {
    input = JSON.parse(payload.toString('utf8'));
  } catch {
    throw new Error('transform failed: the payload is not JSON');
  }
  let value: unknown;
  try {
    value = (await compile(t.expression).evaluate(input)) ?? null;
  } catch (err) {
    throw new Error(`transform failed: ${(err as Error).message}`);
  }
  return { body: Buffer.from(JSON.stringify(value)), contentType: 'application/json', value };
}
