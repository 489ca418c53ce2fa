import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

/**
 * Standard Webhooks headers for one message, signed with every active signing secret
 * (during a rotation's grace period there are two; receivers accept either).
 */
export function signingHeaders(secrets: string[], msgId: string, body: Buffer, at = new Date()): Record<string, string> {
  const timestamp = Math.floor(at.getTime() / 1000);
  const text = body.toString('utf8');
  const isUtf8 = Buffer.byteLength(text) === body.length && Buffer.from(text, 'utf8').equals(body);
  const signatures = secrets.map((secret) => {
    if (isUtf8) return new Webhook(secret).sign(msgId, new Date(timestamp * 1000), text);
    // The package signs strings; for bytes that are not UTF-8 the same HMAC is computed over the raw bytes.
    const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
    const mac = createHmac('sha256', key).update(`${msgId}.${timestamp}.`).update(body).digest('base64');
    return `v1,${mac}`;
  });
  return { 'webhook-id': msgId, 'webhook-timestamp': String(timestamp), 'webhook-signature': signatures.join(' ') };
}
