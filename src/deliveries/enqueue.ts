import type pg from 'pg';
import { newId } from '../ids.ts';

export const ATTEMPT_TASK = 'deliveries__attempt';

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
 */
export async function insertDelivery(client: pg.PoolClient | pg.Client, d: NewDelivery): Promise<{ id: string; status: 'queued' | 'scheduled' }> {
  const id = newId('del');
  const scheduled = !!d.runAt && d.runAt.getTime() > Date.now();
  const status = scheduled ? 'scheduled' : 'queued';
  await client.query(
    `WITH d AS (
       INSERT INTO deliveries (id, project_id, webhook_id, event_id, destination_id, destination, status, next_attempt_at,
                               replay_of_id, replay_job_id, dispatch_body, dispatch_content_type, dispatch_headers)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8::timestamptz, $9, $10, $11, $12, $13)
       RETURNING id
     )
     SELECT graphile_worker.add_job($14, json_build_object('deliveryId', (SELECT id FROM d), 'webhookId', $3::text), run_at := $8::timestamptz, job_key := 'del:' || $1, max_attempts := 25)`,
    [
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
  );
  return { id, status };
}
