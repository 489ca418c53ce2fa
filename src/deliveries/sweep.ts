import { log } from '../log.ts';
import type { Runtime } from '../runtime.ts';
import { addAttemptJobSql, ATTEMPT_TASK, attemptJobKeySql } from './job.ts';

const SWEEP_LOCK = 727_003;

/**
 * Safety net run by every job runner (one at a time, under an advisory lock): re-queues
 * deliveries that have no live job — an attempt whose runner died (lease expired; the
 * dead runner's job stays locked in graphile-worker for hours), a job lost with a crashed
 * runner's local queue, or a FIFO head whose predecessor's hand-off never committed.
 * Duplicate jobs are harmless: the claim lets only one attempt through.
 */
export async function sweepDeliveries(rt: Runtime): Promise<number> {
  const client = await rt.db.pool.connect();
  try {
    const { rows: lock } = await client.query('SELECT pg_try_advisory_lock($1) AS ok', [SWEEP_LOCK]);
    if (!lock[0].ok) return 0;
    try {
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
                    -- A parallel webhook with attempts in flight is being drained: like a FIFO webhook's, only its
                    -- oldest waiting delivery needs a job of its own.
                    AND ((w.delivery_mode = 'parallel' AND w.in_flight = 0) OR d.seq = (
                      SELECT min(x.seq) FROM deliveries x WHERE x.webhook_id = d.webhook_id AND x.status IN ('queued','scheduled','retrying','delivering'))))
              )
            LIMIT 1000)
         SELECT ${addAttemptJobSql('$1', 'id', 'webhook_id')} FROM candidates`,
        [ATTEMPT_TASK],
      );
      if (rows.length > 0) log.info({ requeued: rows.length }, 'delivery sweep re-queued deliveries');
      // A slot leaked by a runner that died between recording a result and releasing it: set the
      // counter to the attempts really running, on webhooks quiet long enough that no claim or
      // result is between its two statements.
      await client.query(
        `UPDATE webhooks w SET in_flight = live.n
           FROM (SELECT w2.id, (SELECT count(*)::int FROM deliveries d WHERE d.webhook_id = w2.id AND d.status = 'delivering') AS n
                   FROM webhooks w2 WHERE w2.in_flight > 0) live
          WHERE w.id = live.id AND w.in_flight > live.n
            AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.webhook_id = w.id AND d.updated_at > now() - interval '30 seconds')`,
      );
      return rows.length;
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [SWEEP_LOCK]);
    }
  } finally {
    client.release();
  }
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
