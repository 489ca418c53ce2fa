import type { EventContext } from '../routing/rules.ts';

/**
 * What every ingest channel (HTTP, form, email, schedule) turns its input into before it calls
 * acceptEvent, the one accept function: authentication, routing, quotas and the durable
 * statement are the same for all of them. Routing sees it as its EventContext, with the body
 * parsed.
 */
export interface InboundEvent extends Omit<EventContext, 'channel' | 'body'> {
  channel: 'http' | 'form' | 'email' | 'schedule';
  /** Credentials already removed from `headers`. The bytes as received. */
  body: Buffer;
}
