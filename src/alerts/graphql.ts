import type { AlertDispatch, AlertRule } from '../generated/prisma/client.ts';
import { builder, type BuilderTypes } from '../graphql/builder.ts';
import { connectionOf, pageArgs, pageOf, pageRequestOf } from '../pagination/graphql.ts';
import { createAlertRule, deleteAlertRule, getAlertRule, listAlertDispatches, listAlertRules, updateAlertRule, type AlertRuleInput } from './rules.ts';

const ConditionRef = builder.objectRef<AlertRule>('AlertCondition').implement({
  fields: (t) => ({
    type: t.string({ description: 'failure_rate, consecutive_failures, dlq_added or backlog_depth.', resolve: (r) => r.conditionType }),
    threshold: t.float({ resolve: (r) => r.threshold }),
    windowSeconds: t.int({ description: 'Look-back of failure_rate and dlq_added (60..86400).', resolve: (r) => r.windowSeconds }),
  }),
});

// Shared by AlertRule and CreatedAlertRule.
function ruleFields(t: PothosSchemaTypes.ObjectFieldBuilder<BuilderTypes, AlertRule>) {
  return {
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    webhookId: t.exposeString('webhookId', { nullable: true, description: 'null: every webhook of the project.' }),
    condition: t.field({ type: ConditionRef, resolve: (r: AlertRule) => r }),
    channels: t.field({ type: 'JSON', description: '[{type: "webhook", url} | {type: "email", to}]', resolve: (r: AlertRule) => r.channels }),
    cooldownSeconds: t.exposeInt('cooldownSeconds'),
    enabled: t.exposeBoolean('enabled'),
    state: t.exposeString('state', { description: 'ok or firing.' }),
    lastFiredAt: t.expose('lastFiredAt', { type: 'DateTime', nullable: true }),
    lastValue: t.exposeFloat('lastValue', { nullable: true, description: "The condition's value at the last evaluation." }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  };
}

const RuleRef = builder.objectRef<AlertRule>('AlertRule').implement({ description: 'An operator alert rule.', fields: (t) => ruleFields(t) });
const CreatedRuleRef = builder.objectRef<AlertRule & { signingSecret: string }>('CreatedAlertRule').implement({
  description: 'A new alert rule, with the secret its webhook channels are signed with (shown only here).',
  fields: (t) => ({ ...ruleFields(t), signingSecret: t.exposeString('signingSecret') }),
});
const RulePageRef = pageOf<AlertRule>('AlertRulePage', RuleRef);
const RuleDeletedRef = builder.objectRef<{ id: string; deleted: boolean }>('AlertRuleDeleted').implement({
  fields: (t) => ({ id: t.exposeID('id'), deleted: t.exposeBoolean('deleted') }),
});
const DispatchRef = builder.objectRef<AlertDispatch>('AlertDispatch').implement({
  description: 'One firing or resolution of a rule, with what each channel answered.',
  fields: (t) => ({
    id: t.exposeID('id'),
    ruleId: t.exposeString('ruleId'),
    state: t.exposeString('state', { description: 'firing or resolved.' }),
    value: t.exposeFloat('value'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    channels: t.field({ type: 'JSON', description: '[{type, target, status: "sent"|"failed"|"pending", error}]', resolve: (d) => d.channels }),
  }),
});
const DispatchPageRef = pageOf<AlertDispatch>('AlertDispatchPage', DispatchRef);

builder.queryFields((t) => ({
  alertRules: t.field({
    type: RulePageRef,
    description: "The project's alert rules, oldest first (Pro and above).",
    args: { ...pageArgs },
    resolve: (_r, a, ctx) => listAlertRules(ctx.rt, ctx.auth.projectId, a),
  }),
  alertRulesConnection: t.connection({
    type: RuleRef,
    description: "The project's alert rules, oldest first, as a Relay connection (Pro and above).",
    resolve: async (_r, a, ctx) => connectionOf(await listAlertRules(ctx.rt, ctx.auth.projectId, pageRequestOf(a))),
  }),
  alertRule: t.field({
    type: RuleRef,
    description: 'One alert rule.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, a, ctx) => getAlertRule(ctx.rt, ctx.auth.projectId, String(a.id)),
  }),
  alertDispatches: t.field({
    type: DispatchPageRef,
    description: 'Firings and resolutions, newest first (Pro and above).',
    args: { ruleId: t.arg.string({ required: false }), state: t.arg.string({ required: false, description: 'firing or resolved.' }), ...pageArgs },
    resolve: (_r, a, ctx) => listAlertDispatches(ctx.rt, ctx.auth.projectId, { ruleId: a.ruleId, state: a.state }, a),
  }),
  alertDispatchesConnection: t.connection({
    type: DispatchRef,
    description: 'Firings and resolutions, newest first, as a Relay connection (Pro and above).',
    args: { ruleId: t.arg.string({ required: false }), state: t.arg.string({ required: false, description: 'firing or resolved.' }) },
    resolve: async (_r, a, ctx) => connectionOf(await listAlertDispatches(ctx.rt, ctx.auth.projectId, { ruleId: a.ruleId, state: a.state }, pageRequestOf(a))),
  }),
}));

builder.mutationFields((t) => {
  const fields = {
    name: t.arg.string({ required: false }),
    webhookId: t.arg.string({ required: false, description: 'A webhook, or null for every webhook (default).' }),
    condition: t.arg({ type: 'JSON', required: false, description: '{type, threshold, windowSeconds (default 300)} (required on create).' }),
    channels: t.arg({ type: 'JSON', required: false, description: '[{type: "webhook", url} | {type: "email", to}] (required on create).' }),
    cooldownSeconds: t.arg.int({ required: false, description: 'Default 3600.' }),
    enabled: t.arg.boolean({ required: false }),
  };
  const input = (a: Record<string, unknown>): AlertRuleInput => ({
    name: a.name ?? undefined,
    webhookId: a.webhookId,
    condition: a.condition ?? undefined,
    channels: a.channels ?? undefined,
    cooldownSeconds: a.cooldownSeconds ?? undefined,
    enabled: a.enabled ?? undefined,
  });
  return {
    createAlertRule: t.field({
      type: CreatedRuleRef,
      description: 'Adds an alert rule (Pro and above).',
      args: fields,
      resolve: (_r, a, ctx) => createAlertRule(ctx.rt, ctx.auth.projectId, input(a)),
    }),
    updateAlertRule: t.field({
      type: RuleRef,
      description: 'Changes an alert rule.',
      args: { id: t.arg.id({ required: true }), ...fields },
      resolve: (_r, { id, ...a }, ctx) => updateAlertRule(ctx.rt, ctx.auth.projectId, String(id), input(a)),
    }),
    deleteAlertRule: t.field({
      type: RuleDeletedRef,
      description: 'Deletes an alert rule (its dispatch history stays).',
      args: { id: t.arg.id({ required: true }) },
      resolve: (_r, a, ctx) => deleteAlertRule(ctx.rt, ctx.auth.projectId, String(a.id)),
    }),
  };
});
