import type { Provider } from './provider.ts';
import { header, hmac, isFresh, matchesAny } from './verify.ts';

/** https://developer.zendesk.com/documentation/webhooks/verifying/ (Zendesk names no tolerance: 5 minutes here, configurable). */
export default {
  id: 'zendesk',
  name: 'Zendesk',
  secret: "the webhook's signing secret",
  header: 'X-Zendesk-Webhook-Signature, X-Zendesk-Webhook-Signature-Timestamp',
  scheme: 'HMAC-SHA256 (base64) of `{timestamp}{body}`',
  toleranceSeconds: 300,
  eventType: [{ body: 'type' }],
  deliveryId: [{ header: 'x-zendesk-webhook-invocation-id' }],
  verify(req, secret, fresh) {
    const ts = header(req, 'x-zendesk-webhook-signature-timestamp');
    return isFresh(ts, fresh) && matchesAny(hmac('sha256', secret, ts!, req.body), [header(req, 'x-zendesk-webhook-signature')], 'base64');
  },
} satisfies Provider;
