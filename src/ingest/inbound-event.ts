/**
 * What every ingest channel (HTTP, form, email, schedule) turns its input into before it calls
 * acceptEvent, the one accept function: authentication, routing, quotas and the durable
 * statement are the same for all of them.
 */
export interface InboundEvent {
  channel: 'http' | 'form' | 'email' | 'schedule';
  method: string | null;
  path: string | null;
  query: Record<string, unknown>;
  /** Lower-case names, credentials already removed. */
  headers: Record<string, unknown>;
  contentType: string | null;
  body: Buffer;
}

