/**
 * The shared verifier every provider pack is written with: HMAC (SHA-1, SHA-256; hex or base64),
 * Ed25519, ECDSA P-256, a shown token, and timestamp freshness. Every comparison of a secret or a
 * signature is constant-time; nothing here parses the body.
 */
import { createHash, createHmac, createPublicKey, timingSafeEqual, verify as verifySignature, type KeyObject } from 'node:crypto';
import type { Freshness, SignedRequest } from './provider.ts';

/** A header's value (the first, when repeated), or undefined. */
export function header(req: SignedRequest, name: string): string | undefined {
  const v = req.headers[name];
  const s = Array.isArray(v) ? v[0] : v;
  return typeof s === 'string' && s !== '' ? s : undefined;
}

/** HMAC of the parts, concatenated as bytes (strings as UTF-8). */
export function hmac(algorithm: 'sha1' | 'sha256', key: string | Buffer, ...parts: (string | Buffer)[]): Buffer {
  const h = createHmac(algorithm, key);
  for (const part of parts) h.update(part);
  return h.digest();
}

export function sha256(data: string | Buffer): Buffer {
  return createHash('sha256').update(data).digest();
}

const HEX = /^[0-9a-fA-F]+$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

function decode(text: string, encoding: 'hex' | 'base64'): Buffer | null {
  const t = text.trim();
  if (encoding === 'hex') return HEX.test(t) && t.length % 2 === 0 ? Buffer.from(t, 'hex') : null;
  return BASE64.test(t) ? Buffer.from(t, 'base64') : null;
}

/** Bytes equal, in constant time for equal lengths (a length is not a secret). */
export function bytesEqual(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * True when any of the presented signatures (text in `encoding`) is `expected`. Several are
 * presented during a provider's own secret rotation; each is compared in constant time.
 */
export function matchesAny(expected: Buffer, presented: (string | undefined)[], encoding: 'hex' | 'base64'): boolean {
  let ok = false;
  for (const p of presented) {
    if (p === undefined) continue;
    const bytes = decode(p, encoding);
    if (bytes && bytesEqual(bytes, expected)) ok = true;
  }
  return ok;
}

/** The value after `prefix` (e.g. `sha256=`), or undefined when the header lacks it. */
export function afterPrefix(value: string | undefined, prefix: string): string | undefined {
  return value !== undefined && value.startsWith(prefix) ? value.slice(prefix.length) : undefined;
}

/** `t=1,v1=a,v1=b` (or `ts=1;h1=a`): the values of `key`, in order. */
export function listed(value: string | undefined, key: string, separator = ','): string[] {
  if (value === undefined) return [];
  const out: string[] = [];
  for (const item of value.split(separator)) {
    const i = item.indexOf('=');
    if (i > 0 && item.slice(0, i).trim() === key) out.push(item.slice(i + 1).trim());
  }
  return out;
}

/** A shown token equal to the secret, in constant time. */
export function tokenMatches(presented: string | undefined, secret: string): boolean {
  return presented !== undefined && bytesEqual(sha256(presented), sha256(secret));
}

/**
 * A signed timestamp within the tolerance of now, either way: Unix seconds (an integer), Unix
 * milliseconds with `unit: 'ms'`, or an ISO 8601 date.
 */
export function isFresh(timestamp: string | number | undefined, fresh: Freshness, unit: 's' | 'ms' = 's'): boolean {
  if (timestamp === undefined) return false;
  let ms: number;
  if (typeof timestamp === 'number' || /^\d{1,16}$/.test(timestamp)) ms = Number(timestamp) * (unit === 's' ? 1000 : 1);
  else if (/^\d{4}-\d\d-\d\dT/.test(timestamp)) ms = Date.parse(timestamp);
  else return false;
  return Number.isFinite(ms) && Math.abs(fresh.nowMs - ms) <= fresh.toleranceSeconds * 1000;
}

// Public keys are parsed once per key text.
const keys = new Map<string, KeyObject | null>();
function keyFor(cacheKey: string, make: () => KeyObject): KeyObject | null {
  let key = keys.get(cacheKey);
  if (key === undefined) {
    try {
      key = make();
    } catch {
      key = null;
    }
    if (keys.size >= 10_000) keys.clear();
    keys.set(cacheKey, key);
  }
  return key;
}

// The DER prefix of an Ed25519 SubjectPublicKeyInfo: the raw 32-byte key follows it.
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** An Ed25519 signature (hex) of `data` by the public key (hex, 32 bytes), as Discord signs. */
export function ed25519Verifies(publicKeyHex: string, signatureHex: string | undefined, data: Buffer): boolean {
  const signature = signatureHex === undefined ? null : decode(signatureHex, 'hex');
  const raw = decode(publicKeyHex, 'hex');
  if (!signature || signature.length !== 64 || !raw || raw.length !== 32) return false;
  const key = keyFor(`ed25519:${publicKeyHex}`, () => createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, raw]), format: 'der', type: 'spki' }));
  return !!key && verifySignature(null, data, key, signature);
}

/** An ECDSA P-256 / SHA-256 signature (base64 DER) of `data` by the public key (base64 DER SubjectPublicKeyInfo, or PEM), as SendGrid signs. */
export function ecdsaVerifies(publicKey: string, signatureBase64: string | undefined, data: Buffer): boolean {
  const signature = signatureBase64 === undefined ? null : decode(signatureBase64, 'base64');
  if (!signature) return false;
  const key = keyFor(`ecdsa:${publicKey}`, () =>
    publicKey.includes('-----BEGIN') ? createPublicKey(publicKey) : createPublicKey({ key: Buffer.from(publicKey.trim(), 'base64'), format: 'der', type: 'spki' }),
  );
  if (!key || key.asymmetricKeyType !== 'ec') return false;
  try {
    return verifySignature('sha256', data, key, signature);
  } catch {
    return false;
  }
}

/** A field of a JSON body (dotted path; array indexes as numbers), for the few schemes that sign inside the body. */
export function jsonField(body: Buffer, path: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  for (const key of path.split('.')) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}
