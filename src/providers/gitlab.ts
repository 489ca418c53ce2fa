import type { Provider } from './provider.ts';
import { header, tokenMatches } from './verify.ts';

/** https://docs.gitlab.com/user/project/integrations/webhooks/#create-a-webhook (secret token) */
export default {
  id: 'gitlab',
  name: 'GitLab',
  secret: "the webhook's secret token",
  header: 'X-Gitlab-Token',
  scheme: 'the secret token itself (no signature)',
  toleranceSeconds: null,
  eventType: [{ header: 'x-gitlab-event' }],
  deliveryId: [{ header: 'idempotency-key' }, { header: 'x-gitlab-event-uuid' }],
  secretHeader: 'x-gitlab-token',
  verify(req, secret) {
    return tokenMatches(header(req, 'x-gitlab-token'), secret);
  },
} satisfies Provider;
