import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, linkSync, mkdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { config } from './config.ts';
import { log } from './log.ts';

let key: Buffer | undefined;

/** The key that encrypts secrets at rest: SECRETS_KEY, else ./.data/secrets.key (generated once). */
function secretsKey(): Buffer {
  if (key) return key;
  if (config.SECRETS_KEY) return (key = Buffer.from(config.SECRETS_KEY, 'base64'));
  const file = path.join(config.dataDir, 'secrets.key');
  if (config.DATABASE_URL) log.warn({ file }, 'SECRETS_KEY is not set; using a key file. Every process must share it: set SECRETS_KEY.');
  // An empty file is a key whose writer was killed before writing it: nothing was ever encrypted with it.
  if (!existsSync(file) || statSync(file).size === 0) {
    mkdirSync(config.dataDir, { recursive: true });
    // Written whole beside it, then linked into place: the first process to link wins, and no
    // process ever sees the file half-written.
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, randomBytes(32).toString('base64'), { mode: 0o600 });
    try {
      if (existsSync(file) && statSync(file).size === 0) unlinkSync(file);
      linkSync(tmp, file);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    } finally {
      unlinkSync(tmp);
    }
  }
  key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
  if (key.length !== 32) throw new Error(`${file} must hold 32 bytes, base64-encoded`);
  return key;
}

/** AES-256-GCM: "v1.<iv>.<tag>.<ciphertext>" in base64url. */
export function encryptSecret(plain: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', secretsKey(), iv);
  const ct = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
  return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.');
}

export function decryptSecret(sealed: string): string {
  const [v, iv, tag, ct] = sealed.split('.');
  if (v !== 'v1' || !iv || !tag || ct === undefined) throw new Error('unknown secret format');
  const decipher = createDecipheriv('aes-256-gcm', secretsKey(), Buffer.from(iv, 'base64url'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
}

export function sha256Hex(s: string | Buffer): string {
  return createHash('sha256').update(s).digest('hex');
}

export function constantTimeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

/** A key for one purpose (cursor signing, file links), derived from the secrets key. */
export function derivedKey(purpose: string): Buffer {
  return createHmac('sha256', secretsKey()).update(purpose).digest();
}

// Decryption is a pure function of the sealed text, so memoising it cannot serve a stale secret:
// which versions are valid is still read from the database on every request.
const opened = new Map<string, string>();

/** decryptSecret, memoised (webhook secrets and provider secrets are opened on every ingest). */
export function openSecret(sealed: string): string {
  let plain = opened.get(sealed);
  if (plain === undefined) {
    plain = decryptSecret(sealed);
    if (opened.size >= 10_000) opened.clear();
    opened.set(sealed, plain);
  }
  return plain;
}
