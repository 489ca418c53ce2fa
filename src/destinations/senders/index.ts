import { createOutboundClient, type OutboundResult } from '../../outbound/http-client.ts';
import { log } from '../../log.ts';
import { destinationCredentials, type DestinationSnapshot, type DestinationType } from '../config.ts';
import type { DestinationSend, DestinationSender, SenderOptions } from './types.ts';
import { createWebhookSender } from './webhook.ts';
import { createCliSender, type ListenChannel } from './cli.ts';
import { NO_LISTENER } from '../listen/wire.ts';

export type { DestinationSend } from './types.ts';
export type { ListenChannel } from './cli.ts';

type CloudType = Exclude<DestinationType, 'webhook' | 'cli'>;
// any: each factory takes its own type's config and credentials (checked when the destination was saved).
type Factory = (config: any, credentials: any, opts: SenderOptions) => Promise<DestinationSender>;

// Each SDK is loaded when a destination of its type first sends: together they add more than a
// second to the start of a process, which deployments without such destinations need not pay.
const FACTORIES: Record<CloudType, Factory> = {
  aws_sqs: async (c, k, o) => (await import('./sqs.ts')).createSqsSender(c, k, o),
  aws_eventbridge: async (c, k, o) => (await import('./eventbridge.ts')).createEventBridgeSender(c, k, o),
  gcp_pubsub: async (c, k, o) => (await import('./pubsub.ts')).createPubSubSender(c, k, o),
  object_storage: async (c, k, o) => (await import('./object-storage.ts')).createObjectStorageSender(c, k, o),
};

/** Distinct destinations whose clients (connections, credentials) are kept; the least recently used goes first. */
const MAX_CLIENTS = 64;

interface Entry {
  key: string;
  sender: Promise<DestinationSender>;
  inFlight: number;
  evicted: boolean;
}

/**
 * The senders of every destination type. `webhook` shares one HTTP client; `cli` hands deliveries
 * to `relay listen` sessions through `listen` (the process's database and pub/sub; without it,
 * every cli attempt fails `no listener connected`); the cloud types get
 * one client per destination config and credentials (the snapshot's stored config, credentials
 * still sealed, is the key: a changed destination gets a new client, an unchanged one reuses its
 * connections across deliveries).
 */
export function createDestinationSenders(opts: SenderOptions & { maxClients?: number; listen?: ListenChannel }) {
  const max = Math.max(1, opts.maxClients ?? MAX_CLIENTS);
  const http = createOutboundClient({ allowPrivate: opts.allowPrivate });
  const webhook = createWebhookSender(http);
  const cli = opts.listen ? createCliSender(opts.listen) : undefined;
  const entries = new Map<string, Entry>();

  const close = (entry: Entry) =>
    entry.sender.then((sender) => sender.close()).catch((err) => log.warn({ err }, 'could not close a destination client'));

  function acquire(destination: DestinationSnapshot): Entry {
    const key = `${destination.type}\n${JSON.stringify(destination.config ?? {})}`;
    let entry = entries.get(key);
    if (entry) {
      entries.delete(key);
      entries.set(key, entry);
    } else {
      const factory = FACTORIES[destination.type as CloudType];
      if (!factory) throw new Error(`destination type ${destination.type} has no sender`);
      const { credentialsEnc: _sealed, ...config } = destination.config ?? {};
      const credentials = destinationCredentials(destination);
      if (!credentials && destination.type.startsWith('aws_') && !opts.allowAmbientCredentials) {
        throw new Error('the destination has no credentials, and this deployment does not lend its own (ALLOW_AMBIENT_CLOUD_CREDENTIALS)');
      }
      entry = { key, sender: factory(config, credentials, opts), inFlight: 0, evicted: false };
      entries.set(key, entry);
      for (const [oldKey, old] of entries) {
        if (entries.size <= max) break;
        entries.delete(oldKey);
        old.evicted = true;
        // A client still sending closes once its calls are done.
        if (old.inFlight === 0) void close(old);
      }
    }
    entry.inFlight++;
    return entry;
  }

  return {
    /** Sends one delivery to its destination; never throws. */
    async send(destination: DestinationSnapshot, req: DestinationSend): Promise<OutboundResult> {
      if ((destination.type ?? 'webhook') === 'webhook') return webhook.send(destination, req);
      if (destination.type === 'cli') return cli ? cli.send(destination, req) : { durationMs: 0, error: NO_LISTENER, failure: 'network' };
      let entry: Entry;
      try {
        entry = acquire(destination);
      } catch (err) {
        // The snapshot cannot make a client (unknown type, unreadable credentials): no attempt can succeed.
        return { durationMs: 0, error: `${destination.type}: ${(err as Error).message}`, failure: 'blocked' };
      }
      let sender: DestinationSender;
      try {
        sender = await entry.sender;
      } catch (err) {
        // A client that cannot be made from this config never will be: not kept, and terminal.
        if (entries.get(entry.key) === entry) entries.delete(entry.key);
        entry.inFlight--;
        return { durationMs: 0, error: `${destination.type}: ${(err as Error).message}`, failure: 'blocked' };
      }
      try {
        return await sender.send(req);
      } catch (err) {
        return { durationMs: 0, error: `${destination.type}: ${(err as Error).message}`, failure: 'network' };
      } finally {
        entry.inFlight--;
        if (entry.evicted && entry.inFlight === 0) void close(entry);
      }
    },
    async close() {
      http.close();
      await cli?.close();
      const all = [...entries.values()];
      entries.clear();
      for (const e of all) e.evicted = true;
      await Promise.all(all.filter((e) => e.inFlight === 0).map(close));
    },
  };
}

export type DestinationSenders = ReturnType<typeof createDestinationSenders>;
