import type pg from 'pg';
import { newId } from '../ids.ts';
import { log } from '../log.ts';
import { ATTEMPT_TASK, insertAttemptJobRows } from './job.ts';

export interface NewDelivery {
  projectId: string;
  webhookId: string;
  eventId: string;
  destinationId: string | null;
  /** The destination as routed (type, name, config): reused for every retry and replay. */
  destination: unknown;
  /** When set and in the future, the delivery is `scheduled` and its first attempt waits until then. */
  runAt?: Date | null;
  replayOfId?: string | null;
  replayJobId?: string | null;
  /** For replays: the exact dispatch snapshot to re-send. */
  dispatch?: { body: Buffer | null; contentType: string | null; headers: unknown } | null;
}

/**
 * Inserts a delivery and its first graphile-worker job on `client`, inside the caller's
 * transaction: the delivery is queued exactly when the transaction commits.
 *
 * The job row goes straight into graphile-worker's job table (as its add_job() would write a
 * new key) without add_job()'s NOTIFY: a transaction that sends a NOTIFY holds PostgreSQL's
 * one notification-queue lock from before its commit record until that record is flushed, so
 * durable commits that notify cannot share a WAL flush and ingest would run at one commit per
 * fsync. Ingest, the hot path, writes its delivery in its own statement (storeEvent) and nudges
 * the runners after the commit (JobRunnerNudge); this one, for replays, notifies.
 */
export async function insertDelivery(client: pg.PoolClient | pg.Client, d: NewDelivery): Promise<{ id: string; status: 'queued' | 'scheduled' }> {
  const id = newId('del');
  const scheduled = !!d.runAt && d.runAt.getTime() > Date.now();
  const status = scheduled ? 'scheduled' : 'queued';
  await client.query({
    name: 'insert_delivery',
    text: `WITH d AS (
       INSERT INTO deliveries (id, project_id, webhook_id, event_id, destination_id, destination, status, next_attempt_at,
                               replay_of_id, replay_job_id, dispatch_body, dispatch_content_type, dispatch_headers)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8::timestamptz, $9, $10, $11, $12, $13)
       RETURNING id, webhook_id, next_attempt_at
     ), job AS (
       ${insertAttemptJobRows('d', '$14')}
     )
     SELECT (SELECT count(*) FROM job) AS jobs, pg_notify('jobs:insert', '{"count":1}')`,
    values: [
      id,
      d.projectId,
      d.webhookId,
      d.eventId,
      d.destinationId,
      JSON.stringify(d.destination),
      status,
      d.runAt ?? null,
      d.replayOfId ?? null,
      d.replayJobId ?? null,
      d.dispatch?.body ?? null,
      d.dispatch?.contentType ?? null,
      d.dispatch ? JSON.stringify(d.dispatch.headers ?? {}) : null,
      ATTEMPT_TASK,
    ],
  });
  return { id, status };
}

/**
 * Wakes job runners (graphile-worker LISTENs on `jobs:insert`) after jobs were added by a
 * transaction that did not notify (see insertDelivery). Nudges coalesce: one NOTIFY at a time
 * per process, on a relaxed-commit connection so its commit does not wait for a WAL flush
 * while holding the notification lock. Runners also poll (WORKER_POLL_INTERVAL_MS), so a lost
 * nudge delays a job by at most that.
 */
export class JobRunnerNudge {
  private pending = 0;
  private sending = false;

  constructor(private readonly pool: pg.Pool) {}

  nudge(count = 1) {
    this.pending += count;
    if (!this.sending) void this.send();
  }

  private async send() {
    this.sending = true;
    try {
      while (this.pending > 0) {
        const count = this.pending;
        this.pending = 0;
        await this.pool
          .query({ name: 'nudge_job_runners', text: `SELECT pg_notify('jobs:insert', json_build_object('count', $1::int)::text)`, values: [count] })
          .catch((err) => log.warn({ err: (err as Error).message }, 'could not wake the job runners; they find the jobs when they poll'));
      }
    } finally {
      this.sending = false;
    }
  }
}
