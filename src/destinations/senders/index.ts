import { createOutboundClient, type OutboundResult } from '../../outbound/http-client.ts';
import { log } from '../../log.ts';
import { destinationCredentials, type DestinationSnapshot } from '../config.ts';
import { DESTINATION_PACKS, findDestinationPack } from '../packs/index.ts';
import type { ClientPerConfig, SharedSender } from '../packs/pack.ts';
import type { DestinationSend, DestinationSender, SenderOptions } from './types.ts';
import type { ListenChannel } from './cli.ts';

export type { DestinationSend } from './types.ts';
export type { ListenChannel } from './cli.ts';

/** Distinct destinations whose clients (connections, credentials) are kept; the least recently used goes first. */
const MAX_CLIENTS = 64;

interface Entry {
  key: string;
  sender: Promise<DestinationSender>;
  inFlight: number;
  evicted: boolean;
}

/**
 * The senders of every destination type, from the packs (packs/index.ts). A shared sender is made
 * once: `webhook` shares one HTTP client; `cli` hands deliveries to `relay listen` sessions through
 * `listen` (the process's database and pub/sub; without it, every cli attempt fails `no listener
 * connected`). The other types get one client per destination config and credentials (the
 * snapshot's stored config, credentials still sealed, is the key: a changed destination gets a new
 * client, an unchanged one reuses its connections across deliveries); each SDK is loaded when a
 * destination of its type first sends: together they add more than a second to the start of a
 * process, which deployments without such destinations need not pay.
 */
export function createDestinationSenders(opts: SenderOptions & { maxClients?: number; listen?: ListenChannel }) {
  const max = Math.max(1, opts.maxClients ?? MAX_CLIENTS);
  const http = createOutboundClient({ allowPrivate: opts.allowPrivate });
  const ctx = { ...opts, http };
  const shared = new Map(
    DESTINATION_PACKS.filter((p) => p.sender.kind === 'shared').map((p) => [p.type as string, (p.sender as SharedSender).create(ctx)]),
  );
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
      const sender = findDestinationPack(destination.type)?.sender;
      if (sender?.kind !== 'client') throw new Error(`destination type ${destination.type} has no sender`);
      const { credentialsEnc: _sealed, ...config } = destination.config ?? {};
      const credentials = destinationCredentials(destination);
      if (!credentials && (sender as ClientPerConfig).ambientCredentials && !opts.allowAmbientCredentials) {
        throw new Error('the destination has no credentials, and this deployment does not lend its own (ALLOW_AMBIENT_CLOUD_CREDENTIALS)');
      }
      entry = { key, sender: sender.open(config, credentials, opts), inFlight: 0, evicted: false };
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
      const sharedSender = shared.get(destination.type ?? 'webhook');
      if (sharedSender) return sharedSender.send(destination, req);
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
    /**
     * Ends the HTTP requests of every `webhook` send still open, at once, as interrupted, and every
     * later one before it is made (a stopping runner: see OutboundClient.interrupt). A cloud SDK's
     * call, or a hand-off a `relay listen` session is running, would go on without the runner (its
     * attempt then sent twice): those end by their own timeouts. Answers how many were open.
     */
    interrupt: (reason: string): number => http.interrupt(reason),
    async close() {
      http.close();
      for (const sender of shared.values()) await sender.close?.();
      const all = [...entries.values()];
      entries.clear();
      for (const e of all) e.evicted = true;
      await Promise.all(all.filter((e) => e.inFlight === 0).map(close));
    },
  };
}

export type DestinationSenders = ReturnType<typeof createDestinationSenders>;
