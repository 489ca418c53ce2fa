import type pg from 'pg';
import { BatchWriter } from '../db/batch-writer.ts';
import { newId } from '../ids.ts';
import { addAttemptJobSql, ATTEMPT_TASK } from './job.ts';
import type { DeliveryRow } from './delivery-view.ts';
import { deliveryListenedSql } from './listeners.ts';
import { deliveryNotificationSql, NOTIFY_CHANNEL } from './notify.ts';
import type { RollupWriter } from '../metrics/rollup.ts';
import { attemptDuration, deliveriesFinished, deliveryOutcomes } from '../prom.ts';

export interface AttemptResult {
  deliveryId: string;
  /** The claimed row (its webhook: results are written per webhook). */
  delivery: DeliveryRow;
  attempt: number;
  startedAt: Date;
  durationMs: number | null;
  statusCode: number | null;
  error: string | null;
  responseSnippet: string | null;
  /** succeeded; retry (at nextAttemptAt); failed (to the DLQ); cancelled (an Automation dropped the event: ends, no DLQ). */
  outcome: 'succeeded' | 'retry' | 'failed' | 'cancelled';
  /** Why no status code came back: a network error, a timeout, or a blocked address (counted as network). */
  failure?: 'network' | 'timeout' | 'blocked';
  nextAttemptAt?: Date;
  /** Dispatch snapshot to store with this attempt when it is the first one that built it. */
  dispatch?: { body: Buffer | null; contentType: string | null; headers: Record<string, string> } | null;
  /** The Automation version that ran for this attempt, recorded on the delivery. */
  automation?: { id: string; version: number } | null;
}

/** The record statement (see recordAttempts). */
const RECORD_SQL = `WITH r AS (
       SELECT * FROM json_to_recordset($1::json)
         AS r(id text, attempt int, status text, next_at timestamptz, last_attempt jsonb, terminal bool, att_id text, started_at timestamptz,
              duration_ms int, status_code int, error text, snippet text, dispatch_body text, dispatch_content_type text,
              dispatch_headers jsonb, outcome text, fk text, automation_id text, automation_version int, dlq_id text)
     ), upd AS (
       UPDATE deliveries d SET status = r.status, lease_until = NULL, next_attempt_at = r.next_at, last_attempt = r.last_attempt,
              completed_at = CASE WHEN r.terminal THEN now() ELSE NULL END, updated_at = now(),
              dispatch_body = COALESCE(decode(r.dispatch_body, 'base64'), d.dispatch_body),
              dispatch_content_type = COALESCE(r.dispatch_content_type, d.dispatch_content_type),
              dispatch_headers = COALESCE(r.dispatch_headers, d.dispatch_headers),
              automation_id = COALESCE(r.automation_id, d.automation_id),
              automation_version = COALESCE(r.automation_version, d.automation_version)
         FROM r
        WHERE d.id = ANY($4::text[]) AND d.id = r.id AND d.attempts = r.attempt AND (d.status = 'delivering') IS TRUE
        RETURNING d.id, d.project_id, d.webhook_id, d.event_id, d.status, d.next_attempt_at, d.created_at, d.replay_of_id, d.slot_lease,
                  -- and the rest of what the change notification says (deliveryNotificationSql)
                  d.destination, d.attempts, d.last_attempt, d.automation_id, d.automation_version, d.idempotency_key, d.completed_at
     ), drain_events AS (
       -- Event drains (src/drains): the outbox rows of this change, in this statement's transaction;
       -- only for projects that have an enabled drain.
       SELECT drain_emit(upd.project_id, upd.webhook_id, k.kind, jsonb_build_object(
                'deliveryId', upd.id, 'eventId', upd.event_id, 'status', upd.status, 'attempt', r.attempt, 'statusCode', r.status_code,
                'durationMs', r.duration_ms, 'error', r.error, 'nextAttemptAt', upd.next_attempt_at))
         FROM upd JOIN r ON r.id = upd.id
        CROSS JOIN LATERAL (VALUES (1, 'attempt.finished'),
                                   (2, CASE upd.status WHEN 'succeeded' THEN 'delivery.succeeded' WHEN 'failed' THEN 'delivery.failed' WHEN 'retrying' THEN 'delivery.retrying' END),
                                   (3, CASE WHEN upd.status = 'failed' THEN 'dlq.added' END)) AS k(n, kind)
        WHERE k.kind IS NOT NULL AND EXISTS (SELECT 1 FROM event_drains dr WHERE dr.project_id = upd.project_id AND dr.enabled)
        ORDER BY upd.id, k.n
     ), att AS (
       INSERT INTO delivery_attempts (id, project_id, delivery_id, number, started_at, duration_ms, status_code, error, response_snippet, outcome)
       SELECT r.att_id, upd.project_id, r.id, r.attempt, r.started_at, r.duration_ms, r.status_code, r.error, r.snippet, r.outcome
         FROM upd JOIN r ON r.id = upd.id
       ON CONFLICT (delivery_id, number) DO NOTHING
     ), dlq AS (
       INSERT INTO dlq_entries (id, project_id, webhook_id, delivery_id, reason)
       SELECT r.dlq_id, upd.project_id, upd.webhook_id, upd.id, COALESCE(r.error, 'HTTP ' || r.status_code::text)
         FROM upd JOIN r ON r.id = upd.id WHERE upd.status = 'failed'
       ON CONFLICT (delivery_id) DO NOTHING
     ), retry_job AS (
       SELECT ${addAttemptJobSql('$2', 'id', 'webhook_id', 'next_attempt_at')}
         FROM upd WHERE upd.status = 'retrying'
     ), next_head AS (
       SELECT ${addAttemptJobSql('$2', 'n.id', 'upd.webhook_id')}
         FROM upd
         JOIN webhooks w ON w.id = upd.webhook_id AND w.delivery_mode = 'strict_fifo' AND w.status = 'active'
         CROSS JOIN LATERAL (
           SELECT x.id FROM deliveries x
            WHERE x.webhook_id = upd.webhook_id AND x.status IN ('queued','scheduled','retrying') AND x.id <> upd.id
            ORDER BY x.seq LIMIT 1) n
        WHERE upd.status <> 'retrying'
     ), notified AS (
       -- deliveryUpdated, when someone listens (listeners.ts): computed here from the updated rows.
       SELECT pg_notify($3, ${deliveryNotificationSql('upd')}) FROM upd WHERE ${deliveryListenedSql('upd.project_id')}
     ), released AS (
       -- The in-flight slots of the one-at-a-time attempts recorded here, given back in the same
       -- statement (the results are all of webhook $5: see recordAttempts). Attempts a drain
       -- started under a slot lease gave theirs back in memory when the answer came: the
       -- webhook's row is not touched for them.
       UPDATE webhooks SET in_flight = GREATEST(in_flight - (SELECT count(*) FROM upd WHERE slot_lease IS NULL), 0)
        WHERE id = $5::text AND EXISTS (SELECT 1 FROM upd WHERE slot_lease IS NULL)
     )
     SELECT upd.id, upd.webhook_id, (extract(epoch FROM now() - upd.created_at) * 1000)::float8 AS age_ms, upd.replay_of_id IS NOT NULL AS replay, (SELECT count(*) FROM retry_job) AS r, (SELECT count(*) FROM next_head) AS h,
            (SELECT count(*) FROM notified) AS notified, (SELECT count(*) FROM drain_events) AS drained
       FROM upd`;

/**
 * Records attempts and moves their deliveries on, in one statement per webhook: the attempt rows,
 * the deliveries' new states, their next jobs (retry) or DLQ entries (failure), each finished FIFO
 * head's successor's job, the change notifications and the in-flight slots given back. Each row
 * is guarded by status = 'delivering' and its attempt number, so a stale runner changes nothing.
 * Answers per result the age of its delivery when recorded (ms, by the database's clock: what
 * completed_at - created_at says) and whether it is a replay (or re-drive: its age is then not
 * an ingest-to-success latency), or null when its guard did not hold.
 */
async function recordAttempts(db: pg.Pool | pg.PoolClient, results: AttemptResult[]): Promise<({ ageMs: number; replay: boolean } | null)[]> {
  if (results.length === 0) return [];
  // The batch travels as one JSON document (json_to_recordset): one native JSON.stringify
  // instead of pg's per-element escaping of a dozen text arrays.
  const batch = results.map((r) => {
    const status = r.outcome === 'succeeded' ? 'succeeded' : r.outcome === 'retry' ? 'retrying' : r.outcome === 'cancelled' ? 'cancelled' : 'failed';
    const terminal = status !== 'retrying';
    const nextAt = r.outcome === 'retry' ? (r.nextAttemptAt ?? null) : null;
    const error = storableText(r.error);
    const lastAttempt = { statusCode: r.statusCode, durationMs: r.durationMs, error, at: r.startedAt.toISOString() };
    return {
      id: r.deliveryId,
      attempt: r.attempt,
      status,
      next_at: nextAt,
      last_attempt: lastAttempt,
      terminal,
      att_id: newId('att'),
      started_at: r.startedAt,
      duration_ms: r.durationMs,
      status_code: r.statusCode,
      error,
      snippet: storableText(r.responseSnippet),
      dispatch_body: r.dispatch?.body ? r.dispatch.body.toString('base64') : null,
      dispatch_content_type: r.dispatch?.contentType ?? null,
      dispatch_headers: r.dispatch ? r.dispatch.headers : null,
      outcome: r.outcome,
      automation_id: r.automation?.id ?? null,
      automation_version: r.automation?.version ?? null,
      fk: r.failure ?? null,
      dlq_id: status === 'failed' ? newId('dlq') : null,
    };
  });
  // One statement per webhook, each giving its webhook's in-flight slots back itself: the counter
  // and the rows it counts ('delivering') then always change together, so the counter never
  // drifts (a crash between two statements cannot leak a slot) and the sweeper can check it
  // against the rows at any time. One statement for several webhooks would lock their rows in
  // an order of its own, and two such statements could deadlock. A drain's results are one
  // webhook's, so a batch is almost always one statement.
  const byWebhook = new Map<string, number[]>();
  results.forEach((r, i) => {
    const list = byWebhook.get(r.delivery.webhook_id);
    if (list) list.push(i);
    else byWebhook.set(r.delivery.webhook_id, [i]);
  });
  const out: ({ ageMs: number; replay: boolean } | null)[] = results.map(() => null);
  for (const [webhookId, indexes] of [...byWebhook].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const { rows } = await db.query({
      name: 'record_attempts',
      text: RECORD_SQL,
      // The ids once more as an array, and the status test out of the indexes' reach: the rows are
      // found by primary key, never by a scan of every 'delivering' entry of the status index
      // (which statistics taken while nothing was in flight make look cheap).
      values: [
        indexes.length === results.length ? JSON.stringify(batch) : JSON.stringify(indexes.map((i) => batch[i])),
        ATTEMPT_TASK,
        NOTIFY_CHANNEL,
        indexes.map((i) => results[i]!.deliveryId),
        webhookId,
      ],
    });
    const recorded = new Map<string, { ageMs: number; replay: boolean }>();
    for (const row of rows) recorded.set(row.id, { ageMs: Number(row.age_ms), replay: row.replay === true });
    for (const i of indexes) out[i] = recorded.get(results[i]!.deliveryId) ?? null;
  }
  return out;
}

/** This process's Prometheus series for a recorded attempt. */
function countAttempt(r: AttemptResult) {
  deliveryOutcomes.inc({ outcome: r.outcome });
  if (r.outcome !== 'retry') deliveriesFinished.inc({ outcome: r.outcome });
  if (r.durationMs !== null) attemptDuration.observe(r.durationMs / 1000);
}

/**
 * Text from a receiver or a network error as PostgreSQL can store it: no NUL characters (text
 * columns refuse them) and no lone surrogates (JSON escapes them, json parsing refuses them).
 */
export function storableText(text: string | null): string | null {
  if (text === null) return null;
  const wellFormed = text.isWellFormed() ? text : text.toWellFormed();
  return wellFormed.includes('\0') ? wellFormed.replaceAll('\0', '\uFFFD') : wellFormed;
}

/**
 * How long a drain's result waits for others to share its record statement when none is being
 * written: at a steady rate of a few hundred events per second each result would otherwise be a
 * statement of its own. The receiver has its answer already and the drain its slot back; only
 * the delivery's status (and its notification) comes this much later. 40 ms saved 7-9 % of
 * `npm start`'s CPU per event at 308/s, but tried twice (sessions 21 and 22) it came with slow
 * seconds at 20 % of the floor, in three of four bench runs for `start:api` + `start:worker`
 * (docs/benchmarks.md), so 10.
 */
const RECORD_LINGER_MS = 10;

/**
 * Gathers the results of attempts finishing at about the same time on this runner into one
 * recordAttempts write (BatchWriter): under load a runner writes many results per round trip and
 * alone it writes each at once. While the database is away (restarting), the results wait and are
 * written when it is back: dropped, their deliveries would hold the webhook's in-flight slots until
 * their leases ran out. A result written after its lease was taken over is refused by the guard.
 */
export class AttemptRecorder {
  private readonly writer: BatchWriter<AttemptResult, boolean>;

  constructor(
    db: pg.Pool,
    maxBatch = 200,
    /** The metrics roll-ups the recorded results go to (none with METRICS_ROLLUPS=off). */
    rollups?: RollupWriter,
  ) {
    const write = async (results: AttemptResult[]) => {
      const recordedAt = Date.now();
      const ages = await recordAttempts(db, results);
      return results.map((r, i) => {
        const age = ages[i];
        if (age === null) return false;
        countAttempt(r);
        rollups?.add({ webhookId: r.delivery.webhook_id, projectId: r.delivery.project_id, outcome: r.outcome, statusCode: r.statusCode, failure: r.failure, ageMs: age.ageMs, replay: age.replay, recordedAt });
        return true;
      });
    };
    this.writer = new BatchWriter(write, {
      maxBatch,
      lingerMs: RECORD_LINGER_MS,
      // A batch the database refused: each result on its own, so one that cannot be written keeps
      // no other from being recorded (unrecorded, a delivery is sent again once its lease runs out).
      onRefused: (results) => Promise.allSettled(results.map(async (r) => (await write([r]))[0]!)),
    });
  }

  /**
   * Resolves once the result is written: false when its guard did not hold (see recordAttempts).
   * A drain's result (its slot went back in memory when the answer came) may wait RECORD_LINGER_MS
   * for others to share its statement; a one-at-a-time attempt's (its in-flight slot, a FIFO
   * successor's job) is written at once.
   */
  record(result: AttemptResult): Promise<boolean> {
    return this.writer.add(result, { wait: result.delivery.slot_lease != null });
  }
}
