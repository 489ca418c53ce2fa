import { z } from 'zod';
import type { OutboundResult } from '../../outbound/http-client.ts';
import { NO_LISTENER } from '../listen/wire.ts';
import { createCliSender } from '../senders/cli.ts';
import { destinationPack } from './pack.ts';

const noListener = async (): Promise<OutboundResult> => ({ durationMs: 0, error: NO_LISTENER, failure: 'network' });

/**
 * Delivered through `relay listen` (CONTRACT §13): no address, so the server never connects
 * anywhere for it. A process without the listen hand-off fails every attempt `no listener connected`.
 */
export default destinationPack({
  type: 'cli',
  label: 'cli (relay listen, local development)',
  gated: false,
  config: z
    .object({ url: z.undefined({ invalid_type_error: 'a cli destination takes no url: `relay listen WEBHOOK_ID --forward-to URL` sends its deliveries from your machine' }).optional() })
    .strict(),
  sender: { kind: 'shared', create: (ctx) => (ctx.listen ? createCliSender(ctx.listen) : { send: noListener }) },
});
