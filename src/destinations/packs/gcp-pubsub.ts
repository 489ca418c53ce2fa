import { z } from 'zod';
import { destinationPack, httpUrl, text } from './pack.ts';

// A Google service-account key file, as downloaded (JSON object).
const gcpCredentials = z.object({ client_email: text, private_key: z.string().min(1).max(16_384) }).passthrough();

/** A message on a Pub/Sub topic. */
export default destinationPack({
  type: 'gcp_pubsub',
  label: 'GCP Pub/Sub (Pro)',
  gated: true,
  config: z.object({ projectId: text, topic: text, endpoint: httpUrl.optional(), credentials: gcpCredentials }).strict(),
  sender: { kind: 'client', open: async (c, k, o) => (await import('../senders/pubsub.ts')).createPubSubSender(c, k, o) },
});
