import jsonata from 'jsonata';
import { InvalidRequest } from '../errors.ts';

/**
 * A webhook's transform, as stored on the webhook and run by the delivery engine and
 * test-delivery. Pure (no database): the home the Automations runtime plugs into beside JSONata,
 * through the one entry `transformPayload`.
 */
export type Transform = { kind: 'jsonata'; expression: string } | { kind: 'automation'; automationId: string; version: number };
export type TransformView = { kind: 'jsonata' | 'automation' | null; expression: string | null; automationId?: string | null; version?: number | null };

const MAX_EXPRESSION_LENGTH = 64 * 1024;
// Bounds for one evaluation, so a transform cannot hold a request or a runner.
const LIMITS = { timeout: 1000, stack: 500, sequence: 100_000 };

function compile(expression: string): jsonata.Expression {
  return jsonata(expression, LIMITS);
}

/**
 * The stored transform, checked: what the delivery engine (deliveries/dispatch.ts) and
 * test-delivery branch on, read the one way (null: none, or a stored value of no known shape).
 */
export function storedTransform(stored: unknown): Transform | null {
  const t = stored as { kind?: unknown; expression?: unknown; automationId?: unknown; version?: unknown } | null;
  if (t?.kind === 'jsonata' && typeof t.expression === 'string') return { kind: 'jsonata', expression: t.expression };
  if (t?.kind === 'automation' && typeof t.automationId === 'string' && typeof t.version === 'number') return { kind: 'automation', automationId: t.automationId, version: t.version };
  return null;
}

export function viewTransform(stored: unknown): TransformView {
  const t = stored as Transform | null;
  if (t?.kind === 'jsonata') return { kind: 'jsonata', expression: t.expression };
  if (t?.kind === 'automation') return { kind: 'automation', expression: null, automationId: t.automationId, version: t.version };
  return { kind: null, expression: null };
}

/** A JSONata transform from a request's `expression` (400 with `param` when it is missing, too long or does not compile). */
export function jsonataTransform(expression: unknown): Transform {
  if (typeof expression !== 'string' || expression.trim() === '') throw new InvalidRequest('expression is required.', 'expression');
  if (expression.length > MAX_EXPRESSION_LENGTH) throw new InvalidRequest(`expression is longer than ${MAX_EXPRESSION_LENGTH} characters.`, 'expression');
  try {
    compile(expression);
  } catch (e) {
    const err = e as jsonata.JsonataError;
    throw new InvalidRequest(`expression does not compile: ${err.message}${err.position !== undefined ? ` (at ${err.position})` : ''}`, 'expression');
  }
  return { kind: 'jsonata', expression };
}

/**
 * Runs a stored transform over an event payload, as the delivery engine and test-delivery
 * both do: the expression's input is the payload parsed as JSON (a payload that is not
 * JSON fails), and its result is sent as JSON (`null` when it yields nothing).
 */
export async function transformPayload(transform: unknown, payload: Buffer): Promise<{ body: Buffer; contentType: string; value: unknown }> {
  const t = transform as { kind?: unknown; expression: string };
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
