import { InvalidRequest } from '../errors.ts';

export const DELIVER_AT_HEADER = 'x-service-deliver-at';
const MAX_AHEAD_MS = 365 * 86_400_000;
const UNIX_SECONDS = /^\d{1,11}(\.\d{1,6})?$/;
const ISO_8601 = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(Z|[+-]\d{2}(?::?\d{2})?)?)?$/i;

/**
 * `x-service-deliver-at`: Unix time in seconds or an ISO 8601 date-time (UTC when it
 * names no offset). A past time means "now"; more than a year ahead is refused.
 */
export function parseDeliverAt(raw: string, now = Date.now()): Date {
  const value = raw.trim();
  let ms = NaN;
  if (UNIX_SECONDS.test(value)) ms = Math.round(Number(value) * 1000);
  else {
    const m = ISO_8601.exec(value);
    if (m) {
      const hasTime = /[T ]/i.test(value);
      ms = Date.parse(hasTime && !m[1] ? `${value.replace(' ', 'T')}Z` : value.replace(' ', 'T'));
    }
  }
  if (!Number.isFinite(ms)) {
    throw new InvalidRequest(`${DELIVER_AT_HEADER} must be an ISO 8601 date-time or Unix time in seconds.`, DELIVER_AT_HEADER);
  }
  if (ms - now > MAX_AHEAD_MS) throw new InvalidRequest(`${DELIVER_AT_HEADER} is more than a year ahead.`, DELIVER_AT_HEADER);
  return new Date(ms);
}
