import type { PgPubSub } from '../../db/pubsub.ts';

// A process that runs both halves (`npm start`) hands over between its own runner and its own
// listen sessions in memory, without the two NOTIFYs; other processes are reached by pub/sub.
const handlers = new WeakMap<PgPubSub, Map<string, (payload: unknown) => void>>();

/** Receives, in this process, what this process sends to `topic` (pub/sub brings the rest). */
export function receiveLocally(pubsub: PgPubSub, topic: string, fn: (payload: unknown) => void): () => void {
  let map = handlers.get(pubsub);
  if (!map) handlers.set(pubsub, (map = new Map()));
  map.set(topic, fn);
  return () => void map.delete(topic);
}

/** Whether `topic` is received by this process itself. */
export function isLocal(pubsub: PgPubSub, topic: string): boolean {
  return handlers.get(pubsub)?.has(topic) ?? false;
}

/** To this process's own receiver of `topic` when it has one (on the next tick), else by NOTIFY. */
export function sendTo(pubsub: PgPubSub, topic: string, payload: unknown): Promise<void> {
  const fn = handlers.get(pubsub)?.get(topic);
  if (!fn) return pubsub.publish(topic, payload);
  queueMicrotask(() => fn(payload));
  return Promise.resolve();
}
