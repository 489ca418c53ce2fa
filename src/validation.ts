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
