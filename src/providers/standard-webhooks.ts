import type { Provider } from './provider.ts';
import { header, hmac, isFresh, matchesAny } from './verify.ts';

/**
 * https://www.standardwebhooks.com/ (Svix, and through Svix Clerk and Resend): `svix-*` headers
 * or their `webhook-*` equivalents; the secret is `whsec_` + base64 of the key.
 */
export function standardWebhooks(id: string, name: string): Provider {
  return {
    id,
    name,
    secret: "the endpoint's signing secret (whsec_…)",
    header: 'svix-id, svix-timestamp, svix-signature (or webhook-*)',
    scheme: 'HMAC-SHA256 (base64) of `{id}.{timestamp}.{body}`; `v1,…` space-separated while a secret rotates',
    toleranceSeconds: 300,
    eventType: [{ body: 'type' }],
    deliveryId: [{ header: 'svix-id' }, { header: 'webhook-id' }],
    verify(req, secret, fresh) {
      const prefix = header(req, 'svix-signature') !== undefined ? 'svix' : 'webhook';
      const [msgId, ts, signatures] = ['id', 'timestamp', 'signature'].map((h) => header(req, `${prefix}-${h}`));
      if (msgId === undefined || !isFresh(ts, fresh)) return false;
      const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
      const v1 = (signatures ?? '').split(' ').map((s) => (s.startsWith('v1,') ? s.slice(3) : undefined));
      return matchesAny(hmac('sha256', key, `${msgId}.${ts}.`, req.body), v1, 'base64');
    },
  };
}
