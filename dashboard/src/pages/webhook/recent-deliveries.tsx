// Recent deliveries: this webhook's latest deliveries, kept live by the deliveryUpdated
// subscription (filtered to the webhook by the server), with a link to all of them.
import { useEffect, useState } from 'preact/hooks';
import { Link } from 'wouter-preact';
import { gql, subscribe, type ApiError } from '../../api.ts';
import { graphql } from '../../graphql.ts';
import { DELIVERY_FIELDS, DeliveryTable, upsertDelivery } from '../../parts/deliveries.tsx';
import { Empty, ErrorBanner, Loading, Section, useQuery } from '../../ui.tsx';

/** How many deliveries the section shows. */
const RECENT = 10;

export function RecentDeliveries({ webhookId }: { webhookId: string }) {
  const q = useQuery(
    () =>
      gql(graphql(`query($webhookId: String) { deliveries(limit: 10, webhookId: $webhookId) { items { ...DeliveryFields } } }`, [DELIVERY_FIELDS]), { webhookId }).then(
        (d) => d.deliveries.items,
      ),
    [webhookId],
  );
  const [live, setLive] = useState(false);
  const [liveError, setLiveError] = useState<ApiError>();
  const [fresh, setFresh] = useState<Set<string>>(new Set());
  useEffect(() => {
    setLive(true);
    const stop = subscribe(
      graphql(`subscription($webhookId: ID) { deliveryUpdated(webhookId: $webhookId) { ...DeliveryFields } }`, [DELIVERY_FIELDS]),
      { webhookId },
      ({ deliveryUpdated: d }) => {
        setLiveError(undefined);
        if (d.webhookId !== webhookId) return;
        q.setData((items) => upsertDelivery(items ?? [], d).slice(0, RECENT));
        setFresh((s) => new Set(s).add(d.id));
      },
      (e) => setLiveError(e),
    );
    return () => {
      stop();
      setLive(false);
    };
  }, [webhookId]);
  const items = q.data ?? [];
  return (
    <Section
      title="Recent deliveries"
      actions={
        <div class="row">
          <span class={`live ${live && !liveError ? '' : 'off'}`}>{live && !liveError ? 'Live' : 'Not live'}</span>
          <Link class="button small" href={`/deliveries?webhookId=${webhookId}`}>
            All deliveries
          </Link>
        </div>
      }
    >
      <ErrorBanner error={q.error ?? liveError} />
      {q.loading && !items.length ? <Loading /> : null}
      {!q.loading && !q.error && items.length === 0 ? <Empty title="No deliveries yet">Send an event to the ingest URL above: its delivery appears here as it happens.</Empty> : null}
      {items.length ? <DeliveryTable items={items} fresh={fresh} label="Recent deliveries" /> : null}
    </Section>
  );
}
