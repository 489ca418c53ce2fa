// Deliveries: filters, and live updates over graphql-ws (deliveryUpdated).
import { useState } from 'preact/hooks';
import { Link, useLocation, useSearch } from 'wouter-preact';
import { gql, session } from '../api.ts';
import { graphql } from '../graphql.ts';
import { ConfirmButton, Empty, ErrorBanner, Field, Page, PagedTable, Select, useAction, usePaged } from '../ui.tsx';
import { WebhookSelect } from '../parts/webhook-select.tsx';
import { DELIVERY_COLUMNS, DELIVERY_FIELDS, LiveMark, deliveryRow, upsertDelivery, useLiveDeliveries } from '../parts/deliveries.tsx';

const STATUSES = ['queued', 'scheduled', 'delivering', 'retrying', 'succeeded', 'failed', 'cancelled'];

/** A datetime-local value (the browser's time zone) as ISO 8601; undefined when empty. */
export function isoOf(local: string): string | undefined {
  if (!local) return undefined;
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? local : d.toISOString();
}

export default function DeliveriesPage() {
  const [, navigate] = useLocation();
  const search = new URLSearchParams(useSearch());
  const filters = { webhookId: search.get('webhookId') ?? '', status: search.get('status') ?? '', eventId: search.get('eventId') ?? '', idempotencyKey: search.get('idempotencyKey') ?? '', from: search.get('from') ?? '', to: search.get('to') ?? '' };
  const setFilter = (k: keyof typeof filters, v: string) => {
    const next = new URLSearchParams(search);
    if (v) next.set(k, v);
    else next.delete(k);
    navigate(`/deliveries${next.size ? `?${next}` : ''}`, { replace: true });
  };
  const key = JSON.stringify(filters);
  const list = usePaged(
    (cursor) =>
      gql(
        graphql(`query($cursor: String, $webhookId: String, $status: String, $eventId: String, $idempotencyKey: String, $from: String, $to: String) {
          deliveries(limit: 50, cursor: $cursor, webhookId: $webhookId, status: $status, eventId: $eventId, idempotencyKey: $idempotencyKey, from: $from, to: $to) { items { ...DeliveryFields } nextCursor }
        }`, [DELIVERY_FIELDS]),
        { cursor, webhookId: filters.webhookId || undefined, status: filters.status || undefined, eventId: filters.eventId || undefined, idempotencyKey: filters.idempotencyKey || undefined, from: isoOf(filters.from), to: isoOf(filters.to) },
      ).then((d) => d.deliveries),
    [key],
  );
  const { live, error: liveError, fresh } = useLiveDeliveries(
    filters.webhookId || undefined,
    (d) => {
      if (filters.eventId && d.eventId !== filters.eventId) return false;
      if (filters.idempotencyKey && d.idempotencyKey !== filters.idempotencyKey) return false;
      if (filters.from || filters.to) return false; // a time window: the page shows a fixed period
      list.setItems((items) => upsertDelivery(items, d, filters.status || undefined));
    },
    key,
  );
  const [notice, setNotice] = useState<string>();
  const bulk = useAction(async () => {
    const d = await gql(graphql(`mutation($webhookId: String, $status: String, $eventId: String, $from: String, $to: String) { createReplayJob(webhookId: $webhookId, status: $status, eventId: $eventId, from: $from, to: $to) { id status total } }`), {
      webhookId: filters.webhookId || undefined,
      status: filters.status || undefined,
      eventId: filters.eventId || undefined,
      from: isoOf(filters.from),
      to: isoOf(filters.to),
    });
    setNotice(`Bulk replay queued (job ${d.createReplayJob.id}, ${d.createReplayJob.total} deliveries).`);
  });
  return (
    <Page
      title="Deliveries"
      actions={
        <>
          <LiveMark live={live} />
          {/* A bulk replay selects by webhook, status, event and time; not by idempotency key. */}
          {filters.idempotencyKey ? null : (
            <ConfirmButton
              label="Replay all matching"
              title="Replay every delivery that matches the filters?"
              body="Each is sent again, byte for byte with the same webhook-id, as a new delivery (Starter and above; replays count against the replay volume quota)."
              onConfirm={() => bulk.call()}
            />
          )}
        </>
      }
    >
      {notice ? (
        <p class="success-banner" role="status">
          {notice}
        </p>
      ) : null}
      <ErrorBanner error={bulk.error} />
      <form class="filters" role="search" aria-label="Filter deliveries" onSubmit={(e) => e.preventDefault()}>
        <WebhookSelect value={filters.webhookId} onChange={(v) => setFilter('webhookId', v)} />
        <Select label="Status" name="status" value={filters.status} onChange={(e) => setFilter('status', e.currentTarget.value)} options={[['', 'Any status'], ...STATUSES.map((s) => [s, s] as [string, string])]} />
        <Field label="Event id" name="eventId" value={filters.eventId} onChange={(e) => setFilter('eventId', e.currentTarget.value.trim())} placeholder="evt_…" />
        <Field label="Idempotency key" name="idempotencyKey" value={filters.idempotencyKey} onChange={(e) => setFilter('idempotencyKey', e.currentTarget.value)} placeholder="order-42" />
        <Field label="From" name="from" type="datetime-local" value={filters.from} onChange={(e) => setFilter('from', e.currentTarget.value)} />
        <Field label="To" name="to" type="datetime-local" value={filters.to} onChange={(e) => setFilter('to', e.currentTarget.value)} />
      </form>
      <PagedTable
        list={list}
        error={liveError}
        label="Deliveries"
        columns={DELIVERY_COLUMNS}
        empty={
          <Empty title="No deliveries match">
            <p>Deliveries appear here, live, as events arrive. Send an event to a webhook's ingest URL:</p>
            <pre class="code">{`curl -X POST '${session.publicUrl}/i/<publicId>' -H 'Authorization: Bearer <ingest secret>' -d '{"hello":"world"}'`}</pre>
            <p>
              No webhook yet? <Link href="/webhooks">Create one</Link>.
            </p>
          </Empty>
        }
        row={deliveryRow(fresh)}
      />
    </Page>
  );
}
