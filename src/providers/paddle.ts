import type { Provider } from './provider.ts';
import { header, hmac, isFresh, listed, matchesAny } from './verify.ts';

/** https://developer.paddle.com/webhooks/signature-verification (Paddle Billing; the Node SDK allows 5 s) */
export default {
  id: 'paddle',
  name: 'Paddle',
  secret: "the notification destination's secret key (pdl_ntfset_…)",
  header: 'Paddle-Signature',
  scheme: 'HMAC-SHA256 (hex) of `{ts}:{body}`; `ts=…;h1=…`, several `h1` while a secret rotates',
  toleranceSeconds: 5,
  eventType: [{ body: 'event_type' }],
  deliveryId: [{ body: 'event_id' }],
  verify(req, secret, fresh) {
    const value = header(req, 'paddle-signature');
    const [ts] = listed(value, 'ts', ';');
    return isFresh(ts, fresh) && matchesAny(hmac('sha256', secret, `${ts}:`, req.body), listed(value, 'h1', ';'), 'hex');
  },
} satisfies Provider;
