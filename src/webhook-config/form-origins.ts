import { InvalidRequest } from '../errors.ts';

/** Browser forms (CONTRACT §12): who may post a webhook's form, and from which origins. */
export type FormAccess = 'secret' | 'public';
export const FORM_ACCESS: readonly FormAccess[] = ['secret', 'public'];
export const DEFAULT_FORM_ALLOWED_ORIGINS = ['*'];
const MAX_ORIGINS = 100;

/** The preflight's fixed answer headers (beside Access-Control-Allow-Origin). */
export const FORM_PREFLIGHT_HEADERS = {
  'access-control-allow-methods': 'POST',
  'access-control-allow-headers': 'content-type, idempotency-key',
  'access-control-max-age': '600',
} as const;

/**
 * `formAllowedOrigins` from input: `["*"]` or exact origins, `scheme://host[:port]` (http or https,
 * no path, no trailing slash), else 400. Kept as given, lower-cased; duplicates dropped.
 */
export function parseFormAllowedOrigins(raw: unknown, param = 'formAllowedOrigins'): string[] {
  if (raw === null || raw === undefined) return [...DEFAULT_FORM_ALLOWED_ORIGINS];
  if (!Array.isArray(raw) || raw.length === 0 || raw.length > MAX_ORIGINS) {
    throw new InvalidRequest(`${param} must be a list of 1 to ${MAX_ORIGINS} origins ("*" or scheme://host[:port]).`, param);
  }
  const out: string[] = [];
  for (const [i, entry] of raw.entries()) {
    if (typeof entry !== 'string') throw new InvalidRequest(`${param}[${i}] must be a string.`, param);
    const origin = entry === '*' ? '*' : exactOrigin(entry);
    if (origin === null) throw new InvalidRequest(`${param}[${i}] must be "*" or an origin such as https://www.example.com (scheme://host[:port], no path, no trailing slash).`, param);
    if (!out.includes(origin)) out.push(origin);
  }
  return out;
}

/** `entry` as an origin (lower-cased), or null when it is not exactly `scheme://host[:port]`. */
function exactOrigin(entry: string): string | null {
  if (entry.length > 2048 || /[\s/]$/.test(entry) || /[\u0000-\u0020\u007f]/.test(entry)) return null;
  let url: URL;
  try {
    url = new URL(entry);
  } catch {
    return null;
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username || url.password || !url.hostname) return null;
  // url.origin drops a default port; the entry must be the origin itself, nothing more.
  const given = entry.toLowerCase();
  const withPort = `${url.protocol}//${url.host}`;
  return given === url.origin || given === withPort ? given : null;
}

/**
 * The Access-Control-Allow-Origin a request from `origin` gets (null: none, the origin is not
 * listed); `*` when `*` is listed. `Origin: null` matches only `*`.
 */
export function allowedOriginFor(list: readonly string[], origin: string | undefined): string | null {
  if (list.includes('*')) return '*';
  if (origin === undefined || origin === 'null') return null;
  const o = origin.toLowerCase();
  return list.includes(o) ? origin : null;
}

/** Whether a post from `origin` is taken: a request without an Origin header (not a browser) always is. */
export function originAllowed(list: readonly string[], origin: string | undefined): boolean {
  return origin === undefined || allowedOriginFor(list, origin) !== null;
}

/** The CORS headers every answer of the form carries for this request (Vary: Origin under an exact list). */
export function formCorsHeaders(list: readonly string[], origin: string | undefined): Record<string, string> {
  const allow = allowedOriginFor(list, origin);
  const vary: Record<string, string> = list.includes('*') ? {} : { vary: 'Origin' };
  return allow === null ? vary : { 'access-control-allow-origin': allow, ...vary };
}
