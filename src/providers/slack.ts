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
  // https://api.slack.com/events/url_verification: answered with the challenge, never an event.
  handshake(body) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      return null;
    }
    const p = parsed as { type?: unknown; challenge?: unknown } | null;
    return p !== null && typeof p === 'object' && p.type === 'url_verification' && typeof p.challenge === 'string' ? { challenge: p.challenge } : null;
  },
  verify(req, secret, fresh) {
    const ts = header(req, 'x-slack-request-timestamp');
    return isFresh(ts, fresh) && matchesAny(hmac('sha256', secret, `v0:${ts}:`, req.body), [afterPrefix(header(req, 'x-slack-signature'), 'v0=')], 'hex');
  },
} satisfies Provider;
