import type { Provider } from './provider.ts';
import { header, hmac, matchesAny } from './verify.ts';

/** https://developer.squareup.com/docs/webhooks/step3validate: the notification URL is the ingest URL as configured. */
export default {
  id: 'square',
  name: 'Square',
  secret: "the subscription's signature key",
  header: 'X-Square-HmacSha256-Signature',
  scheme: 'HMAC-SHA256 (base64) of `{notification URL}{body}`',
  toleranceSeconds: null,
  eventType: [{ body: 'type' }],
  deliveryId: [{ body: 'event_id' }],
  verify(req, secret) {
    return matchesAny(hmac('sha256', secret, req.url, req.body), [header(req, 'x-square-hmacsha256-signature')], 'base64');
  },
} satisfies Provider;
