import type pg from 'pg';
import { newId } from '../ids.ts';
import { ATTEMPT_TASK } from './enqueue.ts';
import { deliveryView } from './dto.ts';
import { deliveryNotification, NOTIFY_CHANNEL } from './publish.ts';

export interface AttemptResult {
  deliveryId: string;
  /** The claimed row, for the change notification sent with the result. */
  delivery: Record<string, unknown>;
  attempt: number;
  startedAt: Date;
  durationMs: number | null;
  statusCode: number | null;
  error: string | null;
  responseSnippet: string | null;
  /** succeeded; retry (at nextAttemptAt); failed (to the DLQ). */
  outcome: 'succeeded' | 'retry' | 'failed';
  nextAttemptAt?: Date;
  /** Dispatch snapshot to store with this attempt when it is the first one that built it. */
  dispatch?: { body: Buffer | null; contentType: string | null; headers: Record<string, string> } | null;
}

/**
 * Records an attempt and moves the delivery on, in one statement: the attempt row, the
 * delivery's new state, its next job (retry) or its DLQ entry (failure), the next FIFO
 * head's job when this one finished, and the change notification. Guarded by
 * status = 'delivering' and the attempt number, so a stale runner changes nothing.
 * Returns false when the guard did not hold.
 */
export async function recordAttempt(db: pg.Pool | pg.PoolClient, r: AttemptResult): Promise<boolean> {
  const status = r.outcome === 'succeeded' ? 'succeeded' : r.outcome === 'retry' ? 'retrying' : 'failed';
  const terminal = status !== 'retrying';
  const lastAttempt = { statusCode: r.statusCode, durationMs: r.durationMs, error: r.error, at: r.startedAt.toISOString() };
  const { rows } = await db.query(
    `WITH upd AS (
       UPDATE deliveries SET status = $3, lease_until = NULL, next_attempt_at = $4::timestamptz, last_attempt = $5,
              completed_at = CASE WHEN $6::bool THEN now() ELSE NULL END, updated_at = now(),
              dispatch_body = COALESCE($13, dispatch_body), dispatch_content_type = COALESCE($14, dispatch_content_type),
              dispatch_headers = COALESCE($15::jsonb, dispatch_headers)
        WHERE id = $1 AND status = 'delivering' AND attempts = $2
        RETURNING *
     ), att AS (
       INSERT INTO delivery_attempts (id, delivery_id, number, started_at, duration_ms, status_code, error, response_snippet, outcome)
       SELECT $7, id, $2, $8::timestamptz, $9, $10, $11, $12, $16 FROM upd
       ON CONFLICT (delivery_id, number) DO NOTHING
     ), dlq AS (
       INSERT INTO dlq_entries (id, project_id, webhook_id, delivery_id, reason)
       SELECT $17, project_id, webhook_id, id, COALESCE($11, 'HTTP ' || $10::text) FROM upd WHERE upd.status = 'failed'
       ON CONFLICT (delivery_id) DO NOTHING
     ), retry_job AS (
       SELECT graphile_worker.add_job($18, json_build_object('deliveryId', id), run_at := $4::timestamptz, job_key := 'del:' || id, max_attempts := 25)
         FROM upd WHERE upd.status = 'retrying'
     ), next_head AS (
       SELECT graphile_worker.add_job($18, json_build_object('deliveryId', n.id), job_key := 'del:' || n.id, max_attempts := 25)
         FROM upd
         JOIN webhooks w ON w.id = upd.webhook_id AND w.delivery_mode = 'strict_fifo' AND w.status = 'active'
         CROSS JOIN LATERAL (
           SELECT x.id FROM deliveries x
            WHERE x.webhook_id = upd.webhook_id AND x.status IN ('queued','scheduled','retrying') AND x.id <> upd.id
            ORDER BY x.seq LIMIT 1) n
        WHERE upd.status <> 'retrying'
     ), notified AS (
       SELECT pg_notify($19, $20) FROM upd
     )
     SELECT upd.id, (SELECT count(*) FROM retry_job) AS r, (SELECT count(*) FROM next_head) AS h,
            (SELECT count(*) FROM notified) AS notified
       FROM upd`,
    [
      r.deliveryId,
      r.attempt,
      status,
      r.outcome === 'retry' ? r.nextAttemptAt : null,
      JSON.stringify(lastAttempt),
      terminal,
      newId('att'),
      r.startedAt,
      r.durationMs,
      r.statusCode,
      r.error,
      r.responseSnippet,
      r.dispatch?.body ?? null,
      r.dispatch?.contentType ?? null,
      r.dispatch ? JSON.stringify(r.dispatch.headers) : null,
      r.outcome,
      newId('dlq'),
      ATTEMPT_TASK,
      NOTIFY_CHANNEL,
      deliveryNotification(
        deliveryView({
          ...r.delivery,
          status,
          next_attempt_at: r.outcome === 'retry' ? r.nextAttemptAt : null,
          last_attempt: lastAttempt,
          completed_at: terminal ? new Date() : null,
        }),
      ),
    ],
  );
  if (rows.length === 0) return false;
  // Release the webhook's in-flight slot in its own short statement: inside the one above it
  // would keep the webhook row locked for that whole statement, serialising every result of
  // the webhook. A crash in between leaks the slot until the sweeper reconciles it.
  await db.query('UPDATE webhooks SET in_flight = GREATEST(in_flight - 1, 0) WHERE id = $1', [(r.delivery as any).webhook_id]);
  return true;
}
