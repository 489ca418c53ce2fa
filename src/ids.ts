import { randomBytes, randomFillSync } from 'node:crypto';
import { monotonicFactory } from 'ulid';

// ulid's default source asks the kernel for one byte per character (16 system calls per id);
// this one draws the same cryptographic bytes from a buffer refilled 4 KB at a time.
const pool = Buffer.alloc(4096);
let offset = pool.length;
function randomFraction(): number {
  if (offset >= pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  return pool[offset++] / 0x100;
}

const ulid = monotonicFactory(randomFraction);

/** Prefixed id that sorts by creation time (ULID, lower-cased), e.g. msg_01jd…. */
export function newId(prefix: string): string {
  return `${prefix}_${ulid().toLowerCase()}`;
}

/** Unguessable token: prefix + 32 url-safe random characters. */
export function randomToken(prefix: string, bytes = 24): string {
  return `${prefix}_${randomBytes(bytes).toString('base64url')}`;
}
