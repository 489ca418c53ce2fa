import { z } from 'zod';
import { awsCredentials, destinationPack, httpUrl, text } from './pack.ts';

/** A message on an SQS queue (the body as text or base64, the signature as attributes). */
export default destinationPack({
  type: 'aws_sqs',
  label: 'AWS SQS (Pro)',
  gated: true,
  config: z.object({ queueUrl: httpUrl, region: text, endpoint: httpUrl.optional(), credentials: awsCredentials.optional() }).strict(),
  sender: { kind: 'client', ambientCredentials: true, open: async (c, k, o) => (await import('../senders/sqs.ts')).createSqsSender(c, k, o) },
});
