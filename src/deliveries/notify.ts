import type { Runtime } from '../runtime.ts';
import { deliveryView } from './delivery-view.ts';

export const deliveryTopic = (projectId: string) => `delivery:${projectId}`;
export const NOTIFY_CHANNEL = 'app_events';

/** SQL: an ISO 8601 UTC timestamp as Date.toISOString writes it, from a `timestamp(3)` column (UTC wall time). */
const isoSql = (column: string) => `to_char(${column}, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * SQL: the NOTIFY text of a delivery change, `{"t": "delivery:<project>", "p": deliveryView(row)}`,
 * computed by PostgreSQL for the `deliveries` row aliased `a`, so the statement that changes
 * deliveries (the claims, the result) notifies in itself, within its transaction. Oversized, it
 * travels as a reference (`"r": id`) that receivers load once (PgPubSub.onRef). Keep it equal to
 * deliveryView and publicDestination: a test compares the two (deliveries.notification-sql.test.ts).
 */
export const deliveryNotificationSql = (a: string) => `(
  SELECT CASE WHEN octet_length(x.t) > 7500 THEN json_build_object('t', 'delivery:' || ${a}.project_id, 'r', ${a}.id)::text ELSE x.t END
    FROM (SELECT json_build_object('t', 'delivery:' || ${a}.project_id, 'p', json_build_object(
      'id', ${a}.id, 'projectId', ${a}.project_id, 'webhookId', ${a}.webhook_id, 'eventId', ${a}.event_id, 'status', ${a}.status,
      'destination', CASE WHEN jsonb_typeof(${a}.destination -> 'config') = 'object'
                          THEN ${a}.destination #- '{config,credentials}' #- '{config,credentialsEnc}' #- '{config,secretEnc}'
                          ELSE ${a}.destination END,
      'attempts', ${a}.attempts, 'nextAttemptAt', ${isoSql(`${a}.next_attempt_at`)}, 'lastAttempt', ${a}.last_attempt,
      'replayOf', ${a}.replay_of_id, 'automationId', ${a}.automation_id, 'automationVersion', ${a}.automation_version,
      'idempotencyKey', ${a}.idempotency_key, 'createdAt', ${isoSql(`${a}.created_at`)}, 'completedAt', ${isoSql(`${a}.completed_at`)}
    ))::text AS t) x)`;

/** Lets subscribers on this process load deliveries whose change was too large to travel inline. */
export function registerDeliveryRefLoader(rt: Runtime) {
  rt.pubsub.onRef('delivery:', async (_topic, id) => {
    const { rows } = await rt.db.pool.query('SELECT * FROM deliveries WHERE id = $1', [id]);
    return rows[0] ? deliveryView(rows[0]) : null;
  });
}
