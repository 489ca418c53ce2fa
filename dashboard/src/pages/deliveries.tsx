// Deliveries: filters, and live updates over graphql-ws (deliveryUpdated).
import { useEffect, useState } from 'preact/hooks';
import { Link, useLocation, useSearch } from 'wouter-preact';
import { gql, session, subscribe } from '../api.ts';
import { Badge, ConfirmButton, Empty, ErrorBanner, Field, Loading, LoadMore, Page, Select, Time, useAction, usePaged } from '../ui.tsx';
import { WebhookSelect } from '../parts/webhook-select.tsx';
import type { ApiError } from '../api.ts';

export const DELIVERY_FIELDS = 'id status webhookId eventId attempts createdAt completedAt nextAttemptAt replayOf destination lastAttempt { statusCode durationMs error }';
const STATUSES = ['queued', 'scheduled', 'delivering', 'retrying', 'succeeded', 'failed', 'cancelled'];

/** A datetime-local value (the browser's time zone) as ISO 8601; undefined when empty. */
export function isoOf(local: string): string | undefined {
  if (!local) return undefined;
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? local : d.toISOString();
}

export interface Delivery {
  id: string;
  status: string;
  webhookId: string;
  eventId: string;
  attempts: number;
  createdAt: string;
  completedAt: string | null;
  nextAttemptAt: string | null;
  replayOf: string | null;
  destination: any;
  lastAttempt: { statusCode: number | null; durationMs: number | null; error: string | null } | null;
}

export default function DeliveriesPage() {
  const [, navigate] = useLocation();
  const search = new URLSearchParams(useSearch());
  const filters = { webhookId: search.get('webhookId') ?? '', status: search.get('status') ?? '', eventId: search.get('eventId') ?? '', from: search.get('from') ?? '', to: search.get('to') ?? '' };
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
        `query($cursor: String, $webhookId: String, $status: String, $eventId: String, $from: String, $to: String) {
          deliveries(limit: 50, cursor: $cursor, webhookId: $webhookId, status: $status, eventId: $eventId, from: $from, to: $to) { items { ${DELIVERY_FIELDS} } nextCursor }
        }`,
        { cursor, webhookId: filters.webhookId || undefined, status: filters.status || undefined, eventId: filters.eventId || undefined, from: isoOf(filters.from), to: isoOf(filters.to) },
      ).then((d) => d.deliveries as { items: Delivery[]; nextCursor: string | null }),
    [key],
  );
  const [live, setLive] = useState(false);
  const [liveError, setLiveError] = useState<ApiError>();
  const [fresh, setFresh] = useState<Set<string>>(new Set());
  useEffect(() => {
    setLive(true);
    const stop = subscribe<{ deliveryUpdated: Delivery }>(
      `subscription($webhookId: ID) { deliveryUpdated(webhookId: $webhookId) { ${DELIVERY_FIELDS} } }`,
      { webhookId: filters.webhookId || undefined },
      ({ deliveryUpdated: d }) => {
        setLiveError(undefined);
        if (filters.eventId && d.eventId !== filters.eventId) return;
        if (filters.from || filters.to) return; // a time window: the page shows a fixed period
        list.setItems((items) => {
          const i = items.findIndex((x) => x.id === d.id);
          if (i >= 0) {
            if (filters.status && d.status !== filters.status) return items.filter((x) => x.id !== d.id);
            return items.map((x) => (x.id === d.id ? d : x));
          }
          if (filters.status && d.status !== filters.status) return items;
          return [d, ...items];
        });
        setFresh((s) => new Set(s).add(d.id));
      },
      (e) => setLiveError(e),
    );
    return () => {
      stop();
      setLive(false);
    };
  }, [key]);
  const [notice, setNotice] = useState<string>();
  const bulk = useAction(async () => {
    const d = await gql(`mutation($webhookId: String, $status: String, $eventId: String, $from: String, $to: String) { createReplayJob(webhookId: $webhookId, status: $status, eventId: $eventId, from: $from, to: $to) { id status total } }`, {
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
          <span class={`live ${live && !liveError ? '' : 'off'}`}>{live && !liveError ? 'Live' : 'Not live'}</span>
          <ConfirmButton
            label="Replay all matching"
            title="Replay every delivery that matches the filters?"
            body="Each is sent again, byte for byte with the same webhook-id, as a new delivery (Starter and above; replays count against the replay volume quota)."
            onConfirm={() => bulk.call()}
          />
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
        <Field label="From" name="from" type="datetime-local" value={filters.from} onChange={(e) => setFilter('from', e.currentTarget.value)} />
        <Field label="To" name="to" type="datetime-local" value={filters.to} onChange={(e) => setFilter('to', e.currentTarget.value)} />
      </form>
      <ErrorBanner error={list.error ?? liveError} />
      {list.loading && !list.items.length ? <Loading /> : null}
      {!list.loading && !list.error && list.items.length === 0 ? (
        <Empty title="No deliveries match">
          <p>Deliveries appear here, live, as events arrive. Send an event to a webhook's ingest URL:</p>
          <pre class="code">{`curl -X POST '${session.publicUrl}/i/<publicId>' -H 'Authorization: Bearer <ingest secret>' -d '{"hello":"world"}'`}</pre>
          <p>
            No webhook yet? <Link href="/webhooks">Create one</Link>.
          </p>
        </Empty>
      ) : null}
      {list.items.length ? <DeliveryTable items={list.items} fresh={fresh} /> : null}
      <LoadMore cursor={list.cursor} onMore={() => void list.loadMore()} pending={list.pending} />
    </Page>
  );
}

export function DeliveryTable({ items, fresh }: { items: Delivery[]; fresh?: Set<string> }) {
  return (
    <div class="table-wrap">
      <table aria-label="Deliveries">
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
