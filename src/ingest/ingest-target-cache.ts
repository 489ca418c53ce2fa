import type pg from 'pg';
import { INGEST_TARGETS_TOPIC, onIngestTargetsChanged, readIngestTargetsNotification, type IngestTargetChange } from '../db/local-changes.ts';
import { log } from '../log.ts';
import type { Runtime } from '../runtime.ts';
import { findIngestTarget, type IngestTarget } from './find-ingest-target.ts';

/** How long a process keeps a webhook's lookup at most (every use is checked anyway: see below). */
const MAX_AGE_MS = 60_000;
const MAX_ENTRIES = 10_000;

export { INGEST_TARGETS_TOPIC };

interface Entry {
  target: IngestTarget;
  until: number;
}

/**
 * Webhook lookups for ingest, kept per process and runtime, so that an ingest is one round trip:
 * the statement that stores the event. A management change is seen by the next request of every
 * channel: the process that made it drops the lookups it changed before it answers
 * (ingestTargetsChanged in db/local-changes.ts, called by every management writer), and
 * every process drops them when the change's notification arrives (watchIngestTargetChanges,
 * well under a second after the commit). Lookups are kept only while this process listens for
 * those notifications: losing the LISTEN connection drops them all, and none is kept until it is
 * back. A lookup read while a change came in is used but not kept.
 *
 * A kept lookup is still never trusted blindly: the ingest statement stores the event only while
 * the webhook's config_version is still the one read (migration ingest_target_version raises it
 * on every change to what the lookup reads, from any writer), and a request refused on a kept
 * lookup is decided again on a fresh one (see acceptEvent and decide). Secrets in a rotation's
 * grace period end the keeping when they expire.
 */
export class IngestTargetCache {
  private entries = new Map<string, Entry>();
  /** Raised by every change seen without a version: a lookup read across such a change is not kept (it may predate it). */
  private generation = 0;
  /**
   * The highest config_version notified per publicId (forgetPublicIds with a version): a lookup
   * read across that notification is kept only when it is at least that version.
   */
  private notified = new Map<string, number>();
  /** Whether lookups may be kept: only while this process hears of every change (see watchIngestTargetChanges). */
  private keeping = false;

  /**
   * The kept lookup if any (`kept`: then a refusal must be decided again on a fresh one), else a
   * fresh one, read on `db` (default the pool; a caller holding a connection passes it, so it
   * never waits for a second one while holding the first).
   */
  async get(rt: Pick<Runtime, 'db'>, publicId: string, db?: pg.Pool | pg.PoolClient): Promise<{ target: IngestTarget | null; kept: boolean }> {
    const entry = this.entries.get(publicId);
    if (entry && Date.now() < entry.until) return { target: entry.target, kept: true };
    return { target: await this.fresh(rt, publicId, db), kept: false };
  }

  /** Reads the webhook now (on `db`, default the pool) and keeps what was read, unless a change came in meanwhile. */
  async fresh(rt: Pick<Runtime, 'db'>, publicId: string, db: pg.Pool | pg.PoolClient = rt.db.pool): Promise<IngestTarget | null> {
    this.entries.delete(publicId);
    const generation = this.generation;
    const target = await findIngestTarget(db, publicId);
    if (!target || !this.keeping || generation !== this.generation || (this.notified.get(publicId) ?? -1) > target.configVersion) return target;
    if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
    const until = Math.min(Date.now() + MAX_AGE_MS, target.secretsExpireAt?.getTime() ?? Infinity);
    this.entries.set(publicId, { target, until });
    return target;
  }

  /**
   * `decide(target)` on the kept lookup, and when it throws (a refusal) on a fresh one: for a
   * channel that refuses before acceptEvent does (SMTP's RCPT, a form post before its upload is
   * read). Unknown or archived is a refusal too (NotFound from `decide`).
   */
  async decide<T>(rt: Pick<Runtime, 'db'>, publicId: string, decide: (target: IngestTarget | null) => T | Promise<T>): Promise<T> {
    const { target, kept } = await this.get(rt, publicId);
    if (!kept) return decide(target);
    try {
      return await decide(target);
    } catch {
      return decide(await this.fresh(rt, publicId));
    }
  }

  /** Whether a lookup of `publicId` is kept now (tests and diagnostics). */
  has(publicId: string): boolean {
    return this.entries.has(publicId);
  }

  /**
   * Drops the lookups of these publicIds; with `version` (the config_version the change made),
   * only those read before it: a lookup read since (by this process, which dropped its own
   * change's lookups before answering) is kept.
   */
  forgetPublicIds(publicIds: Iterable<string>, version?: number): void {
    if (version === undefined) {
      this.generation++;
      for (const id of publicIds) this.entries.delete(id);
      return;
    }
    if (this.notified.size >= MAX_ENTRIES) {
      // Forgotten: a lookup read across this is not kept.
      this.notified.clear();
      this.generation++;
    }
    for (const id of publicIds) {
      this.notified.set(id, Math.max(this.notified.get(id) ?? -1, version));
      const entry = this.entries.get(id);
      if (entry && entry.target.configVersion < version) this.entries.delete(id);
    }
  }

  /** Drops the lookups of a webhook, or of every webhook of a project. */
  forget(which: IngestTargetChange): void {
    this.generation++;
    for (const [publicId, { target }] of this.entries) {
      if ('webhookId' in which ? target.webhookId === which.webhookId : target.projectId === which.projectId) this.entries.delete(publicId);
    }
  }

  /** Drops every lookup. */
  clear(): void {
    this.generation++;
    this.entries.clear();
    this.notified.clear();
  }

  /** Starts or stops keeping lookups (dropping what is kept either way). */
  setKeeping(keeping: boolean): void {
    this.keeping = keeping;
    this.clear();
  }
}

// Per database handle (one runtime's), so a service function that holds only `rt.db` reaches the same cache.
const caches = new WeakMap<object, IngestTargetCache>();

export function ingestTargets(rt: Pick<Runtime, 'db'>): IngestTargetCache {
  let cache = caches.get(rt.db);
  if (!cache) {
    const created = (cache = new IngestTargetCache());
    caches.set(rt.db, created);
    // A change this process committed: dropped before it is answered (db/local-changes.ts).
    onIngestTargetsChanged(rt.db, (change) => created.forget(change));
  }
  return cache;
}

/**
 * Keeps this process's ingest lookups in step with changes made anywhere: drops a webhook's
 * lookup when its change is notified (INGEST_TARGETS_TOPIC), keeps lookups only while the LISTEN
 * connection is in place, and drops them all when it is lost. Returns the stop function.
 */
export function watchIngestTargetChanges(rt: Pick<Runtime, 'db' | 'pubsub'>): () => void {
  const cache = ingestTargets(rt);
  const changes = rt.pubsub.subscribe<string[]>(INGEST_TARGETS_TOPIC, (p) => {
    const { publicIds, version } = readIngestTargetsNotification(p);
    // Dropped as the notification is dispatched, not when this loop gets to it.
    if (publicIds) cache.forgetPublicIds(publicIds, version);
    else cache.clear();
    return undefined;
  });
  const unwatch = rt.pubsub.onListening((listening) => {
    if (!listening) log.warn('ingest lookups are read for every request until the pubsub connection is back');
    cache.setKeeping(listening);
  });
  cache.setKeeping(rt.pubsub.listening);
  return () => {
    unwatch();
    cache.setKeeping(false);
    void changes.return?.();
  };
}
