import type pg from 'pg';
import { addAttemptJobSql, ATTEMPT_TASK } from './job.ts';

/**
 * Undoes a claim whose attempt could not start (every Automation concurrency slot of the project
 * is taken): the delivery waits again, `scheduled` (first attempt) or `retrying`, with its job at
 * `runAt`, its attempt count as before and the webhook's in-flight slot released. Guarded by
 * the claim's state, so a stale runner changes nothing. No attempt is recorded.
 */
export async function deferClaim(db: pg.Pool | pg.PoolClient, deliveryId: string, attempt: number, runAt: Date): Promise<void> {
  const { rows } = await db.query({
    name: 'defer_claim',
    text: `WITH upd AS (
             UPDATE deliveries SET status = CASE WHEN attempts = 1 THEN 'scheduled' ELSE 'retrying' END, attempts = attempts - 1,
                    lease_until = NULL, next_attempt_at = $3, updated_at = now()
              WHERE id = $1 AND status = 'delivering' AND attempts = $2
             RETURNING id, webhook_id, next_attempt_at
           ), job AS (
             SELECT ${addAttemptJobSql('$4', 'upd.id', 'upd.webhook_id', 'upd.next_attempt_at')} FROM upd
           )
           SELECT upd.webhook_id, (SELECT count(*) FROM job) AS jobs FROM upd`,
    values: [deliveryId, attempt, runAt, ATTEMPT_TASK],
  });
  if (rows[0]) {
    await db.query({ name: 'release_in_flight', text: 'UPDATE webhooks SET in_flight = GREATEST(in_flight - $2, 0) WHERE id = $1', values: [rows[0].webhook_id, 1] });
  }
}
