import type { OutboundResult } from '../../outbound/http-client.ts';

/** What is stored in `destinations.config`: the type's fields, credentials sealed as `credentialsEnc`. */
export type StoredConfig = Record<string, unknown> & { credentialsEnc?: string };

/** The destination as the delivery engine gets it on the delivery row (credentials still sealed). */
export interface DestinationSnapshot {
  id: string;
  name: string;
  type: string;
  config: StoredConfig;
}

/** One delivery as a destination sender gets it: what to send, its signature, and whose it is. */
export interface DestinationSend {
  dispatch: { body: Buffer; contentType: string | null; headers: Record<string, string> };
  /** The Standard Webhooks headers: webhook-id, webhook-timestamp, webhook-signature. */
  signing: Record<string, string>;
  /** The webhook's timeoutMs: the whole call, connection included. */
  timeoutMs: number;
  ids: { deliveryId: string; eventId: string; webhookId: string };
}

/**
 * A client for one destination (config + credentials), kept between deliveries. `send` answers
 * in the HTTP sender's shape, so the retry policy classifies both alike; it never throws.
 */
export interface DestinationSender {
  send(req: DestinationSend): Promise<OutboundResult>;
  close(): Promise<void>;
}

export interface SenderOptions {
  allowPrivate: boolean;
  /**
   * AWS destinations without credentials of their own may use the service's (the SDK's default
   * chain: environment, instance role). Off by default: any project could otherwise reach every
   * queue and bus the operator's role can.
   */
  allowAmbientCredentials?: boolean;
}

/** Milliseconds since `started` (performance.now()), rounded. */
export function elapsedSince(started: number): number {
  return Math.round(performance.now() - started);
}
