import { builder } from '../graphql/builder.ts';
import type { RoutingRule } from './rules.ts';
import { getRouting, setRouting } from './service.ts';

export const RoutingRuleRef = builder.objectRef<RoutingRule>('RoutingRule').implement({
  fields: (t) => ({
    name: t.exposeString('name'),
    priority: t.exposeInt('priority', { description: 'Rules run in ascending priority.' }),
    match: t.field({ type: 'JSON', description: 'MongoDB-style query over the event context.', resolve: (r) => r.match }),
    destinationId: t.exposeID('destinationId'),
  }),
});

const RoutingRef = builder.objectRef<{ rules: RoutingRule[] }>('WebhookRouting').implement({
  fields: (t) => ({ rules: t.field({ type: [RoutingRuleRef], resolve: (r) => r.rules }) }),
});

const RoutingRuleInput = builder.inputType('RoutingRuleInput', {
  fields: (t) => ({
    name: t.string({ required: true }),
    priority: t.int({ required: true }),
    match: t.field({ type: 'JSON', required: true, description: 'MongoDB-style query over channel, method, path, query, headers (lower-case names), contentType and body.' }),
    destinationId: t.id({ required: true }),
  }),
});

builder.queryField('webhookRouting', (t) =>
  t.field({
    type: RoutingRef,
    description: "The webhook's routing rules, in ascending priority.",
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => getRouting(ctx.rt, ctx.auth.projectId, String(args.id)),
  }),
);

builder.mutationField('setWebhookRouting', (t) =>
  t.field({
    type: RoutingRef,
    description: 'Replaces the webhook\'s routing rules. The first matching rule in ascending priority picks the destination; none: the default destination.',
    args: { id: t.arg.id({ required: true }), rules: t.arg({ type: [RoutingRuleInput], required: true }) },
    resolve: (_root, args, ctx) => setRouting(ctx.rt, ctx.auth.projectId, String(args.id), args.rules),
  }),
);
