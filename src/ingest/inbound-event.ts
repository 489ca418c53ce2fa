import type { IncomingMessage, ServerResponse } from 'node:http';
import type { EventFiles } from '../files/service.ts';
import type { EventContext } from '../routing/rules.ts';
import type { Runtime } from '../runtime.ts';

/**
 * An ingest channel: one file each (`*-ingest.ts` here), listed once in channels.ts. A channel
 * that takes HTTP requests names its route: the server mounts it at `prefix` beside /v1 and
 * /graphql, with the handler `create` makes once per process. A channel that listens on a port
 * of its own (email's SMTP server) names its server: the API half starts it (`start`, with the
 * port the app was asked for, else the channel's configured one) and closes it when it stops.
 */
export interface IngestChannel {
  /** The event's `channel`, as routing rules match it. */
  name: string;
  route?: { prefix: string; create(rt: Runtime): IngestRouteHandler };
  server?: { start(rt: Runtime, opts: { port?: number }): Promise<ChannelServer> };
}

/** A channel's own listener, once started. */
export interface ChannelServer {
  port: number;
  close(): Promise<void>;
}

export type IngestRouteHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<void>;

/**
 * What every ingest channel (HTTP, form, email, cron) turns its input into before it calls
 * acceptEvent, the one accept function: authentication, routing, quotas and the durable
 * statement are the same for all of them. Routing sees it as its EventContext, with the body
 * parsed.
 */
export interface InboundEvent extends Omit<EventContext, 'channel' | 'body'> {
  /** The name of the channel it came through (channels.ts: http, form, email, cron). */
  channel: string;
  /** Credentials already removed from `headers`. The bytes as received. */
  body: Buffer;
  /**
   * What the channel received when `body` is built from it (email: the raw message, while `body`
   * is the `email.received` envelope). Kept with the event as its retained source and counted in
   * stored_payload_bytes; never delivered.
   */
  source?: { body: Buffer; contentType: string };
  /**
   * Files whose content the channel (form, email) already wrote to the file store: their rows
   * and file_storage_bytes (checked: 409 when they do not fit) are written by the event's own
   * statement, so the event and its files commit together or not at all. Never delivered.
   */
  files?: EventFiles;
}

/**
 * Whether the channel's events count toward the ingest rate, a limit on outside producers. Cron
 * ticks are the service's own producer (a schedule fires at most once a second): every other
 * quota applies to them, the ingest rate does not.
 */
export function countsTowardIngestRate(channel: InboundEvent['channel']): boolean {
  return channel !== 'cron';
}
