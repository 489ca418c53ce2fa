import type { Provider } from './provider.ts';
import { hmac, isFresh, jsonField, matchesAny } from './verify.ts';

/**
 * https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks: the
 * signature travels in the body (`signature.timestamp`, `.token`, `.signature`; top-level form
 * fields for the legacy form-encoded posts), so this one scheme reads the body to verify it.
 * Mailgun names no tolerance: 5 minutes here, configurable.
 */
export default {
  id: 'mailgun',
  name: 'Mailgun',
  secret: 'the HTTP webhook signing key',
  header: 'body: signature.{timestamp,token,signature}',
  scheme: 'HMAC-SHA256 (hex) of `{timestamp}{token}`',
  toleranceSeconds: 300,
  eventType: [{ body: 'event-data.event' }, { body: 'event' }],
  deliveryId: [{ body: 'event-data.id' }, { body: 'token' }],
  verify(req, secret, fresh) {
    let sig = jsonField(req.body, 'signature') as Record<string, unknown> | undefined;
    if (!sig || typeof sig !== 'object') sig = Object.fromEntries(new URLSearchParams(req.body.toString('utf8')));
    const { timestamp, token, signature } = sig;
    if (typeof timestamp !== 'string' || typeof token !== 'string' || typeof signature !== 'string') return false;
    return isFresh(timestamp, fresh) && matchesAny(hmac('sha256', secret, timestamp, token), [signature], 'hex');
  },
} satisfies Provider;
