// Metrics and backlog of one webhook over a window (CONTRACT §9): totals, success rate, latency
// percentiles, answers by status class, and the series as small inline charts.
import { useEffect, useState } from 'preact/hooks';
import { Link, useLocation, useSearch } from 'wouter-preact';
import { gql, subscribe, type ApiError } from '../api.ts';
import { graphql } from '../graphql.ts';
import { Empty, ErrorBanner, Loading, Page, Section, Table, useQuery } from '../ui.tsx';
import { WebhookSelect, useWebhookNames } from '../parts/webhook-select.tsx';
import { BarChart, Legend, LineChart } from '../parts/chart.tsx';

export const WINDOWS = ['1h', '24h', '7d', '30d'] as const;
const CLASSES = ['2xx', '3xx', '4xx', '5xx', 'network', 'timeout'] as const;
const OK = '#2f5bd3';
const BAD = '#b42318';
const INGESTED = '#8aa2e6';

const per = (seconds: number) => (seconds === 60 ? 'minute' : seconds < 3600 ? `${seconds / 60} minutes` : seconds === 3600 ? 'hour' : `${seconds / 3600} hours`);
const fmtPct = (v: number | null | undefined) => (v === null || v === undefined ? '—' : `${(v * 100).toFixed(v === 1 || v === 0 ? 0 : 1)} %`);
const fmtMs = (v: number | null | undefined) => (v === null || v === undefined ? '—' : v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${Math.round(v)} ms`);

function Stat({ label, value }: { label: string; value: string | number }) {
  return (
    <div>
      <dt>{label}</dt>
      <dd>{value}</dd>
    </div>
  );
}

export default function MetricsPage() {
  const [, navigate] = useLocation();
  const hooks = useWebhookNames();
  const search = new URLSearchParams(useSearch());
  const webhookId = search.get('webhookId') ?? hooks.data?.[0]?.id ?? '';
  const window = (WINDOWS as readonly string[]).includes(search.get('window') ?? '') ? search.get('window')! : '24h';
  const go = (w: string, win: string) => navigate(`/metrics?webhookId=${encodeURIComponent(w)}&window=${win}`, { replace: true });
  const q = useQuery(
    () =>
      webhookId
        ? gql(
            graphql(`query($id: ID!, $window: String) { webhook(id: $id) { id name
              metrics(window: $window) { window bucketSeconds from to successRate statusCodes totals { ingested attempts succeeded failed retries } latencyMs { p50 p95 p99 } series { t ingested attempts succeeded failed } }
              backlog(window: $window) { depth dlqDepth oldestPendingAt byStatus { queued scheduled delivering retrying } series { t depth } }
            } }`),
            { id: webhookId, window },
          ).then((d) => d.webhook)
        : Promise.resolve(undefined),
    [webhookId, window],
  );
  const [live, setLive] = useState(false);
  const [liveError, setLiveError] = useState<ApiError>();
  useEffect(() => {
    if (!webhookId) return;
    setLive(true);
    // Live: as the webhook's deliveries change, the figures are read again (at most every 3 s).
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stop = subscribe(
      graphql(`subscription($w: ID) { deliveryUpdated(webhookId: $w) { id } }`),
      { w: webhookId },
      () => {
        setLiveError(undefined);
        timer ??= setTimeout(() => {
          timer = undefined;
          q.reload();
        }, 3000);
      },
      (e) => setLiveError(e),
    );
    return () => {
      setLive(false);
      stop();
      if (timer) clearTimeout(timer);
    };
  }, [webhookId]);
  if (hooks.data && hooks.data.length === 0) {
    return (
      <Page title="Metrics">
        <Empty title="No webhook to measure">
          <p>
            Metrics are kept per webhook. <Link href="/webhooks">Create a webhook</Link> and send it an event.
          </p>
        </Empty>
      </Page>
    );
  }
  const w = q.data;
  const m = w?.metrics;
  const b = w?.backlog;
  const codes = (m?.statusCodes ?? {}) as Record<string, number>;
  const codeTotal = CLASSES.reduce((s, c) => s + (codes[c] ?? 0), 0);
  return (
    <Page
      title="Metrics"
      actions={
        <>
          <span class={`live ${live && !liveError ? '' : 'off'}`}>{live && !liveError ? 'Live' : 'Not live'}</span>
          {w ? <Link href={`/webhooks/${w.id}`}>Open {w.name || w.id}</Link> : null}
        </>
      }
    >
      <div class="filters">
        <WebhookSelect value={webhookId} allLabel={null} onChange={(v) => go(v, window)} />
      </div>
      <nav class="tabs" aria-label="Window">
        {WINDOWS.map((win) => (
          <Link key={win} href={`/metrics?webhookId=${encodeURIComponent(webhookId)}&window=${win}`} aria-current={win === window ? 'true' : undefined}>
            {win}
          </Link>
        ))}
      </nav>
      <ErrorBanner error={hooks.error ?? q.error ?? liveError} />
      {q.loading && !m ? <Loading /> : null}
      {m && b ? (
        <>
          <Section title="Deliveries">
            <dl class="stats" aria-label="Totals">
              <Stat label="Ingested" value={m.totals.ingested} />
              <Stat label="Succeeded" value={m.totals.succeeded} />
              <Stat label="Failed" value={m.totals.failed} />
              <Stat label="Attempts" value={m.totals.attempts} />
              <Stat label="Retries" value={m.totals.retries} />
              <Stat label="Success rate" value={fmtPct(m.successRate)} />
            </dl>
            {m.totals.ingested === 0 && m.totals.attempts === 0 ? <p class="muted">Nothing was ingested in the last {m.window}: send an event to the webhook's ingest URL and it shows here within a minute.</p> : null}
            <Legend items={[['succeeded', OK], ['failed', BAD], ['ingested (no outcome yet)', INGESTED]]} />
            <BarChart
              label={`Deliveries per ${per(m.bucketSeconds)} over ${m.window}: ${m.totals.succeeded} succeeded, ${m.totals.failed} failed`}
              bucketSeconds={m.bucketSeconds}
              data={m.series.map((p) => ({
                t: p.t,
                parts: [
                  { name: 'succeeded', value: p.succeeded, color: OK },
                  { name: 'failed', value: p.failed, color: BAD },
                  { name: 'ingested', value: Math.max(0, p.ingested - p.succeeded - p.failed), color: INGESTED },
                ],
              }))}
            />
          </Section>
          <Section title="Latency">
            <p class="muted">From ingest to the first successful attempt.</p>
            <dl class="stats" aria-label="Latency percentiles">
              <Stat label="p50" value={fmtMs(m.latencyMs.p50)} />
              <Stat label="p95" value={fmtMs(m.latencyMs.p95)} />
              <Stat label="p99" value={fmtMs(m.latencyMs.p99)} />
            </dl>
          </Section>
          <Section title="Answers">
            <Table
              label="Attempts by answer"
              columns={['Answer', 'Attempts', 'Share']}
              items={CLASSES}
              row={(c) => (
                <tr key={c}>
                  <td>{c}</td>
                  <td>{codes[c] ?? 0}</td>
                  <td>
                    <meter min={0} max={1} value={codeTotal ? (codes[c] ?? 0) / codeTotal : 0} aria-label={`${c} share`} /> {codeTotal ? fmtPct((codes[c] ?? 0) / codeTotal) : '—'}
                  </td>
                </tr>
              )}
            />
          </Section>
          <Section title="Backlog">
            <dl class="stats" aria-label="Backlog now">
              <Stat label="Pending now" value={b.depth} />
              <Stat label="Queued" value={b.byStatus.queued} />
              <Stat label="Scheduled" value={b.byStatus.scheduled} />
              <Stat label="Delivering" value={b.byStatus.delivering} />
              <Stat label="Retrying" value={b.byStatus.retrying} />
              <Stat label="Dead-letter queue" value={b.dlqDepth} />
            </dl>
            <p class="muted">
              Oldest pending: {b.oldestPendingAt ? new Date(b.oldestPendingAt).toLocaleString() : 'none'}.{' '}
              {b.dlqDepth ? <Link href={`/dlq?webhookId=${encodeURIComponent(webhookId)}`}>Open the dead-letter queue</Link> : null}
            </p>
            <LineChart label={`Highest backlog depth per ${per(m.bucketSeconds)} over ${m.window} (sampled once a minute)`} bucketSeconds={m.bucketSeconds} data={b.series.map((p) => ({ t: p.t, value: p.depth }))} />
          </Section>
        </>
      ) : null}
    </Page>
  );
}
