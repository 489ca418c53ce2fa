import type { Provider } from './provider.ts';
import { header, hmac, isFresh, jsonField, matchesAny } from './verify.ts';

/** https://linear.app/developers/webhooks#securing-webhooks: the timestamp is the signed body's `webhookTimestamp` (ms). */
export default {
  id: 'linear',
  name: 'Linear',
  secret: "the webhook's signing secret",
  header: 'Linear-Signature',
  scheme: 'HMAC-SHA256 (hex) of the body; `webhookTimestamp` (ms) in the body',
  toleranceSeconds: 60,
  eventType: [{ body: 'type' }],
  deliveryId: [{ header: 'linear-delivery' }],
  verify(req, secret, fresh) {
    if (!matchesAny(hmac('sha256', secret, req.body), [header(req, 'linear-signature')], 'hex')) return false;
    const ts = jsonField(req.body, 'webhookTimestamp');
    return typeof ts === 'number' && isFresh(ts, fresh, 'ms');
  },
} satisfies Provider;
