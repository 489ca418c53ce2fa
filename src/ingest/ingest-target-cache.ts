import type pg from 'pg';
import type { Runtime } from '../runtime.ts';
import { findIngestTarget, type IngestTarget } from './find-ingest-target.ts';

/** How long a process keeps a webhook's lookup at most (every use is checked anyway: see below). */
const MAX_AGE_MS = 60_000;
const MAX_ENTRIES = 10_000;

interface Entry {
  target: IngestTarget;
  until: number;
}

/**
 * Webhook lookups for ingest, kept per process and runtime, so that an ingest is one round trip:
 * the statement that stores the event. A kept lookup is never trusted blindly: that statement
 * stores the event only while the webhook's config_version is still the one read (migration
 * ingest_target_version raises it on every change to what the lookup reads, from any writer),
 * and a request refused on a kept lookup is decided again on a fresh one (see acceptEvent).
 * Secrets in a rotation's grace period end the keeping when they expire.
 */
export class IngestTargetCache {
  private entries = new Map<string, Entry>();

  /**
   * The kept lookup if any (`kept`: then a refusal must be decided again on a fresh one), else a
   * fresh one, read on `db` (default the pool; a caller holding a connection passes it, so it
   * never waits for a second one while holding the first).
   */
  async get(rt: Runtime, publicId: string, db?: pg.Pool | pg.PoolClient): Promise<{ target: IngestTarget | null; kept: boolean }> {
    const entry = this.entries.get(publicId);
    if (entry && Date.now() < entry.until) return { target: entry.target, kept: true };
    return { target: await this.fresh(rt, publicId, db), kept: false };
  }

  /** Reads the webhook now (on `db`, default the pool) and keeps what was read. */
  async fresh(rt: Runtime, publicId: string, db: pg.Pool | pg.PoolClient = rt.db.pool): Promise<IngestTarget | null> {
    this.entries.delete(publicId);
    const target = await findIngestTarget(db, publicId);
    if (!target) return null;
    if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
    const until = Math.min(Date.now() + MAX_AGE_MS, target.secretsExpireAt?.getTime() ?? Infinity);
    this.entries.set(publicId, { target, until });
    return target;
  }
}

const caches = new WeakMap<Runtime, IngestTargetCache>();

export function ingestTargets(rt: Runtime): IngestTargetCache {
  let cache = caches.get(rt);
  if (!cache) caches.set(rt, (cache = new IngestTargetCache()));
  return cache;
}
