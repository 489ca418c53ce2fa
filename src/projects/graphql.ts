import type { ApiKey } from '../generated/prisma/client.ts';
import type { ArgBuilder } from '@pothos/core';
import { builder, type BuilderTypes } from '../graphql/builder.ts';
import { connectionOf, pageOf, pageRequestOf } from '../pagination/graphql.ts';
import { listAuditLogs } from './audit-logs.ts';
import { getWebhookQuotaOverrides, setWebhookQuotaOverrides, type WebhookQuotaView } from './overrides.ts';
import { OVERRIDABLE_QUOTAS, projectQuotas, type QuotaOverrides } from './quotas/limits.ts';
import { createApiKey, listApiKeysPage, readProject, revokeApiKey, updateProject } from './service.ts';
import { QUOTA_NAMES, type TierQuotas } from './tiers.ts';
import { readUsage, usageReport, type ProjectUsage, type UsageDay, type UsageMonth, type UsageReport } from './usage.ts';

const QUOTA_DESCRIPTIONS: Record<keyof TierQuotas, string> = {
  monthly_deliveries: 'Deliveries per UTC month (per project).',
  ingest_rate: 'Ingest requests per second.',
  stored_payload_bytes: 'Bytes of retained source payloads.',
  file_storage_bytes: 'Bytes of stored email and form files.',
  backlog_depth: 'Deliveries not yet succeeded or failed (queued, scheduled, delivering, retrying).',
  replay_volume: 'Replays and re-drives per rolling 24 hours.',
  history_retention_seconds: 'How long delivery, attempt, DLQ, replay and audit-log rows are kept.',
  payload_retention_seconds: 'How long source payloads, dispatch snapshots and files are kept.',
};

const QuotasRef = builder.objectRef<TierQuotas>('Quotas').implement({
  description: 'Effective limits, keyed by quota name.',
  fields: (t) =>
    Object.fromEntries(
      QUOTA_NAMES.map((name) => [name, t.field({ type: 'SafeInt', description: QUOTA_DESCRIPTIONS[name], resolve: (q) => q[name] })]),
    ),
});

const QuotaOverridesRef = builder.objectRef<QuotaOverrides>('QuotaOverrides').implement({
  description: "A webhook's overrides; null where the webhook follows the project.",
  fields: (t) =>
    Object.fromEntries(
      OVERRIDABLE_QUOTAS.map((name) => [name, t.field({ type: 'SafeInt', nullable: true, description: QUOTA_DESCRIPTIONS[name], resolve: (q) => q[name] ?? null })]),
    ),
});

const WebhookQuotaOverridesRef = builder.objectRef<WebhookQuotaView>('WebhookQuotaOverrides').implement({
  fields: (t) => ({
    webhookId: t.exposeID('webhookId'),
    quotaOverrides: t.field({ type: QuotaOverridesRef, resolve: (v) => v.quotaOverrides }),
    effectiveQuotas: t.field({ type: QuotasRef, resolve: (v) => v.effectiveQuotas }),
  }),
});

const ProjectUsageRef = builder.objectRef<ProjectUsage>('ProjectUsage').implement({
  description: 'Current usage, keyed like the quotas.',
  fields: (t) => ({
    month: t.exposeString('month', { description: 'The UTC month monthly_deliveries counts, e.g. 2026-11.' }),
    monthly_deliveries: t.field({ type: 'SafeInt', description: 'Deliveries created this UTC month (ingest, replays and re-drives).', resolve: (u) => u.monthly_deliveries }),
    stored_payload_bytes: t.field({ type: 'SafeInt', resolve: (u) => u.stored_payload_bytes }),
    file_storage_bytes: t.field({ type: 'SafeInt', resolve: (u) => u.file_storage_bytes }),
    backlog_depth: t.field({ type: 'SafeInt', resolve: (u) => u.backlog_depth }),
    replay_volume: t.field({ type: 'SafeInt', description: 'Replays and re-drives in the last 24 hours.', resolve: (u) => u.replay_volume }),
  }),
});

export const ProjectRef = builder.prismaObject('Project', {
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    tier: t.exposeString('tier'),
    overageEnabled: t.exposeBoolean('overageEnabled'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    // tier and customQuotas are scalars, loaded with every project row: no selection to track.
    quotas: t.field({ type: QuotasRef, resolve: (p) => projectQuotas(p) }),
    usage: t.field({ type: ProjectUsageRef, resolve: (p, _args, ctx) => readUsage(ctx.rt, p.id) }),
  }),
});

export const ApiKeyRef = builder.prismaObject('ApiKey', {
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    prefix: t.exposeString('prefix', { description: 'First characters of the key, for recognising it; never the key itself.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    lastUsedAt: t.expose('lastUsedAt', { type: 'DateTime', nullable: true }),
    revokedAt: t.expose('revokedAt', { type: 'DateTime', nullable: true }),
  }),
});

export const AuditLogRef = builder.prismaObject('AuditLog', {
  fields: (t) => ({
    id: t.exposeID('id'),
    actor: t.exposeString('actor', { description: 'API key id of the caller, or admin for the operator CLI.' }),
    action: t.exposeString('action', { description: '<target type>.<verb>, e.g. api_key.created.' }),
    targetType: t.exposeString('targetType'),
    targetId: t.exposeString('targetId', { nullable: true }),
    data: t.expose('data', { type: 'JSON' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const CreatedApiKey = builder
  .objectRef<{ apiKey: ApiKey; secret: string }>('CreatedApiKey')
  .implement({
    fields: (t) => ({
      apiKey: t.field({ type: ApiKeyRef, resolve: (p) => p.apiKey }),
      key: t.string({ description: 'The plaintext key. Shown only once.', resolve: (p) => p.secret }),
    }),
  });

const ApiKeyPage = pageOf('ApiKeyPage', ApiKeyRef);
const AuditLogPage = pageOf('AuditLogPage', AuditLogRef);

const UsageDayRef = builder.objectRef<UsageDay>('UsageDay').implement({
  fields: (t) => ({
    date: t.exposeString('date', { description: 'UTC day, e.g. 2026-11-21.' }),
    deliveries: t.field({ type: 'SafeInt', resolve: (d) => d.deliveries }),
    replays: t.field({ type: 'SafeInt', resolve: (d) => d.replays }),
  }),
});

const UsageMonthRef = builder.objectRef<UsageMonth>('UsageMonth').implement({
  fields: (t) => ({
    month: t.exposeString('month', { description: 'UTC month, e.g. 2026-11; sums the days of the range in it.' }),
    deliveries: t.field({ type: 'SafeInt', resolve: (d) => d.deliveries }),
    replays: t.field({ type: 'SafeInt', resolve: (d) => d.replays }),
  }),
});

const UsageTotalsRef = builder.objectRef<UsageReport['totals']>('UsageTotals').implement({
  fields: (t) => ({
    deliveries: t.field({ type: 'SafeInt', resolve: (d) => d.deliveries }),
    replays: t.field({ type: 'SafeInt', resolve: (d) => d.replays }),
  }),
});

const UsageReportRef = builder.objectRef<UsageReport>('UsageReport').implement({
  fields: (t) => ({
    from: t.expose('from', { type: 'DateTime' }),
    to: t.expose('to', { type: 'DateTime' }),
    days: t.field({ type: [UsageDayRef], description: 'Every UTC day overlapping [from, to), oldest first.', resolve: (r) => r.days }),
    months: t.field({ type: [UsageMonthRef], resolve: (r) => r.months }),
    totals: t.field({ type: UsageTotalsRef, resolve: (r) => r.totals }),
  }),
});

// ---------------------------------------------------------------- project

builder.queryField('project', (t) =>
  t.field({
    type: ProjectRef,
    description: 'The project of the calling API key, with its effective quotas and current usage.',
    resolve: (_root, _args, ctx) => readProject(ctx.rt, ctx.auth.projectId),
  }),
);

builder.mutationField('updateProject', (t) =>
  t.prismaField({
    type: 'Project',
    description: 'Changes the project\'s name or monthly-delivery overage. Overage is for paid tiers (403 tier_required on Free).',
    args: { overageEnabled: t.arg.boolean({ required: false }), name: t.arg.string({ required: false }) },
    resolve: (_query, _root, args, ctx) => updateProject(ctx.rt, ctx.auth.projectId, args, ctx.auth.apiKeyId),
  }),
);

builder.queryField('usage', (t) =>
  t.field({
    type: UsageReportRef,
    description: 'Usage between two ISO 8601 timestamps (from before to), by UTC day and month.',
    args: { from: t.arg.string({ required: true }), to: t.arg.string({ required: true }) },
    resolve: (_root, args, ctx) => usageReport(ctx.rt, ctx.auth.projectId, args.from, args.to),
  }),
);

// ---------------------------------------------------------------- API keys

builder.queryField('apiKeys', (t) =>
  t.field({
    type: ApiKeyPage,
    description: 'API keys, newest first (cursor-paginated). Never the key or its hash.',
    args: { limit: t.arg.int({ required: false }), cursor: t.arg.string({ required: false }) },
    resolve: (_root, args, ctx) => listApiKeysPage(ctx.rt, ctx.auth.projectId, args),
  }),
);

builder.queryField('apiKeysConnection', (t) =>
  t.connection({
    type: ApiKeyRef,
    description: 'API keys, newest first, as a Relay connection. Never the key or its hash.',
    resolve: async (_root, args, ctx) => connectionOf(await listApiKeysPage(ctx.rt, ctx.auth.projectId, pageRequestOf(args))),
  }),
);

builder.mutationField('createApiKey', (t) =>
  t.field({
    type: CreatedApiKey,
    description: 'Creates an API key for this project. The answer shows the key itself, once.',
    args: { name: t.arg.string({ required: false, description: 'A name to recognise it by (default "default").' }) },
    resolve: (_root, args, ctx) => createApiKey(ctx.rt, ctx.auth.projectId, args.name ?? 'default', ctx.auth.apiKeyId),
  }),
);

builder.mutationField('revokeApiKey', (t) =>
  t.prismaField({
    type: 'ApiKey',
    description: 'Revokes an API key: it stops working at once, on every process.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_query, _root, args, ctx) => revokeApiKey(ctx.rt, ctx.auth.projectId, String(args.id), ctx.auth.apiKeyId),
  }),
);

// ---------------------------------------------------------------- audit logs

builder.queryField('auditLogs', (t) =>
  t.field({
    type: AuditLogPage,
    description: 'Audit logs, newest first (cursor-paginated). Business tier and above.',
    args: {
      limit: t.arg.int({ required: false }),
      cursor: t.arg.string({ required: false }),
      action: t.arg.string({ required: false }),
      targetType: t.arg.string({ required: false }),
      targetId: t.arg.string({ required: false }),
    },
    resolve: (_root, args, ctx) => listAuditLogs(ctx.rt, ctx.auth.projectId, args),
  }),
);

builder.queryField('auditLogsConnection', (t) =>
  t.connection({
    type: AuditLogRef,
    description: 'Audit logs, newest first, as a Relay connection. Business tier and above.',
    args: {
      action: t.arg.string({ required: false }),
      targetType: t.arg.string({ required: false }),
      targetId: t.arg.string({ required: false }),
    },
    resolve: async (_root, args, ctx) => connectionOf(await listAuditLogs(ctx.rt, ctx.auth.projectId, { ...pageRequestOf(args), action: args.action, targetType: args.targetType, targetId: args.targetId })),
  }),
);

// ---------------------------------------------------------------- webhook quota overrides

const overrideArgs = (arg: ArgBuilder<BuilderTypes>) =>
  Object.fromEntries(
    OVERRIDABLE_QUOTAS.map((name) => [name, arg({ type: 'SafeInt', required: false, description: `${QUOTA_DESCRIPTIONS[name]} null removes the override.` })]),
  );

builder.queryField('webhookQuotaOverrides', (t) =>
  t.field({
    type: WebhookQuotaOverridesRef,
    description: "A webhook's quota overrides and the limits in effect for it.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => getWebhookQuotaOverrides(ctx.rt, ctx.auth.projectId, String(args.id)),
  }),
);

builder.mutationField('setWebhookQuotaOverrides', (t) =>
  t.field({
    type: WebhookQuotaOverridesRef,
    description: "Tightens the project's limits for one webhook. A value above the project's limit is 400; null removes an override; a quota left out keeps its value.",
    args: { id: t.arg.id({ required: true }), ...overrideArgs(t.arg) },
    resolve: (_root, args, ctx) => {
      const { id, ...changes } = args;
      return setWebhookQuotaOverrides(ctx.rt, ctx.auth.projectId, String(id), changes, ctx.auth.apiKeyId);
    },
  }),
);
