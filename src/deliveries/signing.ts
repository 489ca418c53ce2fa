import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';

/** One key per secret, decoded once (base64 after the `whsec_` prefix). */
const keys = new Map<string, KeyObject>();
function keyFor(secret: string): KeyObject {
  let key = keys.get(secret);
  if (!key) {
    if (keys.size >= 1_000) keys.clear();
    key = createSecretKey(Buffer.from(secret.replace(/^whsec_/, ''), 'base64'));
    keys.set(secret, key);
  }
  return key;
}

/**
 * Standard Webhooks headers for one message, signed with every active signing secret
 * (during a rotation's grace period there are two; receivers accept either). The signature is
 * HMAC-SHA256 over `{id}.{timestamp}.{body}` (the body's raw bytes), as the `standardwebhooks`
 * package computes it for a string body; node:crypto's HMAC is used rather than the package's,
 * whose pure-JavaScript SHA-256 cost several per cent of a runner's CPU per delivery.
 */
export function signingHeaders(secrets: string[], msgId: string, body: Buffer, at = new Date()): Record<string, string> {
  const timestamp = Math.floor(at.getTime() / 1000);
  const signatures = secrets.map((secret) => `v1,${createHmac('sha256', keyFor(secret)).update(`${msgId}.${timestamp}.`).update(body).digest('base64')}`);
  return { 'webhook-id': msgId, 'webhook-timestamp': String(timestamp), 'webhook-signature': signatures.join(' ') };
}
