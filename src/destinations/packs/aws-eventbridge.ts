import { z } from 'zod';
import { awsCredentials, destinationPack, httpUrl, text } from './pack.ts';

/** An event on an EventBridge bus. */
export default destinationPack({
  type: 'aws_eventbridge',
  label: 'AWS EventBridge (Pro)',
  gated: true,
  config: z
    .object({ eventBusName: text, region: text, source: text, detailType: text, endpoint: httpUrl.optional(), credentials: awsCredentials.optional() })
    .strict(),
  sender: { kind: 'client', ambientCredentials: true, open: async (c, k, o) => (await import('../senders/eventbridge.ts')).createEventBridgeSender(c, k, o) },
});
