import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

// node:crypto scrypt (memory-hard): N = 2^15, r = 8, p = 1 takes 32 MiB and ~0.1 s a hash here.
const N = 2 ** 15;
const R = 8;
const P = 1;
const KEY_LENGTH = 32;

function derive(password: string, salt: Buffer, opts: ScryptOptions): Promise<Buffer> {
  const maxmem = 256 * (opts.N ?? N) * (opts.r ?? R) + 1024 * 1024;
  return new Promise((resolve, reject) => scrypt(password.normalize('NFKC'), salt, KEY_LENGTH, { ...opts, maxmem }, (err, key) => (err ? reject(err) : resolve(key))));
}

/** `scrypt$N$r$p$salt$hash`, base64url parts: the parameters travel with the hash. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, { N, r: R, p: P });
  return ['scrypt', N, R, P, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** Constant-time check of a password against a stored hash; false for a malformed hash. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [kind, n, r, p, salt, hash] = stored.split('$');
  if (kind !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const key = await derive(password, Buffer.from(salt, 'base64url'), { N: Number(n), r: Number(r), p: Number(p) });
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/** Compared against when the email is unknown, so both answers take as long. */
export const UNKNOWN_USER_HASH = `scrypt$${N}$${R}$${P}$${randomBytes(16).toString('base64url')}$${randomBytes(KEY_LENGTH).toString('base64url')}`;

/** A generated password for `user create` without --password: 24 url-safe characters. */
export function generatePassword(): string {
  return randomBytes(18).toString('base64url');
}
