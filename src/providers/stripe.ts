import type { Provider } from './provider.ts';
import { header, hmac, isFresh, listed, matchesAny } from './verify.ts';

/** https://docs.stripe.com/webhooks#verify-manually */
export default {
  id: 'stripe',
  name: 'Stripe',
  secret: "the endpoint's signing secret (whsec_…)",
  header: 'Stripe-Signature',
  scheme: 'HMAC-SHA256 (hex) of `{t}.{body}`; `t=…,v1=…`, several `v1` while a secret rolls',
  toleranceSeconds: 300,
  eventType: [{ body: 'type' }],
  deliveryId: [{ body: 'id' }],
  verify(req, secret, fresh) {
    const value = header(req, 'stripe-signature');
    const [t] = listed(value, 't');
    return isFresh(t, fresh) && matchesAny(hmac('sha256', secret, `${t}.`, req.body), listed(value, 'v1'), 'hex');
  },
} satisfies Provider;
