import { InvalidRequest } from '../errors.ts';

/**
 * Email sender allowlist patterns (CONTRACT §12): an address (`ana@example.com`), a domain
 * (`example.com`, also written `*@example.com`) or a local part on any domain (`alerts@*`).
 * Stored lower-cased, a domain form as `example.com`.
 */
export const MAX_PATTERN_LENGTH = 254;

const LOCAL = /^[^\s@*]+$/;
// Labels of letters, digits and hyphens (IDNs as punycode), at least two of them.
const DOMAIN = /^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/;

/** The pattern as stored, or 400 `invalid_request` (`param: "pattern"`). */
export function normalizeSenderPattern(raw: unknown): string {
  const bad = (why: string) => new InvalidRequest(`pattern ${why}: use an address (ana@example.com), a domain (example.com or *@example.com) or a local part on any domain (alerts@*).`, 'pattern');
  if (typeof raw !== 'string') throw bad('must be a string');
  if (raw.length === 0 || raw.length > MAX_PATTERN_LENGTH) throw bad(`must be 1 to ${MAX_PATTERN_LENGTH} characters`);
  if (/\s/.test(raw)) throw bad('must not contain spaces');
  const p = raw.toLowerCase();
  const at = p.indexOf('@');
  if (at !== p.lastIndexOf('@')) throw bad('must not contain two @');
  if (at === -1) {
    if (!DOMAIN.test(p)) throw bad('is not a domain');
    return p;
  }
  const local = p.slice(0, at);
  const domain = p.slice(at + 1);
  if (local === '' || domain === '') throw bad('needs a local part and a domain');
  if (local === '*' && domain === '*') throw bad('must name a local part or a domain');
  if (local === '*') {
    if (!DOMAIN.test(domain)) throw bad('is not a domain');
    return domain;
  }
  if (!LOCAL.test(local)) throw bad('has an invalid local part');
  if (domain === '*') return `${local}@*`;
  if (!DOMAIN.test(domain)) throw bad('has an invalid domain');
  return `${local}@${domain}`;
}

/** Whether `sender` (an address) matches one of the stored patterns; an empty list takes every sender. */
export function senderAllowed(patterns: readonly string[], sender: string): boolean {
  if (patterns.length === 0) return true;
  const s = sender.trim().toLowerCase();
  const at = s.lastIndexOf('@');
  if (at <= 0) return false;
  const local = s.slice(0, at);
  const domain = s.slice(at + 1);
  for (const p of patterns) {
    if (p === s || p === domain || p === `${local}@*`) return true;
  }
  return false;
}
