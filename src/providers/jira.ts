import type { Provider } from './provider.ts';
import { afterPrefix, header, hmac, matchesAny } from './verify.ts';

/** https://developer.atlassian.com/cloud/jira/platform/webhooks/#secure-admin-webhooks */
export default {
  id: 'jira',
  name: 'Jira / Atlassian',
  secret: "the webhook's secret",
  header: 'X-Hub-Signature',
  scheme: 'HMAC-SHA256 (hex) of the body, `sha256=…`',
  toleranceSeconds: null,
  eventType: [{ body: 'webhookEvent' }],
  deliveryId: [{ header: 'x-atlassian-webhook-identifier' }],
  verify(req, secret) {
    return matchesAny(hmac('sha256', secret, req.body), [afterPrefix(header(req, 'x-hub-signature'), 'sha256=')], 'hex');
  },
} satisfies Provider;
