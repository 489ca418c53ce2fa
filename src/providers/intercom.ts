import type { Provider } from './provider.ts';
import { afterPrefix, header, hmac, matchesAny } from './verify.ts';

/** https://developers.intercom.com/docs/references/webhooks/webhook-models#signed-notifications */
export default {
  id: 'intercom',
  name: 'Intercom',
  secret: "the app's client secret",
  header: 'X-Hub-Signature',
  scheme: 'HMAC-SHA1 (hex) of the body, `sha1=…`',
  toleranceSeconds: null,
  eventType: [{ body: 'topic' }],
  deliveryId: [{ body: 'id' }],
  verify(req, secret) {
    return matchesAny(hmac('sha1', secret, req.body), [afterPrefix(header(req, 'x-hub-signature'), 'sha1=')], 'hex');
  },
} satisfies Provider;
