/**
 * The ingest channels, listed once: one file per channel (its handler and its `IngestChannel`),
 * one line here. The HTTP server mounts the routes of those that take HTTP requests
 * (`ingestRoutes`), the API half starts the listeners of those that run their own
 * (`startIngestServers`); the names are what an event's `channel` (and test-delivery's probe) may be.
 * What the channels share before acceptEvent is admission.ts; a channel never imports a sibling.
 */
import type { Runtime } from '../runtime.ts';
import { cronChannel } from './cron-ingest.ts';
import { emailChannel } from './email-ingest.ts';
import { formChannel } from './form-ingest.ts';
import { httpChannel } from './http-ingest.ts';
import type { ChannelServer, IngestChannel, IngestRouteHandler } from './inbound-event.ts';

export type { ChannelServer } from './inbound-event.ts';

export const INGEST_CHANNELS: readonly IngestChannel[] = [httpChannel, formChannel, emailChannel, cronChannel];

/** http, form, email, cron. */
export const CHANNEL_NAMES = INGEST_CHANNELS.map((c) => c.name) as [string, ...string[]];

/** The channels' HTTP routes, by path prefix, for the server to mount beside /v1 and /graphql. */
export function ingestRoutes(rt: Runtime): Record<string, IngestRouteHandler> {
  return Object.fromEntries(INGEST_CHANNELS.flatMap((c) => (c.route ? [[c.route.prefix, c.route.create(rt)]] : [])));
}

/**
 * Starts the listeners of the channels that run their own (email's SMTP server), with the API
 * half; by channel name. `ports` overrides a channel's configured port (0 picks a free one). If
 * one cannot start, those already started are closed again.
 */
export async function startIngestServers(rt: Runtime, ports: Record<string, number | undefined> = {}): Promise<Record<string, ChannelServer>> {
  const started: Record<string, ChannelServer> = {};
  try {
    for (const c of INGEST_CHANNELS) if (c.server) started[c.name] = await c.server.start(rt, { port: ports[c.name] });
  } catch (err) {
    await Promise.all(Object.values(started).map((s) => s.close()));
    throw err;
  }
  return started;
}

// What the OpenAPI document says of the channels' limits and headers.
export { INGEST_BODY_LIMIT } from './admission.ts';
export { FORM_LIMITS } from './form-ingest.ts';
export { DELIVER_AT_HEADER } from './deliver-at.ts';
