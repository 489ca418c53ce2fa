import type pg from 'pg';
import { log } from '../log.ts';
import { handOffDueDeliveries } from './claim-batch.ts';
import type { Runtime } from '../runtime.ts';
import { addAttemptJobSql, ATTEMPT_TASK, attemptJobKeySql } from './job.ts';
import { releaseGoneHoldersLeases } from './slot-lease.ts';
import { deleteExpiredDeliveryListeners } from './listeners.ts';

const SWEEP_LOCK = 727_003;

/**
 * Safety net run by every job runner (one at a time, under an advisory lock): re-queues
 * deliveries that have no live job — an attempt whose runner died (lease expired; the
 * dead runner's job stays locked in graphile-worker for hours), a job lost with a crashed
 * runner's local queue, or a FIFO head whose predecessor's hand-off never committed.
 * Duplicate jobs are harmless: the claim lets only one attempt through. `ran` is false when
 * another runner's sweep held the lock (this one then does nothing); `requeued`: the deliveries
 * given a job.
 */
export async function sweepDeliveries(rt: Runtime): Promise<{ ran: boolean; requeued: number }> {
  // A session-level lock held across statements: on the server itself, never through a pooler.
  const client = await rt.db.direct.connect();
  try {
    const { rows: lock } = await client.query('SELECT pg_try_advisory_lock($1) AS ok', [SWEEP_LOCK]);
    if (!lock[0].ok) return { ran: false, requeued: 0 };
    try {
      // Leases of drains whose process is gone (on this machine): their slots and claims now, not once they run out.
      const released = await releaseGoneHoldersLeases(client);
      if (released > 0) log.info({ leases: released }, 'delivery sweep gave back the slot leases of exited runners');
      const { rows } = await client.query(
        `WITH candidates AS (
           SELECT d.id, d.webhook_id FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id
            WHERE d.status IN ('queued','scheduled','retrying','delivering') AND w.status = 'active'
              AND (
                (d.status = 'delivering' AND d.lease_until < now())
                OR (d.status <> 'delivering' AND COALESCE(d.next_attempt_at, d.updated_at) < now() - interval '20 seconds'
                    AND NOT EXISTS (
                      SELECT 1 FROM graphile_worker._private_jobs j
                       WHERE j.key = ${attemptJobKeySql('d.id')} AND (j.locked_at IS NULL OR j.locked_at > now() - interval '5 minutes'))
                    -- A parallel webhook with attempts in flight or a live slot lease is being drained: like a FIFO webhook's, only its
                    -- oldest waiting delivery needs a job of its own.
                    AND ((w.delivery_mode = 'parallel' AND w.in_flight = 0 AND NOT EXISTS (
                           SELECT 1 FROM webhook_slot_leases l WHERE l.webhook_id = w.id AND l.expires_at > now())) OR d.seq = (
                      SELECT min(x.seq) FROM deliveries x WHERE x.webhook_id = d.webhook_id AND x.status IN ('queued','scheduled','retrying','delivering'))))
              )
            LIMIT 1000)
         SELECT ${addAttemptJobSql('$1', 'id', 'webhook_id')} FROM candidates`,
        [ATTEMPT_TASK],
      );
      if (rows.length > 0) log.info({ requeued: rows.length }, 'delivery sweep re-queued deliveries');
      await reconcileInFlight(client);
      // Leases whose drain died with its runner (a drain ending deletes its own).
      await client.query(`DELETE FROM webhook_slot_leases WHERE expires_at < now() - interval '1 minute'`);
      // deliveryUpdated listeners of processes that died.
      await deleteExpiredDeliveryListeners(client);
      return { ran: true, requeued: rows.length };
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [SWEEP_LOCK]);
    }
  } finally {
    client.release();
  }
}

/**
 * Sets a webhook's in-flight counter (with the slot leases, the maxInFlight semaphore) back to its
 * one-at-a-time attempts really running, should it ever differ. Every statement that changes the counter also moves the rows it
 * counts ('delivering': the claims, recordAttempts, deferClaim), so the two agree at every commit
 * and no crash between statements can leave a slot taken; this is a safety net against a slot
 * leaked anyway, which would otherwise hold a webhook's deliveries back while events keep coming.
 * A webhook found off is checked again under its row lock (claims and results take it), with a
 * snapshot taken after the lock: the count then sees every change made under it.
 */
export async function reconcileInFlight(client: pg.PoolClient): Promise<number> {
  const { rows: suspects } = await client.query(
    `SELECT w.id FROM webhooks w
      WHERE w.in_flight <> (SELECT count(*) FROM deliveries d WHERE d.webhook_id = w.id AND d.status = 'delivering' AND d.slot_lease IS NULL)
      LIMIT 100`,
  );
  let fixed = 0;
  for (const { id } of suspects) {
    await client.query('BEGIN');
    try {
      await client.query('SELECT 1 FROM webhooks WHERE id = $1 FOR NO KEY UPDATE', [id]);
      const { rows } = await client.query(
        `UPDATE webhooks w SET in_flight = live.n
           FROM (SELECT count(*)::int AS n FROM deliveries d WHERE d.webhook_id = $1 AND d.status = 'delivering' AND d.slot_lease IS NULL) live
          WHERE w.id = $1 AND w.in_flight <> live.n
          RETURNING w.in_flight`,
        [id],
      );
      await client.query('COMMIT');
      if (rows[0]) {
        fixed++;
        // Its deliveries' jobs found no free slot and ended: a drain takes them up now.
        await handOffDueDeliveries(client, id);
        log.warn({ webhookId: id, inFlight: rows[0].in_flight }, 'delivery sweep set a webhook in-flight counter back to its running attempts');
      }
    } catch (e) {
      await client.query('ROLLBACK').catch(() => {});
      throw e;
    }
  }
  return fixed;
}

export function startDeliverySweeper(rt: Runtime, everyMs = 5_000) {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    sweepDeliveries(rt)
      .catch((err) => log.warn({ err }, 'delivery sweep failed'))
      .finally(() => (running = false));
  }, everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
