import type { OutboundClient, OutboundResult } from '../../outbound/http-client.ts';
import type { DestinationSend, DestinationSnapshot } from './types.ts';

export const USER_AGENT = 'webhook-service/1.0 (+standard-webhooks)';

/**
 * The `webhook` destination: one HTTP request to the destination's URL with the dispatch
 * headers and the Standard Webhooks signature. Every webhook destination shares the one HTTP
 * client (its keep-alive connections), so unlike the cloud senders it keeps no client per config.
 */
export function createWebhookSender(http: OutboundClient) {
  return {
    send(destination: DestinationSnapshot, req: DestinationSend): Promise<OutboundResult> {
      const config = (destination.config ?? {}) as { url?: string; method?: string };
      // Snapshots from before destinations had a config carry the URL at the top.
      const url = config.url ?? (destination as { url?: string }).url ?? '';
      return http.send({
        url,
        method: config.method ?? 'POST',
        headers: { 'user-agent': USER_AGENT, ...req.dispatch.headers, ...req.signing },
        body: req.dispatch.body,
        timeoutMs: req.timeoutMs,
      });
    },
  };
}
