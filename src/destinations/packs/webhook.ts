import { z } from 'zod';
import { headerMapSchema } from '../../webhook-config/custom-headers.ts';
import { createWebhookSender } from '../senders/webhook.ts';
import { destinationPack, httpUrl } from './pack.ts';

/** An HTTP request to a URL, signed the Standard Webhooks way; every webhook destination shares the one HTTP client. */
export default destinationPack({
  type: 'webhook',
  label: 'webhook (HTTP)',
  gated: false,
  config: z.object({ url: httpUrl, method: z.enum(['POST', 'PUT', 'PATCH']).default('POST'), headers: headerMapSchema.optional() }).strict(),
  sender: { kind: 'shared', create: (ctx) => createWebhookSender(ctx.http) },
});
