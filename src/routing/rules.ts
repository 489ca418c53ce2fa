import { Query } from 'mingo';
import { z } from 'zod';
import { InvalidRequest } from '../errors.ts';
import { parseInput } from '../validation.ts';

/** What a routing rule's `match` is evaluated against. */
export interface EventContext {
  channel: string;
  method: string | null;
  path: string | null;
  query: Record<string, unknown>;
  /** Lower-case names. */
  headers: Record<string, unknown>;
  contentType: string | null;
  /** The body as parsed JSON where it parses, else its text. */
  body: unknown;
  /** The webhook's provider pack (`stripe`, `github`, …), when it has one. */
  provider?: string | null;
  /** The event type as the provider names it (Stripe `type`, GitHub `x-github-event`, …), when it has a provider pack. */
  eventType?: string | null;
}

export interface RoutingRule {
  name: string;
  priority: number;
  match: Record<string, unknown>;
  destinationId: string;
}

export const MAX_RULES = 100;

const ruleSchema = z
  .object({
    name: z.string().trim().min(1).max(200),
    priority: z.number().int().min(-1_000_000).max(1_000_000),
    match: z.record(z.unknown()),
    destinationId: z.string().min(1),
  })
  .strict();
const rulesSchema = z.array(ruleSchema).max(MAX_RULES);

// Scripted operators ($where, $function, $accumulator) would run caller-supplied code.
const QUERY_OPTIONS = { scriptEnabled: false } as const;

// Compiling is a pure function of the query, so memoising it cannot serve stale routing.
const compiled = new Map<string, Query>();
function compile(match: Record<string, unknown>): Query {
  const key = JSON.stringify(match);
  let q = compiled.get(key);
  if (!q) {
    q = new Query(match, QUERY_OPTIONS);
    if (compiled.size >= 5_000) compiled.clear();
    compiled.set(key, q);
  }
  return q;
}

/**
 * Validates rules (400 with `param`): shape, unique names, queries that compile,
 * destinations among `destinationIds`. Returns them in evaluation order (ascending
 * priority; equal priorities keep their given order).
 */
export function validateRules(raw: unknown, destinationIds: Set<string>): RoutingRule[] {
  const rules = parseInput(rulesSchema, raw, 'rules') as RoutingRule[];
  const names = new Set<string>();
  rules.forEach((rule, i) => {
    if (names.has(rule.name)) throw new InvalidRequest(`rules[${i}].name: another rule is already named ${rule.name}.`, `rules[${i}].name`);
    names.add(rule.name);
    try {
      compile(rule.match);
    } catch (e) {
      throw new InvalidRequest(`rules[${i}].match is not a valid query: ${(e as Error).message}`, `rules[${i}].match`);
    }
    if (!destinationIds.has(rule.destinationId)) {
      throw new InvalidRequest(`rules[${i}].destinationId is not a destination of this webhook.`, `rules[${i}].destinationId`);
    }
  });
  return rules.map((rule, i) => ({ rule, i })).sort((a, b) => a.rule.priority - b.rule.priority || a.i - b.i).map((x) => x.rule);
}

/** The first rule (in stored, ascending-priority order) whose match holds; null means the default destination. */
export function matchRule(rules: readonly RoutingRule[], context: EventContext): RoutingRule | null {
  for (const rule of rules) {
    try {
      if (compile(rule.match).test(context as unknown as Record<string, unknown>)) return rule;
    } catch {
      // A query that compiles can still throw on a value of an unexpected shape: no match.
    }
  }
  return null;
}

/** The body as rules see it: parsed JSON where it parses, else the text. */
export function bodyForMatching(body: Buffer | string | null | undefined): unknown {
  if (body === null || body === undefined) return null;
  const text = typeof body === 'string' ? body : body.toString('utf8');
  if (text === '') return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
