import type { IncomingHttpHeaders } from 'node:http';
import { InvalidRequest } from '../errors.ts';

/** The producer's header (CONTRACT §12); a form may send the control field `_idempotency_key` instead. */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
export const IDEMPOTENCY_KEY_FIELD = '_idempotency_key';

/** 1–255 printable ASCII characters. */
const KEY = /^[\x20-\x7e]{1,255}$/;

/** An Idempotency-Key as given (header or field): null when none, else the key, or 400 `invalid_request`. */
export function parseIdempotencyKey(raw: string | string[] | undefined): string | null {
  if (raw === undefined) return null;
  if (typeof raw !== 'string' || !KEY.test(raw)) {
    throw new InvalidRequest('Idempotency-Key must be 1 to 255 printable ASCII characters.', IDEMPOTENCY_KEY_HEADER);
  }
  return raw;
}

/**
 * The request's key: the Idempotency-Key header, else the form's `_idempotency_key` field, else the
 * `webhook-id` of a Standard Webhooks signature that authenticated the request (`signed`); null
 * when none. A webhook-id that is no valid key is no key (the producer did not ask for one).
 */
export function requestIdempotencyKey(headers: IncomingHttpHeaders, opts: { field?: string; signed: boolean }): string | null {
  const header = parseIdempotencyKey(headers[IDEMPOTENCY_KEY_HEADER]);
  if (header !== null) return header;
  if (opts.field !== undefined) return parseIdempotencyKey(opts.field);
  const id = headers['webhook-id'];
  return opts.signed && typeof id === 'string' && KEY.test(id) ? id : null;
}
