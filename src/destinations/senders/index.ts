import type { OutboundResult } from '../../deliveries/outbound-http.ts';
import { log } from '../../log.ts';
import { destinationCredentials, type DestinationSnapshot, type DestinationType } from '../config.ts';
import type { AwsCredentials } from './aws-client.ts';
import { createEventBridgeSender, type EventBridgeConfig } from './eventbridge.ts';
import { createObjectStorageSender, type ObjectStorageConfig } from './object-storage.ts';
import { createPubSubSender, type PubSubConfig, type ServiceAccountKey } from './pubsub.ts';
import { createSqsSender, type SqsConfig } from './sqs.ts';
import type { DestinationSend, DestinationSender, SenderOptions } from './types.ts';

export type { DestinationSend } from './types.ts';

type CloudType = Exclude<DestinationType, 'webhook'>;

const FACTORIES: Record<CloudType, (config: any, credentials: any, opts: SenderOptions) => DestinationSender> = {
  aws_sqs: (c: SqsConfig, k: AwsCredentials | null, o) => createSqsSender(c, k, o),
  aws_eventbridge: (c: EventBridgeConfig, k: AwsCredentials | null, o) => createEventBridgeSender(c, k, o),
  gcp_pubsub: (c: PubSubConfig, k: ServiceAccountKey | null, o) => createPubSubSender(c, k, o),
  object_storage: (c: ObjectStorageConfig, k: AwsCredentials | null, o) => createObjectStorageSender(c, k, o),
};

/** Distinct destinations whose clients (connections, credentials) are kept; the least recently used goes first. */
const MAX_CLIENTS = 64;

interface Entry {
  sender: DestinationSender;
  inFlight: number;
  evicted: boolean;
}

/**
 * The senders for the non-HTTP destination types, one client per destination config and
 * credentials (the snapshot's stored config, credentials still sealed, is the key: a changed
 * destination gets a new client, an unchanged one reuses its connections across deliveries).
 */
export function createDestinationSenders(opts: SenderOptions & { maxClients?: number }) {
  const max = Math.max(1, opts.maxClients ?? MAX_CLIENTS);
  const entries = new Map<string, Entry>();

  const close = (entry: Entry) => entry.sender.close().catch((err) => log.warn({ err }, 'could not close a destination client'));

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
      entry = { sender: factory(config, destinationCredentials(destination), opts), inFlight: 0, evicted: false };
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
    /** Sends one delivery to a non-HTTP destination; never throws. */
    async send(destination: DestinationSnapshot, req: DestinationSend): Promise<OutboundResult> {
      let entry: Entry;
      try {
        entry = acquire(destination);
      } catch (err) {
        // The snapshot cannot make a client (unknown type, unreadable credentials): no attempt can succeed.
        return { durationMs: 0, error: `${destination.type}: ${(err as Error).message}`, failure: 'blocked' };
      }
      try {
        return await entry.sender.send(req);
      } catch (err) {
        return { durationMs: 0, error: `${destination.type}: ${(err as Error).message}`, failure: 'network' };
      } finally {
        entry.inFlight--;
        if (entry.evicted && entry.inFlight === 0) void close(entry);
      }
    },
    async close() {
      const all = [...entries.values()];
      entries.clear();
      for (const e of all) e.evicted = true;
      await Promise.all(all.filter((e) => e.inFlight === 0).map(close));
    },
  };
}

export type DestinationSenders = ReturnType<typeof createDestinationSenders>;
