// The dead-letter queue: filters, re-drive one entry or every matching entry, export as JSON Lines.
import { useState } from 'preact/hooks';
import { Link, useLocation, useSearch } from 'wouter-preact';
import { gql } from '../api.ts';
import { graphql, type ResultOf } from '../graphql.ts';
import { Badge, ConfirmButton, Empty, Field, Page, PagedTable, Row, Select, Time, useAction, usePaged } from '../ui.tsx';
import { WebhookSelect } from '../parts/webhook-select.tsx';
import { isoOf } from './deliveries.tsx';

const EXPORT_PAGE_CAP = 500; // 20 rows a page: at most 10,000 rows per export

/** One page of the DLQ export. */
const DLQ_EXPORT = graphql(`query($cursor: String, $webhookId: String, $state: String, $from: String, $to: String) {
  dlqExport(limit: 20, cursor: $cursor, webhookId: $webhookId, state: $state, from: $from, to: $to) {
    items { id deliveryId webhookId eventId reason attempts createdAt redrivenAt contentType payloadBase64 lastAttempt { statusCode durationMs error } } nextCursor
  }
}`);

export default function DlqPage() {
  const [, navigate] = useLocation();
  const search = new URLSearchParams(useSearch());
  const filters = { webhookId: search.get('webhookId') ?? '', state: search.get('state') ?? 'pending', from: search.get('from') ?? '', to: search.get('to') ?? '' };
  const setFilter = (k: keyof typeof filters, v: string) => {
    const next = new URLSearchParams(search);
    if (v) next.set(k, v);
    else next.delete(k);
    navigate(`/dlq${next.size ? `?${next}` : ''}`, { replace: true });
  };
  const vars = { webhookId: filters.webhookId || undefined, state: filters.state, from: isoOf(filters.from), to: isoOf(filters.to) };
  const key = JSON.stringify(vars);
  const list = usePaged(
    (cursor) =>
      gql(
        graphql(`query($cursor: String, $webhookId: String, $state: String, $from: String, $to: String) {
          dlq(limit: 50, cursor: $cursor, webhookId: $webhookId, state: $state, from: $from, to: $to) { items { id deliveryId webhookId reason createdAt redrivenAt redriveDeliveryId } nextCursor }
        }`),
        { cursor, ...vars },
      ).then((d) => d.dlq),
    [key],
  );
  const [notice, setNotice] = useState<string>();
  const redrive = useAction(async (entryId: string) => {
    const d = await gql(graphql(`mutation($id: ID!) { redriveDlqEntry(id: $id) { id status } }`), { id: entryId });
    setNotice(`Re-drive queued (job ${d.redriveDlqEntry.id}).`);
    list.reload();
  });
  const bulk = useAction(async () => {
    const d = await gql(graphql(`mutation($webhookId: String, $from: String, $to: String) { redriveDlq(webhookId: $webhookId, from: $from, to: $to) { id status total } }`), {
      webhookId: vars.webhookId,
      from: vars.from,
      to: vars.to,
    });
    setNotice(`Bulk re-drive queued (job ${d.redriveDlq.id}, ${d.redriveDlq.total} entries).`);
    list.reload();
  });
  const exporter = useAction(async () => {
    const rows: unknown[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < EXPORT_PAGE_CAP; page++) {
      const d: ResultOf<typeof DLQ_EXPORT> = await gql(DLQ_EXPORT, { cursor, ...vars });
      rows.push(...d.dlqExport.items);
      cursor = d.dlqExport.nextCursor;
      if (!cursor) break;
    }
    const blob = new Blob([rows.map((r) => JSON.stringify(r)).join('\n') + '\n'], { type: 'application/x-ndjson' });
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = `dlq-${new Date().toISOString().slice(0, 19).replace(/:/g, '')}.jsonl`;
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
    setNotice(`Exported ${rows.length} entr${rows.length === 1 ? 'y' : 'ies'}${cursor ? ' (stopped at the export cap; narrow the filters for the rest)' : ''}.`);
  });
  return (
    <Page
      title="Dead-letter queue"
      actions={
        <>
          <button type="button" onClick={() => exporter.call()} disabled={exporter.pending}>
            {exporter.pending ? 'Exporting…' : 'Export (JSON Lines)'}
          </button>
          <ConfirmButton
            label="Re-drive all matching"
            title="Re-drive every pending entry that matches the filters?"
            body="Each becomes a new delivery of its payload (Starter and above). Entries already re-driven are left alone."
            disabled={filters.state === 'redriven'}
            onConfirm={() => bulk.call()}
          />
        </>
      }
    >
      <form class="filters" role="search" aria-label="Filter DLQ entries" onSubmit={(e) => e.preventDefault()}>
        <WebhookSelect value={filters.webhookId} onChange={(v) => setFilter('webhookId', v)} />
        <Select
          label="State"
          name="state"
          value={filters.state}
          onChange={(e) => setFilter('state', e.currentTarget.value)}
          options={[
            ['pending', 'pending'],
            ['redriven', 'redriven'],
            ['all', 'all'],
          ]}
        />
        <Field label="From" name="from" type="datetime-local" value={filters.from} onChange={(e) => setFilter('from', e.currentTarget.value)} />
        <Field label="To" name="to" type="datetime-local" value={filters.to} onChange={(e) => setFilter('to', e.currentTarget.value)} />
      </form>
      {notice ? (
        <p class="success-banner" role="status">
          {notice}
        </p>
      ) : null}
      <PagedTable
        list={list}
        error={redrive.error ?? bulk.error ?? exporter.error}
        label="DLQ entries"
        columns={['Entry', 'Delivery', 'Reason', 'Dead since', 'State']}
        actions
        empty={
          <Empty title="The DLQ is empty">
            <p>A delivery lands here when its retry policy gives up. Nothing to do: failed deliveries will show up here for re-drive.</p>
          </Empty>
        }
        row={(e) => (
          <Row
            key={e.id}
            data-dlq-id={e.id}
            cells={[
              <code>{e.id}</code>,
              <Link href={`/deliveries/${e.deliveryId}`}>{e.deliveryId}</Link>,
              e.reason,
              <Time value={e.createdAt} />,
              e.redrivenAt ? (
                <>
                  <Badge value="redriven" /> {e.redriveDeliveryId ? <Link href={`/deliveries/${e.redriveDeliveryId}`}>{e.redriveDeliveryId}</Link> : null}
                </>
              ) : (
                <Badge value="pending" />
              ),
              e.redrivenAt ? null : (
                <button type="button" class="small" onClick={() => redrive.call(e.id)} disabled={redrive.pending} aria-label={`Re-drive ${e.id}`}>
                  Re-drive
                </button>
              ),
            ]}
          />
        )}
      />
    </Page>
  );
}
