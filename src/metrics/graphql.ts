import type { ArgBuilder } from '@pothos/core';
import { builder, type BuilderTypes } from '../graphql/builder.ts';
import { webhookBacklog, webhookMetrics, type WebhookBacklog, type WebhookMetrics } from './service.ts';

const TotalsRef = builder.objectRef<WebhookMetrics['totals']>('MetricTotals').implement({
  fields: (t) => ({
    ingested: t.exposeInt('ingested', { description: 'Events ingested in the window.' }),
    succeeded: t.exposeInt('succeeded', { description: 'Deliveries that finished succeeded in the window.' }),
    failed: t.exposeInt('failed', { description: 'Deliveries that finished failed (to the DLQ) in the window.' }),
    attempts: t.exposeInt('attempts', { description: 'Attempts recorded in the window.' }),
    retries: t.exposeInt('retries', { description: 'Attempts that failed and were retried.' }),
  }),
});

const LatencyRef = builder.objectRef<WebhookMetrics['latencyMs']>('MetricLatency').implement({
  description: 'Ingest-to-first-success latency percentiles in ms (log-scale sketch, within about 1%); null without successes.',
  fields: (t) => ({
    p50: t.exposeFloat('p50', { nullable: true }),
    p95: t.exposeFloat('p95', { nullable: true }),
    p99: t.exposeFloat('p99', { nullable: true }),
  }),
});

const MetricPointRef = builder.objectRef<WebhookMetrics['series'][number]>('MetricPoint').implement({
  fields: (t) => ({
    t: t.expose('t', { type: 'DateTime', description: "The bucket's start." }),
    ingested: t.exposeInt('ingested'),
    succeeded: t.exposeInt('succeeded'),
    failed: t.exposeInt('failed'),
    attempts: t.exposeInt('attempts'),
  }),
});

export const WebhookMetricsRef = builder.objectRef<WebhookMetrics>('WebhookMetrics').implement({
  description: "A webhook's delivery metrics over a window, from its roll-ups.",
  fields: (t) => ({
    webhookId: t.exposeID('webhookId'),
    window: t.exposeString('window', { description: '1h, 24h, 7d or 30d.' }),
    from: t.expose('from', { type: 'DateTime', description: "The first bucket's start." }),
    to: t.expose('to', { type: 'DateTime' }),
    bucketSeconds: t.exposeInt('bucketSeconds', { description: '60 (1h), 900 (24h), 7200 (7d), 21600 (30d).' }),
    totals: t.field({ type: TotalsRef, resolve: (m) => m.totals }),
    successRate: t.exposeFloat('successRate', { nullable: true, description: 'succeeded / (succeeded + failed), 0..1; null without finished deliveries.' }),
    latencyMs: t.field({ type: LatencyRef, resolve: (m) => m.latencyMs }),
    statusCodes: t.field({ type: 'JSON', description: 'Attempts by answer: {"2xx", "3xx", "4xx", "5xx", "network", "timeout"}.', resolve: (m) => m.statusCodes }),
    series: t.field({ type: [MetricPointRef], resolve: (m) => m.series }),
  }),
});

const BacklogByStatusRef = builder.objectRef<WebhookBacklog['byStatus']>('BacklogByStatus').implement({
  fields: (t) => ({
    queued: t.exposeInt('queued'),
    scheduled: t.exposeInt('scheduled'),
    retrying: t.exposeInt('retrying'),
    delivering: t.exposeInt('delivering'),
  }),
});

const BacklogPointRef = builder.objectRef<WebhookBacklog['series'][number]>('BacklogPoint').implement({
  fields: (t) => ({
    t: t.expose('t', { type: 'DateTime', description: "The bucket's start." }),
    depth: t.exposeInt('depth', { description: 'The highest depth sampled in the bucket (sampled once a minute).' }),
  }),
});

export const WebhookBacklogRef = builder.objectRef<WebhookBacklog>('WebhookBacklog').implement({
  description: "A webhook's backlog now, and its sampled depth over a window.",
  fields: (t) => ({
    webhookId: t.exposeID('webhookId'),
    window: t.exposeString('window'),
    depth: t.exposeInt('depth', { description: 'Deliveries pending now.' }),
    oldestPendingAt: t.expose('oldestPendingAt', { type: 'DateTime', nullable: true }),
    byStatus: t.field({ type: BacklogByStatusRef, resolve: (b) => b.byStatus }),
    dlqDepth: t.exposeInt('dlqDepth', { description: 'DLQ entries not re-driven.' }),
    series: t.field({ type: [BacklogPointRef], resolve: (b) => b.series }),
  }),
});

const windowArg = (arg: ArgBuilder<BuilderTypes>) =>
  // An explicit empty `?window=` reaches the service (a 400), not read as absent (src/http/validate-args.ts).
  arg.string({ required: false, description: '1h, 24h, 7d or 30d (default 24h).', extensions: { emptyIsValue: true } });

builder.prismaObjectField('Webhook', 'metrics', (t) =>
  t.field({
    type: WebhookMetricsRef,
    description: "The webhook's metrics over a window.",
    args: { window: windowArg(t.arg) },
    resolve: (w, a, ctx) => webhookMetrics(ctx.rt, ctx.auth.projectId, w.id, a.window),
  }),
);
builder.prismaObjectField('Webhook', 'backlog', (t) =>
  t.field({
    type: WebhookBacklogRef,
    description: "The webhook's backlog, with its depth over a window.",
    args: { window: windowArg(t.arg) },
    resolve: (w, a, ctx) => webhookBacklog(ctx.rt, ctx.auth.projectId, w.id, a.window),
  }),
);

builder.queryFields((t) => ({
  webhookMetrics: t.field({
    type: WebhookMetricsRef,
    description: "A webhook's metrics over a window (archived webhooks too), answered from roll-ups.",
    args: { id: t.arg.id({ required: true, description: 'The webhook.' }), window: windowArg(t.arg) },
    resolve: (_r, a, ctx) => webhookMetrics(ctx.rt, ctx.auth.projectId, String(a.id), a.window),
  }),
  webhookBacklog: t.field({
    type: WebhookBacklogRef,
    description: "A webhook's backlog now and its sampled depth over a window (archived webhooks too).",
    args: { id: t.arg.id({ required: true, description: 'The webhook.' }), window: windowArg(t.arg) },
    resolve: (_r, a, ctx) => webhookBacklog(ctx.rt, ctx.auth.projectId, String(a.id), a.window),
  }),
}));
