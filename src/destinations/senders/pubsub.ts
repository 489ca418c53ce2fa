import net from 'node:net';
import { PubSub, type ClientConfig, type Topic } from '@google-cloud/pubsub';
import * as grpc from '@grpc/grpc-js';
import type { OutboundResult } from '../../outbound/http-client.ts';
import { checkedAddresses } from '../../outbound/address-guard.ts';
import { elapsedSince, type DestinationSender, type SenderOptions } from './types.ts';

export interface PubSubConfig {
  projectId: string;
  topic: string;
  endpoint?: string;
}

export interface ServiceAccountKey {
  client_email: string;
  private_key: string;
  [k: string]: unknown;
}

/**
 * gRPC status → the HTTP status it is recorded as (Google's own mapping), so the retry policy
 * treats it as it treats HTTP: codes Pub/Sub documents as transient land on 429/5xx.
 * UNAVAILABLE, CANCELLED and DEADLINE_EXCEEDED are transport outcomes: network / timeout.
 */
const GRPC_STATUS: Record<number, [name: string, http: number]> = {
  2: ['UNKNOWN', 500],
  3: ['INVALID_ARGUMENT', 400],
  5: ['NOT_FOUND', 404],
  6: ['ALREADY_EXISTS', 409],
  7: ['PERMISSION_DENIED', 403],
  8: ['RESOURCE_EXHAUSTED', 429],
  9: ['FAILED_PRECONDITION', 400],
  10: ['ABORTED', 503],
  11: ['OUT_OF_RANGE', 400],
  12: ['UNIMPLEMENTED', 501],
  13: ['INTERNAL', 500],
  15: ['DATA_LOSS', 500],
  16: ['UNAUTHENTICATED', 401],
};
const CANCELLED = 1;
const DEADLINE_EXCEEDED = 4;
const UNAVAILABLE = 14;

/** A publish error as an attempt result. */
export function pubsubFailure(err: unknown, durationMs: number, timeoutMs: number): OutboundResult {
  const e = err as Error & { code?: number; details?: string };
  const detail = e?.details || e?.message || String(err);
  if (e?.code === DEADLINE_EXCEEDED) return { durationMs, error: `Pub/Sub Publish: timed out after ${timeoutMs} ms (DEADLINE_EXCEEDED)`, failure: 'timeout' };
  if (e?.code === UNAVAILABLE || e?.code === CANCELLED) {
    return { durationMs, error: `Pub/Sub Publish: ${e.code === UNAVAILABLE ? 'UNAVAILABLE' : 'CANCELLED'}: ${detail}`, failure: 'network' };
  }
  const mapped = typeof e?.code === 'number' ? GRPC_STATUS[e.code] : undefined;
  if (mapped) return { durationMs, statusCode: mapped[1], error: `Pub/Sub Publish: ${mapped[0]}: ${detail} (gRPC ${e.code})`, snippet: mapped[0] };
  return { durationMs, error: `Pub/Sub Publish: ${detail}`, failure: 'network' };
}

/**
 * The client settings for this destination. `pinnedAddress` is a checked address of the
 * endpoint's host: the channel connects to that literal (gRPC does no lookup of its own that DNS
 * could answer differently), while the authority and the TLS name check stay the endpoint's host.
 */
export function pubsubClientConfig(config: PubSubConfig, credentials: ServiceAccountKey | null, pinnedAddress: string | null): ClientConfig {
  const emulator = config.endpoint?.startsWith('http://') ?? false;
  const clientConfig: ClientConfig = { projectId: config.projectId };
  if (config.endpoint && pinnedAddress) {
    const url = new URL(config.endpoint);
    const port = Number(url.port) || (emulator ? 80 : 443);
    // servicePath rather than apiEndpoint, which the SDK splits at ':' (no IPv6 literal).
    Object.assign(clientConfig, {
      servicePath: net.isIPv6(pinnedAddress) ? `[${pinnedAddress}]` : pinnedAddress,
      port,
      'grpc.default_authority': `${url.hostname}:${port}`,
    });
    if (emulator) Object.assign(clientConfig, { grpc, sslCreds: grpc.credentials.createInsecure() });
    else Object.assign(clientConfig, { 'grpc.ssl_target_name_override': url.hostname.replace(/^\[|\]$/g, '') });
  } else if (config.endpoint) {
    Object.assign(clientConfig, { apiEndpoint: config.endpoint, emulatorMode: emulator });
  }
  // Known up front, the universe is not asked of the environment: without it the client would
  // probe the GCE metadata server (a link-local address) even for an emulator.
  if (emulator) clientConfig.universeDomain = 'googleapis.com';
  if (!emulator && credentials) clientConfig.credentials = { client_email: credentials.client_email, private_key: credentials.private_key };
  return clientConfig;
}

/** One PubSub client (one gRPC channel) and its topics; `address` is what it is pinned to. */
interface PinnedClient {
  address: string | null;
  pubsub: PubSub;
  /** A Topic carries its call options (the webhook's timeout): one per timeout used with this destination. */
  topics: Map<number, Topic>;
  inFlight: number;
  retired: boolean;
  closed: boolean;
}

/**
 * Publishes the body bytes with the signing headers and the content type as attributes. An
 * http:// endpoint is an emulator (plain channel, no authentication); otherwise the
 * service-account key authenticates, against the endpoint when one is set.
 *
 * A custom endpoint's host is resolved and checked before each publish (unless private
 * destinations are allowed), and the client is pinned to a checked address: kept while that
 * address is still among the host's answers, replaced by one for a new address otherwise.
 */
export function createPubSubSender(config: PubSubConfig, credentials: ServiceAccountKey | null, opts: SenderOptions): DestinationSender {
  const emulator = config.endpoint?.startsWith('http://') ?? false;
  // Without a key the client would look for ambient credentials (the GCE metadata server).
  if (!emulator && !credentials) throw new Error('Pub/Sub needs service-account credentials');
  const pinning = Boolean(config.endpoint) && !opts.allowPrivate;
  const open = (address: string | null): PinnedClient => ({
    address,
    pubsub: new PubSub(pubsubClientConfig(config, credentials, address)),
    topics: new Map(),
    inFlight: 0,
    retired: false,
    closed: false,
  });
  const closing = new Set<Promise<void>>();
  // A replaced client closes once the calls already on it are done.
  const retire = (client: PinnedClient) => {
    client.retired = true;
    if (client.inFlight > 0 || client.closed) return;
    client.closed = true;
    const done = client.pubsub.close().catch(() => {});
    closing.add(done);
    void done.finally(() => closing.delete(done));
  };
  // Unpinned (Google's endpoint, or private destinations allowed): one client for good.
  let current: PinnedClient | null = pinning ? null : open(null);
  let shut = false;

  /**
   * The client to publish with, its call counted (so it is not closed under it): pinned to a
   * checked address of the endpoint, or why there is none.
   */
  async function clientFor(): Promise<PinnedClient | { refused: string }> {
    if (pinning && !shut) {
      const checked = await checkedAddresses(config.endpoint!, opts.allowPrivate);
      if ('refused' in checked) return checked;
      if (!current?.address || !checked.addresses.includes(current.address)) {
        if (current) retire(current);
        current = open(checked.addresses[0]);
      }
    }
    if (!current) throw new Error('the sender is closed');
    current.inFlight++;
    return current;
  }

  const topicFor = (client: PinnedClient, timeoutMs: number) => {
    let topic = client.topics.get(timeoutMs);
    if (!topic) {
      topic = client.pubsub.topic(config.topic, {
        // Concurrent deliveries share a call; each still gets its own message id or error.
        batching: { maxMessages: 100, maxMilliseconds: 1 },
        // One call per delivery attempt: the webhook's retry policy does the retrying.
        gaxOpts: { timeout: timeoutMs, retry: null },
      });
      client.topics.set(timeoutMs, topic);
    }
    return topic;
  };
  return {
    async send(req) {
      const started = performance.now();
      const client = await clientFor().catch((err: Error) => err);
      if (client instanceof Error) return { durationMs: elapsedSince(started), error: `Pub/Sub Publish: ${client.message}`, failure: 'network' };
      if ('refused' in client) return { durationMs: 0, error: `Pub/Sub Publish: ${client.refused}`, failure: 'blocked' };
      const attributes: Record<string, string> = { ...req.signing };
      if (req.dispatch.contentType) attributes['content-type'] = req.dispatch.contentType;
      let timer: NodeJS.Timeout | undefined;
      try {
        // The call's own deadline ends it; this bounds the wait for a batch and a connection too.
        const overdue = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(Object.assign(new Error('no answer'), { code: DEADLINE_EXCEEDED })), req.timeoutMs + 1000);
        });
        const messageId = await Promise.race([topicFor(client, req.timeoutMs).publishMessage({ data: req.dispatch.body, attributes }), overdue]);
        return { durationMs: elapsedSince(started), statusCode: 200, snippet: `messageId=${messageId}` };
      } catch (err) {
        return pubsubFailure(err, elapsedSince(started), req.timeoutMs);
      } finally {
        clearTimeout(timer);
        client.inFlight--;
        if (client.retired) retire(client);
      }
    },
    async close() {
      shut = true;
      if (current) retire(current);
      current = null;
      await Promise.all(closing);
    },
  };
}
