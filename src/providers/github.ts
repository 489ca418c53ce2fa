import type { Provider } from './provider.ts';
import { afterPrefix, header, hmac, matchesAny } from './verify.ts';

/** https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries */
export default {
  id: 'github',
  name: 'GitHub',
  secret: "the webhook's secret",
  header: 'X-Hub-Signature-256',
  scheme: 'HMAC-SHA256 (hex) of the body, `sha256=…`',
  toleranceSeconds: null,
  eventType: [{ header: 'x-github-event' }],
  deliveryId: [{ header: 'x-github-delivery' }],
  verify(req, secret) {
    return matchesAny(hmac('sha256', secret, req.body), [afterPrefix(header(req, 'x-hub-signature-256'), 'sha256=')], 'hex');
  },
} satisfies Provider;
