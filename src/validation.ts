import type { z } from 'zod';
import { InvalidRequest } from './errors.ts';

/**
 * Parses `raw` with a zod schema; the first problem becomes a 400 invalid_request whose
 * `param` is the dotted path of the field at fault, under `param` (e.g. `retryPolicy.maxAttempts`, `rules[2].match`).
 */
export function parseInput<S extends z.ZodTypeAny>(schema: S, raw: unknown, param: string): z.output<S> {
  const result = schema.safeParse(raw);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const path = issue.code === 'unrecognized_keys' ? [...issue.path, issue.keys[0]] : issue.path;
  const at = path.reduce<string>((acc, seg) => (typeof seg === 'number' ? `${acc}[${seg}]` : acc ? `${acc}.${seg}` : seg), param);
  if (issue.code === 'unrecognized_keys') throw new InvalidRequest(`Unknown parameter: ${at}.`, at);
  throw new InvalidRequest(`${at}: ${issue.message}`, at);
}

/**
 * Why a string cannot be stored: PostgreSQL text and jsonb cannot hold U+0000, and an unpaired
 * surrogate is not a character at all (it has no UTF-8 form). Undefined when it can be stored.
 */
function unstorable(s: string): string | undefined {
  if (s.includes('\0')) return 'contains a NUL character (U+0000)';
  if (!s.isWellFormed()) return 'contains an unpaired surrogate (not valid Unicode)';
  return undefined;
}

/**
 * Refuses, with 400 invalid_request and `param`, any string in `value` (object keys included, at
 * any depth) that PostgreSQL or JSON cannot hold. Called at the edge, before any write.
 */
export function assertStorable(value: unknown, param: string, depth = 0): void {
  if (typeof value === 'string') {
    const why = unstorable(value);
    if (why) throw new InvalidRequest(`${param} ${why}.`, param);
    return;
  }
  if (value === null || typeof value !== 'object' || depth > 64) return;
  if (Array.isArray(value)) {
    value.forEach((v, i) => assertStorable(v, `${param}[${i}]`, depth + 1));
    return;
  }
  for (const [k, v] of Object.entries(value)) {
    const at = param ? `${param}.${k}` : k;
    const why = unstorable(k);
    if (why) throw new InvalidRequest(`The name of ${param || 'a parameter'} ${why}.`, param || k);
    assertStorable(v, at, depth + 1);
  }
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** The bytes as text, refusing (400) what is not valid UTF-8 rather than storing U+FFFD in its place. */
export function decodeUtf8(raw: Uint8Array, what = 'The request body'): string {
  try {
    return strictUtf8.decode(raw);
  } catch {
    throw new InvalidRequest(`${what} is not valid UTF-8.`);
  }
}
