import { isUtf8 } from 'node:buffer';
import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

/** One signer per secret: the package decodes the secret's base64 when it is constructed. */
const signers = new Map<string, Webhook>();
function signerFor(secret: string): Webhook {
  let signer = signers.get(secret);
  if (!signer) {
    if (signers.size >= 1_000) signers.clear();
    signer = new Webhook(secret);
    signers.set(secret, signer);
  }
  return signer;
}

/**
 * Standard Webhooks headers for one message, signed with every active signing secret
 * (during a rotation's grace period there are two; receivers accept either).
 */
export function signingHeaders(secrets: string[], msgId: string, body: Buffer, at = new Date()): Record<string, string> {
  const timestamp = Math.floor(at.getTime() / 1000);
  const text = isUtf8(body) ? body.toString('utf8') : null;
  const signatures = secrets.map((secret) => {
    if (text !== null) return signerFor(secret).sign(msgId, new Date(timestamp * 1000), text);
    // The package signs strings; for bytes that are not UTF-8 the same HMAC is computed over the raw bytes.
    const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
    const mac = createHmac('sha256', key).update(`${msgId}.${timestamp}.`).update(body).digest('base64');
    return `v1,${mac}`;
  });
  return { 'webhook-id': msgId, 'webhook-timestamp': String(timestamp), 'webhook-signature': signatures.join(' ') };
}
