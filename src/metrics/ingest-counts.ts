import type pg from 'pg';
import type { Runtime } from '../runtime.ts';
import { bucketIso, byBucketKey, forEachBucket, PeriodicWrite, ROLLUP_SIZES, writeRollup } from './rollup.ts';

/**
 * The shard rows a process's once-a-second writes go to: 25 + its pid mod 16. Ingest statements
 * in a caller's transaction count into 9 + their connection's backend pid mod 16
 * (ingestedCountCte), results into shard 8 (src/metrics/rollup.ts); every reader sums a bucket's
 * shards. Apart, so that a flush (one statement, its rows locked in key order) never waits on a
 * transaction holding rows of several webhooks (a mail to several), which could deadlock.
 */
const SHARD = 25 + (process.pid % 16);

interface Count {
  webhook_id: string;
  project_id: string;
  size: number;
  bucket_start: string;
  n: number;
}

/**
 * Events stored by this process, counted into the roll-ups' `ingested` (webhook_metric_buckets)
 * once a second in one statement, whatever the load: an ingest on the pool pays a map update,
 * not four row updates inside its statement (they were a quarter of its time). Only events whose
 * statement committed are added; a process that dies loses at most its last second of counts
 * (the events themselves are unaffected). An event stored in a caller's transaction (cron ticks,
 * form posts with files, mail) is counted in that transaction instead (ingestedCountCte).
 */
export class IngestCounter {
  private counts = new Map<string, Count>();
  private readonly periodic: PeriodicWrite;

  constructor(
    private readonly db: pg.Pool,
    intervalMs = 1_000,
  ) {
    this.periodic = new PeriodicWrite(intervalMs, () => {
      if (this.counts.size === 0) return null;
      const counts = [...this.counts.values()].sort(byBucketKey);
      this.counts = new Map();
      return (final) => this.write(counts, final);
    });
  }

  add(webhookId: string, projectId: string, at = Date.now()): void {
    forEachBucket(webhookId, at, (key, size, start) => {
      const c = this.counts.get(key);
      if (c) c.n++;
      else this.counts.set(key, { webhook_id: webhookId, project_id: projectId, size, bucket_start: bucketIso(start), n: 1 });
    });
    this.periodic.schedule();
  }

  /** Writes what was counted (one statement); waits for a flush under way. `final`: one try (at shutdown: see writeRollup). */
  flush(final = false): Promise<void> {
    return this.periodic.flush(final);
  }

  private write(counts: Count[], final: boolean): Promise<void> {
    return writeRollup(
      () =>
        this.db.query({
          name: 'metrics_ingested_flush',
          text: `INSERT INTO webhook_metric_buckets AS b (webhook_id, size, bucket_start, shard, project_id, ingested)
                 SELECT r.webhook_id, r.size, r.bucket_start, $2, r.project_id, r.n
                   FROM json_to_recordset($1::json) AS r(webhook_id text, project_id text, size int, bucket_start timestamptz, n int)
                   JOIN webhooks w ON w.id = r.webhook_id
                  ORDER BY r.webhook_id, r.size, r.bucket_start
                 ON CONFLICT (webhook_id, size, bucket_start, shard) DO UPDATE SET ingested = b.ingested + excluded.ingested`,
          values: [JSON.stringify(counts), SHARD],
        }),
      final,
    );
  }
}

const counters = new WeakMap<object, IngestCounter>();

/** This runtime's ingest counter (one per process and database). */
export function ingestCounts(rt: Pick<Runtime, 'db'>): IngestCounter {
  let c = counters.get(rt.db);
  if (!c) counters.set(rt.db, (c = new IngestCounter(rt.db.relaxedPool)));
  return c;
}

/** Writes this runtime's counts now (at shutdown, before the pools close: one try). */
export async function flushIngestCounts(rt: Pick<Runtime, 'db'>): Promise<void> {
  await counters.get(rt.db)?.flush(true);
}

/**
 * A CTE of the ingest statement (store-event.ts) counting the events its `stored` CTE inserted,
 * for an event stored in a caller's transaction: counted exactly when that commits, into its
 * connection's shard (as the trigger before it did: two transactions seldom share a row).
 */
export function ingestedCountCte(name: string, stored: string): string {
  return `${name} AS (
  INSERT INTO webhook_metric_buckets AS b (webhook_id, size, bucket_start, shard, project_id, ingested)
  SELECT s.webhook_id, z.size, metrics_bucket(now(), z.size), 9 + pg_backend_pid() % 16, s.project_id, 1
    FROM ${stored} s CROSS JOIN unnest(ARRAY[${ROLLUP_SIZES.join(', ')}]) AS z(size) ORDER BY z.size
  ON CONFLICT (webhook_id, size, bucket_start, shard) DO UPDATE SET ingested = b.ingested + 1
)`;
}
