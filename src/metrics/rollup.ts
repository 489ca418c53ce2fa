import type pg from 'pg';
import { log } from '../log.ts';
import { sketchIndex } from './sketch.ts';

/** One recorded attempt, as the roll-ups count it. */
export interface RecordedAttempt {
  webhookId: string;
  projectId: string;
  /** succeeded (the delivery finished), retry, failed (the delivery finished, to the DLQ), cancelled (an Automation dropped the event: not counted). */
  outcome: 'succeeded' | 'retry' | 'failed' | 'cancelled';
  statusCode: number | null;
  failure?: 'network' | 'timeout' | 'blocked';
  /** The delivery's age when the result was recorded (its ingest-to-success latency, for a success), ms. */
  ageMs: number;
  /**
   * A replay or re-drive (its delivery has replay_of_id): counted like any delivery (attempts,
   * statuses, succeeded/failed: succeeded can so exceed the events ingested), but its age is
   * no ingest-to-success latency and stays out of the latency sketch.
   */
  replay?: boolean;
  /** When it was recorded (its bucket). */
  recordedAt: number;
}

interface Bucket {
  webhook_id: string;
  project_id: string;
  size: number;
  bucket_start: string;
  succeeded: number;
  failed: number;
  attempts: number;
  retries: number;
  s2: number;
  s3: number;
  s4: number;
  s5: number;
  net: number;
  tmo: number;
  latency: Record<string, number>;
}

interface Streak {
  webhook_id: string;
  project_id: string;
  /** A success was seen: the streak restarts from `failures`. */
  reset: boolean;
  failures: number;
}

/** One row size per answer bucket of the windows (src/metrics/service.ts WINDOWS). */
export const ROLLUP_SIZES = [60, 900, 7_200, 21_600];

/** Calls `fn` for each roll-up row a count at `at` (ms) goes to: its key in a writer's map, the row size and the bucket's start (epoch seconds: see bucketIso). */
export function forEachBucket(webhookId: string, at: number, fn: (key: string, size: number, start: number) => void): void {
  for (const size of ROLLUP_SIZES) {
    const start = Math.floor(at / 1000 / size) * size;
    fn(`${webhookId}|${size}|${start}`, size, start);
  }
}

/** A bucket's start as its row's bucket_start. */
export const bucketIso = (start: number) => new Date(start * 1000).toISOString();

/** The conflict key's order of webhook_metric_buckets rows, in every writer: two writes lock shared rows in one order (no deadlock). */
export function byBucketKey(x: { webhook_id: string; size: number; bucket_start: string }, y: { webhook_id: string; size: number; bucket_start: string }): number {
  return x.webhook_id < y.webhook_id ? -1 : x.webhook_id > y.webhook_id ? 1 : x.size - y.size || (x.bucket_start < y.bucket_start ? -1 : 1);
}

/**
 * A process's once-a-second roll-up writes (RollupWriter, IngestCounter): the first count after a
 * write starts the timer, one write runs at a time, and the last one (at shutdown) is tried once
 * (writeRollup). `take` hands over what was gathered (gathering starts anew) as its write, or
 * null when there is nothing.
 */
export class PeriodicWrite {
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly intervalMs: number,
    private readonly take: () => ((final: boolean) => Promise<void>) | null,
  ) {}

  /** Something was gathered: written within intervalMs. */
  schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => void this.flush(), this.intervalMs);
    // A process with nothing else to do (a script, a test) does not wait for it.
    this.timer.unref();
  }

  /** Writes what was gathered now; waits for a write under way. `final`: one try. */
  async flush(final = false): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    while (this.flushing) await this.flushing;
    const write = this.take();
    if (!write) return;
    this.flushing = write(final).finally(() => (this.flushing = undefined));
    return this.flushing;
  }
}

/** The failed attempts in a row a stored streak value stands for (see the flush statement). */
export const STREAK_SQL = (column: string) => `(CASE WHEN ${column} < 0 THEN -${column} - 1 ELSE ${column} END)`;

/**
 * The per-webhook roll-ups of recorded results (webhook_metric_buckets, shard 8, and
 * webhook_failure_streaks), gathered by each delivery runner and written once a second in one
 * statement, whatever the load: the delivery path pays a few map updates per result, not a
 * statement. Only results whose record statement committed are added. A runner that dies loses
 * at most its last second of counts (the deliveries themselves are unaffected).
 */
export class RollupWriter {
  private buckets = new Map<string, Bucket>();
  private streaks = new Map<string, Streak>();
  private readonly periodic: PeriodicWrite;

  constructor(
    private readonly db: pg.Pool,
    intervalMs = 1_000,
  ) {
    this.periodic = new PeriodicWrite(intervalMs, () => {
      if (this.buckets.size === 0 && this.streaks.size === 0) return null;
      const buckets = [...this.buckets.values()].sort(byBucketKey);
      const streaks = [...this.streaks.values()].sort((x, y) => (x.webhook_id < y.webhook_id ? -1 : 1));
      this.buckets = new Map();
      this.streaks = new Map();
      return (final) => this.write(buckets, streaks, final);
    });
  }

  add(a: RecordedAttempt): void {
    // An Automation that dropped the event made no attempt: nothing to count.
    if (a.outcome === 'cancelled') return;
    const cls = a.statusCode !== null ? `${Math.floor(a.statusCode / 100)}xx` : a.failure === 'timeout' ? 'timeout' : a.failure ? 'network' : null;
    const latency = a.outcome === 'succeeded' && !a.replay ? String(sketchIndex(a.ageMs)) : null;
    forEachBucket(a.webhookId, a.recordedAt, (key, size, start) => {
      let b = this.buckets.get(key);
      if (!b) {
        b = { webhook_id: a.webhookId, project_id: a.projectId, size, bucket_start: bucketIso(start), succeeded: 0, failed: 0, attempts: 0, retries: 0, s2: 0, s3: 0, s4: 0, s5: 0, net: 0, tmo: 0, latency: {} };
        this.buckets.set(key, b);
      }
      b.attempts++;
      if (a.outcome === 'succeeded') b.succeeded++;
      else if (a.outcome === 'failed') b.failed++;
      else b.retries++;
      if (cls === '2xx') b.s2++;
      else if (cls === '3xx') b.s3++;
      else if (cls === '4xx') b.s4++;
      else if (cls === '5xx') b.s5++;
      else if (cls === 'network') b.net++;
      else if (cls === 'timeout') b.tmo++;
      if (latency !== null) b.latency[latency] = (b.latency[latency] ?? 0) + 1;
    });
    let s = this.streaks.get(a.webhookId);
    if (!s) this.streaks.set(a.webhookId, (s = { webhook_id: a.webhookId, project_id: a.projectId, reset: false, failures: 0 }));
    if (a.outcome === 'succeeded') {
      s.reset = true;
      s.failures = 0;
    } else s.failures++;
    this.periodic.schedule();
  }

  /** Writes what was gathered (one statement); waits for a flush under way. `final`: one try (see writeRollup). */
  flush(final = false): Promise<void> {
    return this.periodic.flush(final);
  }

  private write(buckets: Bucket[], streaks: Streak[], final: boolean): Promise<void> {
    return writeRollup(
      () =>
        this.db.query({
          name: 'metrics_rollup_flush',
          text: `WITH b AS (
                   INSERT INTO webhook_metric_buckets AS m (webhook_id, size, bucket_start, shard, project_id, succeeded, failed, attempts, retries,
                                                           status_2xx, status_3xx, status_4xx, status_5xx, network, timeout, latency)
                   SELECT r.webhook_id, r.size, r.bucket_start, 8, r.project_id, r.succeeded, r.failed, r.attempts, r.retries, r.s2, r.s3, r.s4, r.s5, r.net, r.tmo, r.latency
                     FROM json_to_recordset($1::json) AS r(webhook_id text, project_id text, size int, bucket_start timestamptz, succeeded int, failed int, attempts int,
                          retries int, s2 int, s3 int, s4 int, s5 int, net int, tmo int, latency jsonb)
                     JOIN webhooks w ON w.id = r.webhook_id
                    -- The conflict key's order (byBucketKey): two flushes lock shared rows in one order (no deadlock).
                    ORDER BY r.webhook_id, r.size, r.bucket_start
                   ON CONFLICT (webhook_id, size, bucket_start, shard) DO UPDATE SET
                     succeeded = m.succeeded + excluded.succeeded, failed = m.failed + excluded.failed, attempts = m.attempts + excluded.attempts,
                     retries = m.retries + excluded.retries, status_2xx = m.status_2xx + excluded.status_2xx, status_3xx = m.status_3xx + excluded.status_3xx,
                     status_4xx = m.status_4xx + excluded.status_4xx, status_5xx = m.status_5xx + excluded.status_5xx,
                     network = m.network + excluded.network, timeout = m.timeout + excluded.timeout,
                     latency = metrics_histogram_add(m.latency, excluded.latency)
                   RETURNING 1
                 )
                 -- A streak that restarted (a success was seen) travels as -(failures + 1) and is stored so;
                 -- readers decode a negative v as -v - 1 (STREAK_SQL).
                 INSERT INTO webhook_failure_streaks AS s (webhook_id, project_id, streak, updated_at)
                 SELECT r.webhook_id, r.project_id, CASE WHEN r.reset THEN -r.failures - 1 ELSE r.failures END, now()
                   FROM json_to_recordset($2::json) AS r(webhook_id text, project_id text, reset bool, failures int)
                   JOIN webhooks w ON w.id = r.webhook_id
                  ORDER BY r.webhook_id
                 ON CONFLICT (webhook_id) DO UPDATE SET updated_at = now(),
                   streak = CASE WHEN excluded.streak < 0 THEN excluded.streak ELSE ${STREAK_SQL('s.streak')} + excluded.streak END`,
          values: [JSON.stringify(buckets), JSON.stringify(streaks)],
        }),
      final,
    );
  }

  /** Writes what is left (at shutdown). */
  async stop(): Promise<void> {
    await this.flush(true);
  }
}

/**
 * Runs a roll-up write, tried again a few times (backing off up to 2 s) while the database is
 * unreachable; past that the counts are lost (logged), never the deliveries or events they count.
 * `final` (at shutdown): one try, so that a database already going away (Ctrl-C reaches the
 * embedded PostgreSQL too) does not hold the stop for seconds.
 */
export async function writeRollup(write: () => Promise<unknown>, final = false): Promise<void> {
  for (let delay = 100, tries = 0; ; tries++, delay = Math.min(delay * 2, 2_000)) {
    try {
      await write();
      return;
    } catch (err) {
      if (final || tries >= 5) {
        log.warn({ err }, 'could not write the metrics roll-ups; these counts are lost');
        return;
      }
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
