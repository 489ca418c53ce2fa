import type pg from 'pg';
import { newId } from '../ids.ts';
import { log } from '../log.ts';
import type { DirectClaim } from '../runtime.ts';
import { ATTEMPT_TASK, insertAttemptJobRows, requeueAttemptJob } from './job.ts';

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

/** The columns a new delivery is written with, each as an SQL expression; the optional ones are NULL when absent. */
export interface DeliveryColumnsSql {
  id: string;
  projectId: string;
  webhookId: string;
  eventId: string;
  destinationId: string;
  destination: string;
  status: string;
  nextAttemptAt: string;
  idempotencyKey?: string;
  replayOfId?: string;
  replayJobId?: string;
  dispatchBody?: string;
  dispatchContentType?: string;
  dispatchHeaders?: string;
  /** A delivery claimed as it is written (ingest's direct claim): its first attempt, its claim's lease and slot lease. */
  attempts?: string;
  leaseUntil?: string;
  slotLease?: string;
}

const DELIVERY_COLUMNS: [keyof DeliveryColumnsSql, string][] = [
  ['id', 'id'],
  ['projectId', 'project_id'],
  ['webhookId', 'webhook_id'],
  ['eventId', 'event_id'],
  ['destinationId', 'destination_id'],
  ['destination', 'destination'],
  ['status', 'status'],
  ['nextAttemptAt', 'next_attempt_at'],
  ['idempotencyKey', 'idempotency_key'],
  ['replayOfId', 'replay_of_id'],
  ['replayJobId', 'replay_job_id'],
  ['dispatchBody', 'dispatch_body'],
  ['dispatchContentType', 'dispatch_content_type'],
  ['dispatchHeaders', 'dispatch_headers'],
  ['attempts', 'attempts'],
  ['leaseUntil', 'lease_until'],
  ['slotLease', 'slot_lease'],
];

/**
 * SQL: the one way a delivery row is written, for ingest's statement (storeEvent) and for replays
 * (insertDelivery): CTE `name` inserting the delivery (its columns from `columns`, selected
 * `from` a row source when given) and CTE `job` inserting its first attempt job. `taskParam`
 * null: no job (ingest handing the delivery to a drain in its own process: see
 * RunnerWakeUp.drainRunning), and no CTE `job`.
 */
export function insertDeliveryCtes(name: string, columns: DeliveryColumnsSql, taskParam: string | null, from?: string): string {
  const set = DELIVERY_COLUMNS.filter(([key]) => columns[key] !== undefined);
  const insert = `${name} AS (
  INSERT INTO deliveries (${set.map(([, column]) => column).join(', ')})
  SELECT ${set.map(([key]) => columns[key]).join(', ')}${from ? ` FROM ${from}` : ''}
  RETURNING id, webhook_id, next_attempt_at
)`;
  return taskParam === null ? insert : `${insert}, job AS (
  ${insertAttemptJobRows(name, taskParam)}
)`;
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
const INSERT_REPLAY_DELIVERY = insertDeliveryCtes(
  'd',
  {
    id: '$1',
    projectId: '$2',
    webhookId: '$3',
    eventId: '$4',
    destinationId: '$5',
    destination: '$6::jsonb',
    status: '$7',
    nextAttemptAt: '$8::timestamptz',
    replayOfId: '$9::text',
    replayJobId: '$10::text',
    dispatchBody: '$11::bytea',
    dispatchContentType: '$12::text',
    dispatchHeaders: '$13::jsonb',
  },
  '$14',
);

export async function insertDelivery(client: pg.PoolClient | pg.Client, d: NewDelivery): Promise<{ id: string; status: 'queued' | 'scheduled' }> {
  const id = newId('del');
  const scheduled = !!d.runAt && d.runAt.getTime() > Date.now();
  const status = scheduled ? 'scheduled' : 'queued';
  await client.query({
    name: 'insert_delivery',
    text: `WITH ${INSERT_REPLAY_DELIVERY}
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

  /** This process's job runner's drains, when it runs one (app.ts): see RunnerWakeUp. */
  localDrains: {
    running(webhookId: string): boolean;
    offer(webhookId: string, deliveryId: string): boolean;
    claim(webhookId: string, configVersion: number): DirectClaim | null;
  } | null = null;

  constructor(private readonly pool: pg.Pool) {}

  drainRunning(webhookId: string): boolean {
    return this.localDrains?.running(webhookId) ?? false;
  }

  claimDirect(webhookId: string, configVersion: number): DirectClaim | null {
    return this.localDrains?.claim(webhookId, configVersion) ?? null;
  }

  handOver(webhookId: string, deliveryId: string): boolean {
    return this.localDrains?.offer(webhookId, deliveryId) ?? false;
  }

  /** Should this fail, the sweeper gives the delivery a job (it is queued, committed, and has none). */
  async queueJobless(deliveryId: string): Promise<void> {
    try {
      await requeueAttemptJob(this.pool, deliveryId, new Date());
      this.nudge();
    } catch (err) {
      log.warn({ err: (err as Error).message, deliveryId }, 'could not give a delivery its job now; the delivery sweep does');
    }
  }

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
