import type { Provider } from './provider.ts';
import { afterPrefix, header, hmac, matchesAny } from './verify.ts';

/** https://www.typeform.com/developers/webhooks/secure-your-webhooks/ */
export default {
  id: 'typeform',
  name: 'Typeform',
  secret: "the webhook's secret",
  header: 'Typeform-Signature',
  scheme: 'HMAC-SHA256 (base64) of the body, `sha256=…`',
  toleranceSeconds: null,
  eventType: [{ body: 'event_type' }],
  deliveryId: [{ body: 'event_id' }],
  verify(req, secret) {
    return matchesAny(hmac('sha256', secret, req.body), [afterPrefix(header(req, 'typeform-signature'), 'sha256=')], 'base64');
  },
} satisfies Provider;
