import { InvalidRequest } from '../errors.ts';

/**
 * Checks for the conversation part's plain input values. PostgreSQL refuses NUL characters in
 * text and jsonb, so they are a 400 here rather than a 500 from the database.
 */
export function text(value: unknown, param: string, opts: { required?: boolean; max?: number } = {}): string | undefined {
  if (value === undefined || value === null || value === '') {
    if (opts.required) throw new InvalidRequest(`${param} is required.`, param);
    return undefined;
  }
  if (typeof value !== 'string') throw new InvalidRequest(`${param} must be a string.`, param);
  if (value.includes('\u0000')) throw new InvalidRequest(`${param} must not contain NUL characters.`, param);
  if (opts.max !== undefined && value.length > opts.max) throw new InvalidRequest(`${param} must be at most ${opts.max} characters.`, param);
  return value;
}

/** An absolute http(s) URL. */
export function httpUrl(value: unknown, param: string, opts: { required?: boolean } = {}): string | undefined {
  const s = text(value, param, { ...opts, max: 8192 });
  if (s === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(s);
  } catch {
    throw new InvalidRequest(`${param} must be an absolute http or https URL.`, param);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidRequest(`${param} must be an http or https URL.`, param);
  return s;
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * A list as sent: a JSON array, or what a form's `x[0]=…&x[1]=…` becomes when qs keeps it as an
 * object with index keys (past its array limit).
 */
export function asList(value: unknown): unknown[] | undefined {
  if (Array.isArray(value)) return value;
  if (isPlainObject(value) && Object.keys(value).length > 0 && Object.keys(value).every((k) => /^\d+$/.test(k))) {
    return Object.keys(value)
      .sort((a, b) => Number(a) - Number(b))
      .map((k) => value[k]);
  }
  return undefined;
}
