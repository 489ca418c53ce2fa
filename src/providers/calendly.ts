import type { Provider } from './provider.ts';
import { header, hmac, isFresh, listed, matchesAny } from './verify.ts';

/** https://developer.calendly.com/api-docs/4c305798a61d3-webhook-signatures (3 minutes, as Calendly's example). */
export default {
  id: 'calendly',
  name: 'Calendly',
  secret: "the webhook subscription's signing key",
  header: 'Calendly-Webhook-Signature',
  scheme: 'HMAC-SHA256 (hex) of `{t}.{body}`; `t=…,v1=…`',
  toleranceSeconds: 180,
  eventType: [{ body: 'event' }],
  deliveryId: [{ body: 'payload.uri' }],
  verify(req, secret, fresh) {
    const value = header(req, 'calendly-webhook-signature');
    const [t] = listed(value, 't');
    return isFresh(t, fresh) && matchesAny(hmac('sha256', secret, `${t}.`, req.body), listed(value, 'v1'), 'hex');
  },
} satisfies Provider;
