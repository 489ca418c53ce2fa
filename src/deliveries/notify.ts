import type { Runtime } from '../runtime.ts';
import { deliveryView, type DeliveryView } from './delivery-view.ts';

export const deliveryTopic = (projectId: string) => `delivery:${projectId}`;
export const NOTIFY_CHANNEL = 'app_events';

/** The NOTIFY text for a delivery change; sent inside the transaction that made the change. */
export function deliveryNotification(view: DeliveryView): string {
  const text = JSON.stringify({ t: deliveryTopic(view.projectId), p: view });
  // Oversized payloads travel as a reference that receivers load once (see PgPubSub.onRef).
  return Buffer.byteLength(text) > 7_500 ? JSON.stringify({ t: deliveryTopic(view.projectId), r: view.id }) : text;
}

/** Lets subscribers on this process load deliveries whose change was too large to travel inline. */
export function registerDeliveryRefLoader(rt: Runtime) {
  rt.pubsub.onRef('delivery:', async (_topic, id) => {
    const { rows } = await rt.db.pool.query('SELECT * FROM deliveries WHERE id = $1', [id]);
    return rows[0] ? deliveryView(rows[0]) : null;
  });
}
