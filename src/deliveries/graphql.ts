import { builder } from '../graphql/builder.ts';
import { connectionOf, pageArgs, pageOf, pageRequestOf } from '../pagination/graphql.ts';
import type { Delivery } from '../generated/prisma/client.ts';
import { publicDestination, type DeliveryView } from './delivery-view.ts';
import { deliveryListeners, releasingIterator } from './listeners.ts';
import { deliveryTopic } from './notify.ts';
import {
  createBulkRedrive,
  createBulkReplay,
  exportDlq,
  listDlq,
  listReplayJobsOfDelivery,
  redriveDlqEntry,
  replayDelivery,
} from './replay.ts';
import { getDelivery, listDeliveries, listDeliveryAttempts, listWebhookDeliveries } from './delivery-reads.ts';

type LastAttemptShape = { statusCode: number | null; durationMs: number | null; error: string | null };
const LastAttempt = builder.objectRef<LastAttemptShape>('LastAttempt').implement({
  fields: (t) => ({
    statusCode: t.int({ nullable: true, resolve: (p) => p.statusCode ?? null }),
    durationMs: t.int({ nullable: true, resolve: (p) => p.durationMs ?? null }),
    error: t.string({ nullable: true, resolve: (p) => p.error ?? null }),
  }),
});

// Rows from Prisma and change notifications (plain objects with the same camelCase names) both resolve here.
export const DeliveryRef = builder.prismaObject('Delivery', {
  fields: (t) => ({
    id: t.exposeID('id'),
    webhookId: t.exposeString('webhookId'),
    eventId: t.exposeString('eventId'),
    status: t.exposeString('status'),
    destination: t.field({ type: 'JSON', resolve: (d) => publicDestination(d.destination) }),
    attempts: t.exposeInt('attempts'),
    nextAttemptAt: t.field({ type: 'DateTime', nullable: true, resolve: (d) => d.nextAttemptAt ?? null }),
    lastAttempt: t.field({ type: LastAttempt, nullable: true, resolve: (d) => (d.lastAttempt as LastAttemptShape | null) ?? null }),
    replayOf: t.string({ nullable: true, resolve: (d) => d.replayOfId ?? (d as { replayOf?: string | null }).replayOf ?? null }),
    automationId: t.string({ nullable: true, description: 'The Automation whose run produced the delivered payload, when the transform is one.', resolve: (d) => d.automationId ?? null }),
    automationVersion: t.int({ nullable: true, description: 'The version of that Automation that ran.', resolve: (d) => d.automationVersion ?? null }),
    idempotencyKey: t.string({
      nullable: true,
      description: "The producer's Idempotency-Key (or the webhook-id of the Standard Webhooks signature that authenticated it) of the ingest that made this delivery; null when none, and for replays.",
      resolve: (d) => d.idempotencyKey ?? null,
    }),
    createdAt: t.field({ type: 'DateTime', resolve: (d) => d.createdAt }),
    completedAt: t.field({ type: 'DateTime', nullable: true, resolve: (d) => d.completedAt ?? null }),
  }),
});

const AttemptRef = builder.prismaObject('DeliveryAttempt', {
  name: 'DeliveryAttempt',
  fields: (t) => ({
    id: t.exposeID('id'),
    number: t.exposeInt('number'),
    startedAt: t.expose('startedAt', { type: 'DateTime' }),
    durationMs: t.exposeInt('durationMs', { nullable: true }),
    statusCode: t.exposeInt('statusCode', { nullable: true }),
    error: t.exposeString('error', { nullable: true }),
    responseSnippet: t.exposeString('responseSnippet', { nullable: true }),
    outcome: t.exposeString('outcome'),
  }),
});

export const ReplayJobRef = builder.prismaObject('ReplayJob', {
  fields: (t) => ({
    id: t.exposeID('id'),
    kind: t.exposeString('kind'),
    sourceDeliveryId: t.exposeString('sourceDeliveryId', { nullable: true }),
    filter: t.expose('filter', { type: 'JSON', nullable: true }),
    status: t.exposeString('status'),
    total: t.exposeInt('total'),
    created: t.exposeInt('created'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    completedAt: t.expose('completedAt', { type: 'DateTime', nullable: true }),
  }),
});

const DlqEntryRef = builder.prismaObject('DlqEntry', {
  fields: (t) => ({
    id: t.exposeID('id'),
    deliveryId: t.exposeString('deliveryId'),
    webhookId: t.exposeString('webhookId'),
    reason: t.exposeString('reason'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    redrivenAt: t.expose('redrivenAt', { type: 'DateTime', nullable: true }),
    redriveDeliveryId: t.exposeString('redriveDeliveryId', { nullable: true }),
  }),
});

interface DlqExportRow {
  id: string;
  deliveryId: string;
  webhookId: string;
  eventId: string | null;
  reason: string;
  attempts: number;
  lastAttempt: unknown;
  createdAt: Date;
  redrivenAt: Date | null;
  contentType: string | null;
  payloadBase64: string | null;
  sourceContentType: string | null;
  sourceBase64: string | null;
}
const DlqExportRowRef = builder.objectRef<DlqExportRow>('DlqExportRow').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    deliveryId: t.exposeString('deliveryId'),
    webhookId: t.exposeString('webhookId'),
    eventId: t.exposeString('eventId', { nullable: true }),
    reason: t.exposeString('reason'),
    attempts: t.exposeInt('attempts'),
    lastAttempt: t.field({ type: LastAttempt, nullable: true, resolve: (p) => (p.lastAttempt as LastAttemptShape | null) ?? null }),
    createdAt: t.field({ type: 'DateTime', resolve: (p) => p.createdAt }),
    redrivenAt: t.field({ type: 'DateTime', nullable: true, resolve: (p) => p.redrivenAt }),
    contentType: t.exposeString('contentType', { nullable: true }),
    payloadBase64: t.exposeString('payloadBase64', { nullable: true, description: 'The retained payload, base64; null when it is gone.' }),
    sourceContentType: t.exposeString('sourceContentType', { nullable: true, description: "The retained source's content type (email: message/rfc822); null when there is none." }),
    sourceBase64: t.exposeString('sourceBase64', {
      nullable: true,
      description: 'What the channel received when the payload was built from it (email: the raw message), base64; null when there is none or it is gone.',
    }),
  }),
});

const DeliveryPage = pageOf('DeliveryPage', DeliveryRef);
const AttemptPage = pageOf('DeliveryAttemptPage', AttemptRef);
const ReplayJobPage = pageOf('ReplayJobPage', ReplayJobRef);
const DlqPage = pageOf('DlqEntryPage', DlqEntryRef);
const DlqExportPage = pageOf('DlqExportPage', DlqExportRowRef);

const filterArgs = builder.args((t) => ({
  status: t.string({ required: false, description: 'Only deliveries in this status: queued, scheduled, delivering, retrying, succeeded, failed or cancelled.' }),
  eventId: t.string({ required: false, description: 'Only the deliveries of this event.' }),
  idempotencyKey: t.string({ required: false, description: 'Only the deliveries ingested with this Idempotency-Key (or authenticating webhook-id).' }),
  from: t.string({ required: false, description: 'ISO 8601 or Unix seconds (inclusive).' }),
  to: t.string({ required: false, description: 'ISO 8601 or Unix seconds (exclusive).' }),
}));
const dlqArgs = builder.args((t) => ({
  webhookId: t.string({ required: false, description: 'Only the entries of this webhook.' }),
  from: t.string({ required: false, description: 'ISO 8601 or Unix seconds (inclusive).' }),
  to: t.string({ required: false, description: 'ISO 8601 or Unix seconds (exclusive).' }),
  state: t.string({ required: false, description: 'pending (default), redriven or all.' }),
}));

builder.queryFields((t) => ({
  deliveries: t.field({
    type: DeliveryPage,
    description: "The project's deliveries, newest first (cursor-paginated; the cursor is bound to the filters).",
    args: { webhookId: t.arg.string({ required: false, description: 'Only the deliveries of this webhook.' }), ...filterArgs, ...pageArgs },
    resolve: (_r, a, ctx) => listDeliveries(ctx.rt, ctx.auth.projectId, a, a),
  }),
  webhookDeliveries: t.field({
    type: DeliveryPage,
    description: "One webhook's deliveries, newest first (cursor-paginated; the cursor is bound to the filters).",
    args: { id: t.arg.id({ required: true }), ...filterArgs, ...pageArgs },
    resolve: (_r, a, ctx) => listWebhookDeliveries(ctx.rt, ctx.auth.projectId, String(a.id), a, a),
  }),
  delivery: t.prismaField({
    type: 'Delivery',
    description: 'One delivery: its status, destination snapshot, attempt count and last attempt.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_q, _r, a, ctx) => getDelivery(ctx.rt, ctx.auth.projectId, String(a.id)),
  }),
  deliveryAttempts: t.field({
    type: AttemptPage,
    description: "A delivery's attempts, first attempt first (cursor-paginated).",
    args: { id: t.arg.id({ required: true }), ...pageArgs },
    resolve: (_r, a, ctx) => listDeliveryAttempts(ctx.rt, ctx.auth.projectId, String(a.id), a),
  }),
  deliveryAttemptsConnection: t.connection({
    type: AttemptRef,
    description: "A delivery's attempts, first attempt first, as a Relay connection.",
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, a, ctx) => connectionOf(await listDeliveryAttempts(ctx.rt, ctx.auth.projectId, String(a.id), pageRequestOf(a))),
  }),
  deliveryReplayJobs: t.field({
    type: ReplayJobPage,
    description: 'The replay jobs that re-sent this delivery, newest first (cursor-paginated).',
    args: { id: t.arg.id({ required: true }), ...pageArgs },
    resolve: (_r, a, ctx) => listReplayJobsOfDelivery(ctx.rt, ctx.auth.projectId, String(a.id), a),
  }),
  deliveryReplayJobsConnection: t.connection({
    type: ReplayJobRef,
    description: 'The replay jobs that re-sent this delivery, newest first, as a Relay connection.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, a, ctx) => connectionOf(await listReplayJobsOfDelivery(ctx.rt, ctx.auth.projectId, String(a.id), pageRequestOf(a))),
  }),
  dlq: t.field({
    type: DlqPage,
    description: 'DLQ entries, newest first (cursor-paginated; the cursor is bound to the filters).',
    args: { ...dlqArgs, ...pageArgs },
    resolve: (_r, a, ctx) => listDlq(ctx.rt, ctx.auth.projectId, a, a),
  }),
  dlqConnection: t.connection({
    type: DlqEntryRef,
    description: 'DLQ entries, newest first, as a Relay connection (the cursors are bound to the filters).',
    args: { ...dlqArgs },
    resolve: async (_r, a, ctx) => connectionOf(await listDlq(ctx.rt, ctx.auth.projectId, a, pageRequestOf(a))),
  }),
  dlqExport: t.field({
    type: DlqExportPage,
    description: 'DLQ rows with their retained payloads; 20 rows a page at most.',
    args: { ...dlqArgs, ...pageArgs },
    resolve: (_r, a, ctx) => exportDlq(ctx.rt, ctx.auth.projectId, a, a),
  }),
  dlqExportConnection: t.connection({
    type: DlqExportRowRef,
    description: 'DLQ rows with their retained payloads, as a Relay connection; 20 rows a page at most.',
    args: { ...dlqArgs },
    resolve: async (_r, a, ctx) => connectionOf(await exportDlq(ctx.rt, ctx.auth.projectId, a, pageRequestOf(a))),
  }),
  deliveriesConnection: t.connection({
    type: DeliveryRef,
    description: "The project's deliveries, newest first, as a Relay connection (the cursors are bound to the filters).",
    args: { webhookId: t.arg.string({ required: false, description: 'Only the deliveries of this webhook.' }), ...filterArgs },
    resolve: async (_r, a, ctx) => connectionOf(await listDeliveries(ctx.rt, ctx.auth.projectId, a, pageRequestOf(a))),
  }),
  webhookDeliveriesConnection: t.connection({
    type: DeliveryRef,
    description: "One webhook's deliveries, newest first, as a Relay connection (the cursors are bound to the filters).",
    args: { id: t.arg.id({ required: true }), ...filterArgs },
    resolve: async (_r, a, ctx) => connectionOf(await listWebhookDeliveries(ctx.rt, ctx.auth.projectId, String(a.id), a, pageRequestOf(a))),
  }),
}));

builder.mutationFields((t) => ({
  replayDelivery: t.prismaField({
    type: 'ReplayJob',
    description: 'Replays a delivery. It re-sends the dispatch snapshot, byte for byte with the same webhook-id, to the snapshot destination, as a new delivery, and answers the replay job.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_q, _r, a, ctx) => replayDelivery(ctx.rt, ctx.auth.projectId, String(a.id)),
  }),
  createReplayJob: t.prismaField({
    type: 'ReplayJob',
    description: 'Bulk replay of every delivery matching the filter (Starter and above).',
    args: { webhookId: t.arg.string({ required: false }), ...filterArgs },
    resolve: (_q, _r, a, ctx) => createBulkReplay(ctx.rt, ctx.auth.projectId, a),
  }),
  redriveDlqEntry: t.prismaField({
    type: 'ReplayJob',
    description: 'Re-drives one DLQ entry: a new delivery of its payload with the same webhook-id, like a replay.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_q, _r, a, ctx) => redriveDlqEntry(ctx.rt, ctx.auth.projectId, String(a.id)),
  }),
  redriveDlq: t.prismaField({
    type: 'ReplayJob',
    description: 'Bulk re-drive of pending DLQ entries matching the filter (Starter and above).',
    args: { webhookId: t.arg.string({ required: false }), from: t.arg.string({ required: false }), to: t.arg.string({ required: false }) },
    resolve: (_q, _r, a, ctx) => createBulkRedrive(ctx.rt, ctx.auth.projectId, a),
  }),
}));

builder.subscriptionField('deliveryUpdated', (t) =>
  t.field({
    type: DeliveryRef,
    description: "Every state change of the project's deliveries (optionally of one webhook), from any process.",
    args: { webhookId: t.arg.id({ required: false }) },
    subscribe: async (_r, a, ctx) => {
      const changes = ctx.rt.pubsub.subscribe<DeliveryView>(deliveryTopic(ctx.auth.projectId), (d) => {
        const view = d as DeliveryView | null;
        return view && (!a.webhookId || view.webhookId === String(a.webhookId)) ? view : undefined;
      });
      // Claims and results notify only projects with a listener (listeners.ts): counted from here.
      return releasingIterator(changes, await deliveryListeners(ctx.rt).watch(ctx.auth.projectId));
    },
    // The published view has the fields the Delivery type reads, under the same names.
    resolve: (d) => d as unknown as Delivery,
  }),
);
