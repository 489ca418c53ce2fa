import type { Provider } from './provider.ts';
import { header, hmac, isFresh, matchesAny } from './verify.ts';

// The characters HubSpot decodes in the URI before signing.
const DECODED: Record<string, string> = { '%3A': ':', '%2F': '/', '%3F': '?', '%40': '@', '%21': '!', '%24': '$', '%27': "'", '%28': '(', '%29': ')', '%2A': '*', '%2C': ',', '%3B': ';' };

/** https://developers.hubspot.com/docs/api/webhooks/validating-requests (v3; the timestamp is in ms, at most 5 minutes old). */
export default {
  id: 'hubspot',
  name: 'HubSpot',
  secret: "the app's client secret",
  header: 'X-HubSpot-Signature-v3, X-HubSpot-Request-Timestamp',
  scheme: 'HMAC-SHA256 (base64) of `{method}{URL}{body}{timestamp}`',
  toleranceSeconds: 300,
  eventType: [{ body: '0.subscriptionType' }, { body: 'subscriptionType' }],
  deliveryId: [{ body: '0.eventId' }, { body: 'eventId' }],
  verify(req, secret, fresh) {
    const ts = header(req, 'x-hubspot-request-timestamp');
    const uri = req.url.replace(/%(3A|2F|3F|40|21|24|27|28|29|2A|2C|3B)/gi, (m) => DECODED[m.toUpperCase()]!);
    return isFresh(ts, fresh, 'ms') && matchesAny(hmac('sha256', secret, req.method, uri, req.body, ts!), [header(req, 'x-hubspot-signature-v3')], 'base64');
  },
} satisfies Provider;
