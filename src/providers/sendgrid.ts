import type { Provider } from './provider.ts';
import { ecdsaVerifies, header, isFresh } from './verify.ts';

/** https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features (SendGrid names no tolerance: 5 minutes here, configurable). */
export default {
  id: 'sendgrid',
  name: 'SendGrid',
  secret: 'the verification key (the public key, base64)',
  header: 'X-Twilio-Email-Event-Webhook-Signature, X-Twilio-Email-Event-Webhook-Timestamp',
  scheme: 'ECDSA P-256 / SHA-256 (base64 DER) of `{timestamp}{body}`',
  toleranceSeconds: 300,
  eventType: [{ body: '0.event' }],
  deliveryId: [{ body: '0.sg_event_id' }],
  verify(req, publicKey, fresh) {
    const ts = header(req, 'x-twilio-email-event-webhook-timestamp');
    return isFresh(ts, fresh) && ecdsaVerifies(publicKey, header(req, 'x-twilio-email-event-webhook-signature'), Buffer.concat([Buffer.from(ts!), req.body]));
  },
} satisfies Provider;
