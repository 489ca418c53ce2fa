import type pg from 'pg';

/**
 * A delivery's attempt job: the one graphile-worker job per unfinished delivery, keyed by the
 * delivery, that runs its next attempt (or a drain starting from it). Everything that adds,
 * replaces, finds or removes such a job says so through this module.
 */

/** The graphile-worker task that attempts a delivery (jobs/deliveries__attempt.ts). */
export const ATTEMPT_TASK = 'deliveries__attempt';

/**
 * graphile-worker's own cap on runs of one attempt job. The delivery's retry policy decides its
 * attempts (each retry is a new job); this only bounds a job that keeps crashing its task.
 */
export const ATTEMPT_JOB_MAX_ATTEMPTS = 25;

/** The attempt job's key as SQL, for a delivery id expression (`d.id`): at most one job per delivery, replaced when it is added again. */
export const attemptJobKeySql = (deliveryIdSql: string) => `'del:' || ${deliveryIdSql}`;

/**
 * The key of a webhook's hand-off job (see handOffDueDeliveries): one per webhook, and no claim
 * deletes it (a claim deletes only the jobs of the deliveries it took), so a drain it starts
 * always comes, whichever delivery it names was taken meanwhile.
 */
export const handOffJobKeySql = (webhookIdSql: string) => `'hand:' || ${webhookIdSql}`;

/**
 * SQL calling graphile_worker.add_job for a delivery's attempt job (adding it, or replacing the
 * waiting one: the key): `task` is the SQL holding ATTEMPT_TASK (a parameter), `deliveryId`,
 * `webhookId` and the optional `runAt` SQL expressions of the row it is added for.
 */
export function addAttemptJobSql(task: string, deliveryId: string, webhookId: string, runAt?: string, jobKey = attemptJobKeySql(deliveryId)): string {
  return `graphile_worker.add_job(${task}, json_build_object('deliveryId', ${deliveryId}, 'webhookId', ${webhookId})${runAt ? `, run_at := ${runAt}` : ''},
           job_key := ${jobKey}, max_attempts := ${ATTEMPT_JOB_MAX_ATTEMPTS})`;
}

/**
 * The INSERT of attempt job rows for deliveries just inserted (`from` has their id, webhook_id
 * and next_attempt_at), written as graphile-worker's add_job() writes a new job, without its
 * NOTIFY (see insertDelivery). `taskParam` holds ATTEMPT_TASK. A missing task row (migrate()
 * creates it, told ATTEMPT_TASK) fails the statement rather than losing the job.
 */
export function insertAttemptJobRows(from: string, taskParam: string): string {
  return `INSERT INTO graphile_worker._private_jobs (task_id, payload, run_at, max_attempts, key)
       SELECT (SELECT t.id FROM graphile_worker._private_tasks t WHERE t.identifier = ${taskParam}),
              json_build_object('deliveryId', x.id, 'webhookId', x.webhook_id), COALESCE(x.next_attempt_at, now()), ${ATTEMPT_JOB_MAX_ATTEMPTS}, ${attemptJobKeySql('x.id')}
         FROM ${from} x
       RETURNING id`;
}

/** Re-queues a delivery's job at `runAt` (a new job: the running one is locked and finishes now). */
export async function requeueAttemptJob(client: pg.PoolClient | pg.Pool, deliveryId: string, runAt: Date) {
  await client.query(`SELECT ${addAttemptJobSql('$1', 'id', 'webhook_id', '$3::timestamptz')} FROM deliveries WHERE id = $2`, [ATTEMPT_TASK, deliveryId, runAt]);
}

/**
 * After a webhook becomes active again: a job for each waiting delivery (for strict FIFO only
 * the head; the rest follow it). Returns how many.
 *
 * `missingOnly`: only queued deliveries that have no job (a drain that took their jobs over ended
 * because the webhook turned strict FIFO or throttled: see takeOverBacklogJobs). Deliveries that
 * have a job then keep it untouched: re-adding one a runner holds would update its locked row,
 * and several such updates in one statement could deadlock with graphile-worker's batched
 * completion (which stops its pool).
 */
export async function requeueWebhookAttemptJobs(db: pg.Pool | pg.PoolClient, webhookId: string, { missingOnly = false } = {}): Promise<number> {
  const waiting = missingOnly
    ? `d.status = 'queued' AND NOT EXISTS (SELECT 1 FROM graphile_worker._private_jobs j WHERE j.key = ${attemptJobKeySql('d.id')})`
    : `d.status IN ('queued','scheduled','retrying','delivering')`;
  const { rows } = await db.query(
    `WITH w AS (SELECT delivery_mode FROM webhooks WHERE id = $1),
     pending AS (
       SELECT d.id, d.webhook_id, d.next_attempt_at FROM deliveries d
        WHERE d.webhook_id = $1 AND ${waiting}
          AND ((SELECT delivery_mode FROM w) = 'parallel' OR d.seq = (
            SELECT min(seq) FROM deliveries x WHERE x.webhook_id = $1 AND x.status IN ('queued','scheduled','retrying','delivering'))))
     SELECT ${addAttemptJobSql('$2', 'id', 'webhook_id', 'COALESCE(next_attempt_at::timestamptz, now())')} FROM pending`,
    [webhookId, ATTEMPT_TASK],
  );
  return rows.length;
}

/**
 * Removes the jobs of a webhook's unfinished deliveries (before the webhook is destroyed, while
 * its deliveries still name them); a running one is only kept from retrying and finds its
 * delivery gone.
 */
export async function removeWebhookAttemptJobs(client: pg.PoolClient, webhookId: string): Promise<void> {
  await client.query(
    `SELECT graphile_worker.remove_job(${attemptJobKeySql('id')}) FROM deliveries
      WHERE webhook_id = $1 AND status IN ('queued', 'scheduled', 'delivering', 'retrying')`,
    [webhookId],
  );
  await client.query(`SELECT graphile_worker.remove_job(${handOffJobKeySql('$1::text')})`, [webhookId]);
}
