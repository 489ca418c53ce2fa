/**
 * Changes committed by this process that its own per-process caches must see before the change is
 * answered. Other processes learn of the same changes by pub/sub (the triggers' NOTIFY); this is
 * the synchronous, in-process half. Writers (any domain) announce; caches (ingest's lookups)
 * listen, per database handle (one runtime's).
 */

/**
 * The pub/sub topic of changed ingest targets: `{publicIds, v}` (see readIngestTargetsNotification), published by the trigger of
 * migration ingest_target_changes in the transaction of every change to what a lookup reads
 * (delivered on its commit), whoever the writer (an API process, a worker, the admin CLI, psql).
 * Ingest's lookups and the delivery engine's drains listen.
 */
export const INGEST_TARGETS_TOPIC = 'ingest-targets:changed';

/**
 * What a notification of INGEST_TARGETS_TOPIC says: the changed webhooks' publicIds (null: it
 * names none, so every webhook may have changed) and the config_version the change made (none for
 * a deleted webhook: migration ingest_target_change_version).
 */
export function readIngestTargetsNotification(payload: unknown): { publicIds: string[] | null; version: number | undefined } {
  const { publicIds, v } = (payload ?? {}) as { publicIds?: unknown; v?: unknown };
  return {
    publicIds: Array.isArray(publicIds) ? publicIds.filter((id): id is string => typeof id === 'string') : null,
    version: typeof v === 'number' ? v : undefined,
  };
}

/** A change to what ingest's webhook lookups read: one webhook's, or every webhook's of a project. */
export type IngestTargetChange = { webhookId: string } | { projectId: string };

const listeners = new WeakMap<object, Set<(change: IngestTargetChange) => void>>();

/** Calls `fn` for every change announced on `db` (ingestTargetsChanged); returns the unsubscribe. */
export function onIngestTargetsChanged(db: object, fn: (change: IngestTargetChange) => void): () => void {
  let set = listeners.get(db);
  if (!set) listeners.set(db, (set = new Set()));
  set.add(fn);
  return () => void set.delete(fn);
}

/**
 * A management change to what ingest lookups read (a webhook's state, settings, secrets,
 * destinations, routing, quota overrides; a project's tier or quotas) was committed by this
 * process: its lookups are dropped now, so the next request of every channel here reads it. Call
 * after the commit, before answering.
 */
export function ingestTargetsChanged(rt: { db: object }, change: IngestTargetChange): void {
  for (const fn of listeners.get(rt.db) ?? []) fn(change);
}
