import { log } from '../log.ts';
import type { Runtime } from '../runtime.ts';
import { fileStore } from './store.ts';

export const ORPHAN_SWEEP_TASK = 'files__sweep_orphans';
/**
 * graphile-worker's crontab line: once an hour, one job at a time (its job key; graphile-worker's
 * cron schedules each hour once across runners).
 */
export const ORPHAN_SWEEP_CRONTAB = `23 * * * * ${ORPHAN_SWEEP_TASK} ?jobKey=files_sweep_orphans&jobKeyMode=preserve_run_at&max=1`;

/**
 * Content younger than this is never swept: a form or email channel writes a file's content
 * before the event (and the file's row) commits, and a large upload on a slow connection is
 * written for a while (on disk its modification time moves with every write; an S3 object
 * exists only once its upload completed, a moment before the commit).
 */
export const ORPHAN_GRACE_MS = 60 * 60 * 1000;

/** A key storageKey (service.ts) makes: a project id, then a file id. */
const STORED_KEY = /^prj_[0-9a-z]+\/file_[0-9a-z]{26}$/;

export interface OrphanSweepOptions {
  /** Default ORPHAN_GRACE_MS. */
  graceMs?: number;
  /** "Now" for the grace period (tests). */
  now?: Date;
  /** Keys checked per statement and removed per call (default 500). */
  batchSize?: number;
  /** A sweep stops after this long; the next one starts over (default 45 s). */
  budgetMs?: number;
}

export interface OrphanSweepReport {
  /** Keys older than the grace period that were looked at. */
  checked: number;
  /** Content removed: no file row names it, or its row was purged. */
  removed: number;
  complete: boolean;
}

/**
 * Removes file content that no stored file row names (CONTRACT §7: a failed event leaves no
 * orphan). Channels remove what they wrote for an event that was not stored, but a process that
 * dies between writing content and committing its event (or a removal that failed) leaves the
 * content behind, uncounted in file_storage_bytes and unreachable: this pass, from
 * graphile-worker's crontab, finds it in the store (disk or S3), checks its keys against the
 * files table by primary key, a batch at a time, and removes the content older than the grace
 * period whose row is missing or purged.
 */
export async function sweepOrphanFiles(rt: Pick<Runtime, 'db' | 'config'>, opts: OrphanSweepOptions = {}): Promise<OrphanSweepReport> {
  const now = opts.now?.getTime() ?? Date.now();
  const before = new Date(now - (opts.graceMs ?? ORPHAN_GRACE_MS));
  const batchSize = opts.batchSize ?? 500;
  const deadline = Date.now() + (opts.budgetMs ?? 45_000);
  const store = fileStore(rt.config);
  const report: OrphanSweepReport = { checked: 0, removed: 0, complete: true };
  for await (const listed of store.listWrittenBefore(before, batchSize)) {
    // Only what the file store writes (`{projectId}/file_{ULID}`): anything else in a shared bucket or directory is left alone.
    const keys = listed.filter((k) => STORED_KEY.test(k));
    if (keys.length === 0) continue;
    // A key is `{projectId}/{fileId}`: the row is found by its primary key.
    const { rows } = await rt.db.pool.query<{ storage_key: string }>(
      `SELECT storage_key FROM files WHERE id = ANY($1::text[]) AND state = 'stored'`,
      [keys.map((k) => k.slice(k.indexOf('/') + 1))],
    );
    const named = new Set(rows.map((r) => r.storage_key));
    const orphans = keys.filter((k) => !named.has(k));
    if (orphans.length) await store.delete(orphans);
    report.checked += keys.length;
    report.removed += orphans.length;
    if (Date.now() > deadline) {
      report.complete = false;
      break;
    }
  }
  if (report.removed) log.info({ removed: report.removed, checked: report.checked }, 'removed file content without a file row');
  return report;
}
