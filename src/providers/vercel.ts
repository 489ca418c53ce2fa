import type { Provider } from './provider.ts';
import { header, hmac, matchesAny } from './verify.ts';

/** https://vercel.com/docs/webhooks/webhooks-api#securing-webhooks */
export default {
  id: 'vercel',
  name: 'Vercel',
  secret: "the webhook's secret",
  header: 'x-vercel-signature',
  scheme: 'HMAC-SHA1 (hex) of the body',
  toleranceSeconds: null,
  eventType: [{ body: 'type' }],
  deliveryId: [{ body: 'id' }],
  verify(req, secret) {
    return matchesAny(hmac('sha1', secret, req.body), [header(req, 'x-vercel-signature')], 'hex');
  },
} satisfies Provider;
