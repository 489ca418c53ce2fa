import pg from 'pg';
import { OWN_APPLICATION_NAME } from './session-name.ts';
import { pubsubLag } from '../prom.ts';
import { log } from '../log.ts';
import { stopSignalledAt } from '../stop-signal.ts';

const CHANNEL = 'app_events';
// NOTIFY payloads are capped at 8000 bytes; larger messages travel as a reference.
const MAX_INLINE = 7_500;

type Listener = (payload: unknown) => void;

const TOPIC_PREFIX = '{"t":"';
/** The topic of a payload as publishers write it (topic first, no escapes in it); undefined when it cannot be read off. */
function leadingTopic(raw: string): string | undefined {
  if (!raw.startsWith(TOPIC_PREFIX)) return undefined;
  const end = raw.indexOf('"', TOPIC_PREFIX.length);
  if (end < 0) return undefined;
  const topic = raw.slice(TOPIC_PREFIX.length, end);
  return topic.includes('\\') ? undefined : topic;
}
/** Loads a payload that was too large to travel inline, once per receiving process. */
export type RefLoader = (topic: string, ref: string) => Promise<unknown>;

/**
 * Cross-process publish/subscribe over PostgreSQL LISTEN/NOTIFY. One listening
 * connection per process; local subscribers are fanned out in memory. A publish
 * from any process (API or worker) reaches subscribers on every process.
 */
export class PgPubSub {
  private listeners = new Map<string, Set<Listener>>();
  private client: pg.Client | undefined;
  private connecting: Promise<void> | undefined;
  private closed = false;
  private refLoaders = new Map<string, RefLoader>();
  private watchers = new Set<(listening: boolean) => void>();
  private up = false;

  constructor(
    private readonly url: string,
    private readonly pool: pg.Pool,
  ) {}

  /** Registers how to load large payloads for topics starting with `prefix`. */
  onRef(prefix: string, loader: RefLoader) {
    this.refLoaders.set(prefix, loader);
  }

  async publish(topic: string, payload: unknown, ref?: string): Promise<void> {
    // `a`: when it was published, for the lag this process's receivers see (relay_pubsub_lag_seconds).
    let text = JSON.stringify({ t: topic, p: payload, a: Date.now() });
    if (Buffer.byteLength(text) > MAX_INLINE) {
      if (!ref) throw new Error(`pubsub payload for ${topic} too large and no ref given`);
      text = JSON.stringify({ t: topic, r: ref, a: Date.now() });
    }
    await this.pool.query('SELECT pg_notify($1, $2)', [CHANNEL, text]);
  }

  /**
   * Whether the LISTEN connection is in place now: while it is not, changes published meanwhile
   * never reach this process (what a process keeps on the strength of them must not be trusted).
   */
  get listening(): boolean {
    return this.up;
  }

  /**
   * Calls `fn(true)` each time the LISTEN is in place (first, and after a reconnection) and
   * `fn(false)` each time it is lost, synchronously with the event; returns the unsubscribe.
   */
  onListening(fn: (listening: boolean) => void): () => void {
    this.watchers.add(fn);
    return () => void this.watchers.delete(fn);
  }

  private setListening(up: boolean) {
    if (this.up === up) return;
    this.up = up;
    for (const fn of this.watchers) {
      try {
        fn(up);
      } catch (err) {
        log.error({ err }, 'pubsub listening watcher failed');
      }
    }
  }

  /** Starts listening; resolves once the LISTEN is in place. */
  async start(): Promise<void> {
    this.connecting ??= this.connect();
    return this.connecting;
  }

  private async connect(): Promise<void> {
    // Keepalive: a connection that died without a word (a host gone, a NAT forgetting it) ends in an error.
    const client = new pg.Client({ connectionString: this.url, application_name: OWN_APPLICATION_NAME, keepAlive: true, keepAliveInitialDelayMillis: 10_000 });
    client.on('notification', (msg) => void this.dispatch(msg.payload ?? ''));
    let lost = false;
    const onLost = (err?: Error) => {
      if (lost) return;
      lost = true;
      const wasUp = this.client === client;
      if (wasUp) (this.client = undefined), this.setListening(false);
      if (this.closed) return;
      if (wasUp && stopSignalledAt()) log.info({ err: err?.message ?? 'connection ended' }, 'pubsub connection ended by the stop; reconnecting until it is closed');
      else if (wasUp) log.warn({ err: err?.message ?? 'connection ended' }, 'pubsub connection lost; reconnecting');
      else log.debug({ err: err?.message }, 'pubsub connection failed; trying again');
      this.connecting = undefined;
      client.end().catch(() => {});
      setTimeout(() => void this.start().catch(() => {}), 500).unref();
    };
    client.on('error', onLost);
    client.on('end', () => onLost());
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
    } catch (err) {
      // A failed (re)connection tries again, as a lost one does.
      onLost(err as Error);
      throw err;
    }
    if (this.closed) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    this.setListening(true);
  }

  private async dispatch(raw: string) {
    // Every process receives every change; most have no subscriber for most topics. The topic
    // leads each payload ({"t":"…",…}), so those are dropped without parsing the payload.
    const topic = leadingTopic(raw);
    if (topic !== undefined && !this.listeners.get(topic)?.size) return;
    let msg: { t: string; p?: unknown; r?: string; a?: unknown };
    try {
      msg = JSON.parse(raw);
    } catch {
      return;
    }
    if (typeof msg.a === 'number') pubsubLag.observe(Math.max(0, Date.now() - msg.a) / 1000);
    const set = this.listeners.get(msg.t);
    if (!set || set.size === 0) return;
    let payload = msg.p;
    if (msg.r !== undefined) {
      const loader = [...this.refLoaders].find(([prefix]) => msg.t.startsWith(prefix))?.[1];
      if (!loader) return;
      try {
        payload = await loader(msg.t, msg.r);
      } catch (err) {
        log.warn({ err, topic: msg.t }, 'pubsub ref load failed');
        return;
      }
    }
    for (const fn of set) fn(payload);
  }

  /**
   * An async iterator of the topic's payloads, ended when the consumer returns. `select`
   * filters and maps each payload synchronously as it is dispatched (undefined skips it), so
   * a thousand subscribers cost no extra async layers per event.
   */
  subscribe<T>(topic: string, select?: (payload: unknown) => T | undefined): AsyncIterableIterator<T> {
    const queue: T[] = [];
    let wake: (() => void) | undefined;
    let done = false;
    const listener: Listener = (p) => {
      const v = select ? select(p) : (p as T);
      if (v === undefined) return;
      queue.push(v);
      wake?.();
    };
    let set = this.listeners.get(topic);
    if (!set) this.listeners.set(topic, (set = new Set()));
    set.add(listener);
    void this.start().catch((err) => log.error({ err }, 'pubsub listen failed'));
    const stop = () => {
      done = true;
      set!.delete(listener);
      if (set!.size === 0) this.listeners.delete(topic);
      wake?.();
    };
    const iterator: AsyncIterableIterator<T> = {
      [Symbol.asyncIterator]() {
        return iterator;
      },
      async next() {
        while (!done && queue.length === 0) await new Promise<void>((r) => (wake = r));
        wake = undefined;
        if (queue.length > 0) return { value: queue.shift()!, done: false };
        return { value: undefined, done: true };
      },
      async return() {
        stop();
        return { value: undefined, done: true };
      },
      async throw(err) {
        stop();
        throw err;
      },
    };
    return iterator;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.watchers.clear();
    this.setListening(false);
    for (const set of this.listeners.values()) set.clear();
    this.listeners.clear();
    const c = this.client;
    this.client = undefined;
    if (c) await c.end().catch(() => {});
  }
}
