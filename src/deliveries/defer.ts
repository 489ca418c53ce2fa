import type pg from 'pg';
import { addAttemptJobSql, ATTEMPT_TASK } from './job.ts';

/**
 * Undoes a claim whose attempt could not start (every Automation concurrency slot of the project
 * is taken): the delivery waits again, `scheduled` (first attempt) or `retrying`, with its job at
 * `runAt`, its attempt count as before and the webhook's in-flight slot released (a drain's slot lease
 * takes its slot back in memory), in one statement. Guarded by
 * the claim's state, so a stale runner changes nothing. No attempt is recorded.
 */
export async function deferClaim(db: pg.Pool | pg.PoolClient, deliveryId: string, attempt: number, runAt: Date): Promise<void> {
  await db.query({
    name: 'defer_claim',
    text: `WITH upd AS (
             UPDATE deliveries SET status = CASE WHEN attempts = 1 THEN 'scheduled' ELSE 'retrying' END, attempts = attempts - 1,
                    lease_until = NULL, next_attempt_at = $3, updated_at = now()
              WHERE id = $1 AND status = 'delivering' AND attempts = $2
             RETURNING id, webhook_id, next_attempt_at, slot_lease
           ), job AS (
             SELECT ${addAttemptJobSql('$4', 'upd.id', 'upd.webhook_id', 'upd.next_attempt_at')} FROM upd
           ), released AS (
             -- In the same statement, so the counter and the 'delivering' rows change together.
             UPDATE webhooks SET in_flight = GREATEST(in_flight - 1, 0) WHERE id = (SELECT webhook_id FROM upd WHERE slot_lease IS NULL)
           )
           SELECT upd.webhook_id, (SELECT count(*) FROM job) AS jobs FROM upd`,
    values: [deliveryId, attempt, runAt, ATTEMPT_TASK],
  });
}
