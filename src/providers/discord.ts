import type { Provider } from './provider.ts';
import { ed25519Verifies, header, isFresh } from './verify.ts';

/** https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers (Discord names no tolerance: 5 minutes here, configurable). */
export default {
  id: 'discord',
  name: 'Discord',
  secret: "the application's public key (hex)",
  header: 'X-Signature-Ed25519, X-Signature-Timestamp',
  scheme: 'Ed25519 (hex) of `{timestamp}{body}`',
  toleranceSeconds: 300,
  eventType: [{ body: 'event.type' }, { body: 'type' }],
  deliveryId: [{ body: 'id' }],
  verify(req, publicKey, fresh) {
    const ts = header(req, 'x-signature-timestamp');
    return isFresh(ts, fresh) && ed25519Verifies(publicKey, header(req, 'x-signature-ed25519'), Buffer.concat([Buffer.from(ts!), req.body]));
  },
} satisfies Provider;
