import { PubSub, type ClientConfig, type Topic } from '@google-cloud/pubsub';
import type { OutboundResult } from '../../deliveries/outbound-http.ts';
import { refusedResolvedHost } from './endpoint-guard.ts';
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
 * Publishes the body bytes with the signing headers and the content type as attributes. An
 * http:// endpoint is an emulator (plain channel, no authentication); otherwise the
 * service-account key authenticates, against the endpoint when one is set.
 */
export function createPubSubSender(config: PubSubConfig, credentials: ServiceAccountKey | null, opts: SenderOptions): DestinationSender {
  const emulator = config.endpoint?.startsWith('http://') ?? false;
  // Without a key the client would look for ambient credentials (the GCE metadata server).
  if (!emulator && !credentials) throw new Error('Pub/Sub needs service-account credentials');
  const clientConfig: ClientConfig = { projectId: config.projectId };
  if (config.endpoint) Object.assign(clientConfig, { apiEndpoint: config.endpoint, emulatorMode: emulator });
  // Known up front, the universe is not asked of the environment: without it the client would
  // probe the GCE metadata server (a link-local address) even for an emulator.
  if (emulator) clientConfig.universeDomain = 'googleapis.com';
  if (!emulator && credentials) clientConfig.credentials = { client_email: credentials.client_email, private_key: credentials.private_key };
  const pubsub = new PubSub(clientConfig);
  // A Topic carries its call options (the webhook's timeout): one per timeout used with this destination.
  const topics = new Map<number, Topic>();
  const topicFor = (timeoutMs: number) => {
    let topic = topics.get(timeoutMs);
    if (!topic) {
      topic = pubsub.topic(config.topic, {
        // Concurrent deliveries share a call; each still gets its own message id or error.
        batching: { maxMessages: 100, maxMilliseconds: 1 },
        // One call per delivery attempt: the webhook's retry policy does the retrying.
        gaxOpts: { timeout: timeoutMs, retry: null },
      });
      topics.set(timeoutMs, topic);
    }
    return topic;
  };
  return {
    async send(req) {
      const started = performance.now();
      // gRPC resolves names itself (no lookup hook): the endpoint's addresses are checked before each publish.
      const refused = config.endpoint ? await refusedResolvedHost(config.endpoint, opts.allowPrivate).catch((err: Error) => err) : null;
      if (refused instanceof Error) return { durationMs: elapsedSince(started), error: `Pub/Sub Publish: ${refused.message}`, failure: 'network' };
      if (refused) return { durationMs: 0, error: `Pub/Sub Publish: ${refused}`, failure: 'blocked' };
      const attributes: Record<string, string> = { ...req.signing };
      if (req.dispatch.contentType) attributes['content-type'] = req.dispatch.contentType;
      let timer: NodeJS.Timeout | undefined;
      try {
        // The call's own deadline ends it; this bounds the wait for a batch and a connection too.
        const overdue = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(Object.assign(new Error('no answer'), { code: DEADLINE_EXCEEDED })), req.timeoutMs + 1000);
        });
        const messageId = await Promise.race([topicFor(req.timeoutMs).publishMessage({ data: req.dispatch.body, attributes }), overdue]);
        return { durationMs: elapsedSince(started), statusCode: 200, snippet: `messageId=${messageId}` };
      } catch (err) {
        return pubsubFailure(err, elapsedSince(started), req.timeoutMs);
      } finally {
        clearTimeout(timer);
      }
    },
    async close() {
      await pubsub.close();
    },
  };
}
