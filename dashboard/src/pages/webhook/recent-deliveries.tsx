// Recent deliveries: this webhook's latest deliveries, kept live by the deliveryUpdated
// subscription (filtered to the webhook by the server), with a link to all of them.
import { Link } from 'wouter-preact';
import { gql } from '../../api.ts';
import { graphql } from '../../graphql.ts';
import { DELIVERY_COLUMNS, DELIVERY_FIELDS, LiveMark, deliveryRow, upsertDelivery, useLiveDeliveries } from '../../parts/deliveries.tsx';
import { Empty, PagedTable, Section, useQuery } from '../../ui.tsx';

/** How many deliveries the section shows. */
const RECENT = 10;

export function RecentDeliveries({ webhookId }: { webhookId: string }) {
  const q = useQuery(
    () =>
      gql(graphql(`query($webhookId: String, $limit: Int) { deliveries(limit: $limit, webhookId: $webhookId) { items { ...DeliveryFields } } }`, [DELIVERY_FIELDS]), { webhookId, limit: RECENT }).then(
        (d) => d.deliveries.items,
      ),
    [webhookId],
  );
  const { live, error: liveError, fresh } = useLiveDeliveries(
    webhookId,
    (d) => {
      if (d.webhookId !== webhookId) return false;
      q.setData((items) => upsertDelivery(items ?? [], d).slice(0, RECENT));
    },
    webhookId,
  );
  const items = q.data ?? [];
  return (
    <Section
      title="Recent deliveries"
      actions={
        <div class="row">
          <LiveMark live={live} />
          <Link class="button small" href={`/deliveries?webhookId=${webhookId}`}>
            All deliveries
          </Link>
        </div>
      }
    >
      <PagedTable
        list={{ items, loading: q.loading, error: q.error, cursor: null, pending: false, loadMore: async () => {} }}
        error={liveError}
        label="Recent deliveries"
        columns={DELIVERY_COLUMNS}
        empty={<Empty title="No deliveries yet">Send an event to the ingest URL above: its delivery appears here as it happens.</Empty>}
        row={deliveryRow(fresh)}
      />
    </Section>
  );
}
