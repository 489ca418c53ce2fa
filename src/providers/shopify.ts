import type { Provider } from './provider.ts';
import { header, hmac, matchesAny } from './verify.ts';

/** https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook */
export default {
  id: 'shopify',
  name: 'Shopify',
  secret: "the app's client secret",
  header: 'X-Shopify-Hmac-Sha256',
  scheme: 'HMAC-SHA256 (base64) of the body',
  toleranceSeconds: null,
  eventType: [{ header: 'x-shopify-topic' }],
  deliveryId: [{ header: 'x-shopify-webhook-id' }],
  verify(req, secret) {
    return matchesAny(hmac('sha256', secret, req.body), [header(req, 'x-shopify-hmac-sha256')], 'base64');
  },
} satisfies Provider;
