import type { Provider } from './provider.ts';
import { afterPrefix, header, hmac, isFresh, matchesAny } from './verify.ts';

/** https://api.slack.com/authentication/verifying-requests-from-slack */
export default {
  id: 'slack',
  name: 'Slack',
  secret: "the app's signing secret",
  header: 'X-Slack-Signature, X-Slack-Request-Timestamp',
  scheme: 'HMAC-SHA256 (hex) of `v0:{timestamp}:{body}`, `v0=…`',
  toleranceSeconds: 300,
  eventType: [{ body: 'event.type' }, { body: 'type' }],
  deliveryId: [{ body: 'event_id' }],
  verify(req, secret, fresh) {
    const ts = header(req, 'x-slack-request-timestamp');
    return isFresh(ts, fresh) && matchesAny(hmac('sha256', secret, `v0:${ts}:`, req.body), [afterPrefix(header(req, 'x-slack-signature'), 'v0=')], 'hex');
  },
} satisfies Provider;
