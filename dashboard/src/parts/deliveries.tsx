// Deliveries as every page shows them: the fields read (one fragment), the table, and how a live
// update (the deliveryUpdated subscription) changes a list. Used by the deliveries page, a
// delivery's page and the webhook page's recent deliveries.
import { Link } from 'wouter-preact';
import { graphql, type ResultOf } from '../graphql.ts';
import { Badge, Time } from '../ui.tsx';

export const DELIVERY_FIELDS = graphql(`fragment DeliveryFields on Delivery @_unmask { id status webhookId eventId attempts createdAt completedAt nextAttemptAt replayOf destination lastAttempt { statusCode durationMs error } }`);

export type Delivery = ResultOf<typeof DELIVERY_FIELDS>;

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

export function DeliveryTable({ items, fresh, label = 'Deliveries' }: { items: Delivery[]; fresh?: Set<string>; label?: string }) {
  return (
    <div class="table-wrap">
      <table aria-label={label}>
        <thead>
          <tr>
            <th scope="col">Delivery</th>
            <th scope="col">Status</th>
            <th scope="col">Attempts</th>
            <th scope="col">Last answer</th>
            <th scope="col">Event</th>
            <th scope="col">Created</th>
          </tr>
        </thead>
        <tbody>
          {items.map((d) => (
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
          ))}
        </tbody>
      </table>
    </div>
  );
}
