// Deliveries as every page shows them: the fields read (one fragment), the table's columns and rows, and how a live
// update (the deliveryUpdated subscription) changes a list. Used by the deliveries page, a
// delivery's page and the webhook page's recent deliveries.
import { useEffect, useState } from 'preact/hooks';
import { Link } from 'wouter-preact';
import { subscribe, type ApiError } from '../api.ts';
import { graphql, type ResultOf } from '../graphql.ts';
import { Badge, Time } from '../ui.tsx';

export const DELIVERY_FIELDS = graphql(`fragment DeliveryFields on Delivery @_unmask { id status webhookId eventId idempotencyKey attempts createdAt completedAt nextAttemptAt replayOf destination lastAttempt { statusCode durationMs error } }`);

export type Delivery = ResultOf<typeof DELIVERY_FIELDS>;

/**
 * Deliveries as they change, live (the deliveryUpdated subscription; `webhookId`: one webhook's,
 * filtered by the server). `onDelivery` gets each; `key` restarts the subscription when it changes.
 * Returns whether it is live, its error, and the ids it brought (`fresh`, for highlighting).
 */
export function useLiveDeliveries(webhookId: string | undefined, onDelivery: (d: Delivery) => boolean | void, key: string) {
  const [live, setLive] = useState(false);
  const [error, setError] = useState<ApiError>();
  const [fresh, setFresh] = useState<Set<string>>(new Set());
  useEffect(() => {
    setLive(true);
    const stop = subscribe(
      graphql(`subscription($webhookId: ID) { deliveryUpdated(webhookId: $webhookId) { ...DeliveryFields } }`, [DELIVERY_FIELDS]),
      { webhookId },
      ({ deliveryUpdated: d }) => {
        setError(undefined);
        if (onDelivery(d) === false) return;
        setFresh((s) => new Set(s).add(d.id));
      },
      (e) => setError(e),
    );
    return () => {
      stop();
      setLive(false);
    };
  }, [key]);
  return { live: live && !error, error, fresh };
}

/** The "Live" / "Not live" mark of a list kept live. */
export function LiveMark({ live }: { live: boolean }) {
  return <span class={`live ${live ? '' : 'off'}`}>{live ? 'Live' : 'Not live'}</span>;
}

/** A list after a live update: `d` replaces its row, or goes first when new; with `status`, only deliveries in it stay. */
export function upsertDelivery(items: Delivery[], d: Delivery, status?: string): Delivery[] {
  const i = items.findIndex((x) => x.id === d.id);
  if (i >= 0) {
    if (status && d.status !== status) return items.filter((x) => x.id !== d.id);
    return items.map((x) => (x.id === d.id ? d : x));
  }
  if (status && d.status !== status) return items;
  return [d, ...items];
}

/** A deliveries table's columns and rows (`fresh`: the ids a live update brought, highlighted). */
export const DELIVERY_COLUMNS = ['Delivery', 'Status', 'Attempts', 'Last answer', 'Event', 'Created'];
export const deliveryRow = (fresh?: Set<string>) => (d: Delivery) => (
    <tr key={`${d.id}-${d.status}-${d.attempts}`} class={fresh?.has(d.id) ? 'fresh' : ''} data-delivery-id={d.id}>
      <td>
        <Link href={`/deliveries/${d.id}`}>{d.id}</Link>
        {d.replayOf ? <div class="muted">replay of {d.replayOf}</div> : null}
      </td>
      <td>
        <Badge value={d.status} />
      </td>
      <td>{d.attempts}</td>
      <td>{d.lastAttempt ? (d.lastAttempt.statusCode ?? d.lastAttempt.error ?? '—') : '—'}</td>
      <td>
        <code>{d.eventId}</code>
      </td>
      <td>
        <Time value={d.createdAt} />
      </td>
    </tr>
);
