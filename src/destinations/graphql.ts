import type { Destination } from '../generated/prisma/client.ts';
import { builder } from '../graphql/builder.ts';
import { FEATURE_TIERS } from '../projects/tiers.ts';
import { hasCredentials, publicConfig } from './config.ts';
import { DESTINATION_PACKS, destinationTypeList, type DestinationType } from './packs/index.ts';
import { createDestination, deleteDestination, listDestinations, updateDestination } from './service.ts';

/** The destination types, one value per pack (packs/index.ts); the dashboard's type list is read from it. */
export const DestinationTypeEnum = builder.enumType('DestinationType', {
  values: Object.fromEntries(DESTINATION_PACKS.map((p) => [p.type, { description: p.label }])) as Record<DestinationType, { description: string }>,
});

export const DestinationRef = builder.prismaObject('Destination', {
  fields: (t) => ({
    id: t.exposeID('id'),
    webhookId: t.exposeID('webhookId'),
    name: t.exposeString('name'),
    type: t.field({ type: DestinationTypeEnum, description: destinationTypeList(), resolve: (d) => d.type as DestinationType }),
    isDefault: t.exposeBoolean('isDefault'),
    config: t.field({ type: 'JSON', description: 'The type-specific settings, without credentials.', resolve: (d) => publicConfig(d.config) }),
    hasCredentials: t.boolean({ description: 'Whether credentials are stored (they are never returned).', resolve: (d) => hasCredentials(d.config) }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const DestinationListRef = builder.objectRef<{ items: Destination[] }>('DestinationList').implement({
  fields: (t) => ({ items: t.field({ type: [DestinationRef], resolve: (p) => p.items }) }),
});

const DestinationDeletedRef = builder.objectRef<{ id: string; deleted: boolean }>('DestinationDeleted').implement({
  fields: (t) => ({ id: t.exposeID('id'), deleted: t.exposeBoolean('deleted') }),
});

builder.queryField('webhookDestinations', (t) =>
  t.field({
    type: DestinationListRef,
    description: 'The default destination first, then the named ones.',
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_root, args, ctx) => ({ items: await listDestinations(ctx.rt, ctx.auth.projectId, String(args.id)) }),
  }),
);

builder.mutationField('createDestination', (t) =>
  t.prismaField({
    type: 'Destination',
    description: `Adds a named destination to a webhook, for routing rules to pick. Types other than webhook and cli need the ${FEATURE_TIERS.typed_destinations} tier or above.`,
    args: {
      id: t.arg.id({ required: true, description: 'The webhook.' }),
      name: t.arg.string({ required: true, description: 'Unique within the webhook.' }),
      type: t.arg.string({ required: true, description: `${destinationTypeList()}.` }),
      config: t.arg({ type: 'JSON', required: true, description: 'The type-specific settings (webhook: {url, method?, headers?}; cli: {}, delivered through relay listen), with credentials where the type needs them.' }),
    },
    resolve: (_q, _root, { id, ...input }, ctx) => createDestination(ctx.rt, ctx.auth.projectId, String(id), input),
  }),
);

builder.mutationField('updateDestination', (t) =>
  t.prismaField({
    type: 'Destination',
    description: 'Changes a destination. config is replaced as a whole; stored credentials are kept when it leaves them out.',
    args: {
      id: t.arg.id({ required: true, description: 'The webhook.' }),
      destinationId: t.arg.id({ required: true }),
      name: t.arg.string({ required: false }),
      type: t.arg.string({ required: false }),
      config: t.arg({ type: 'JSON', required: false }),
    },
    resolve: (_q, _root, { id, destinationId, ...input }, ctx) =>
      updateDestination(ctx.rt, ctx.auth.projectId, String(id), String(destinationId), {
        name: input.name ?? undefined,
        type: input.type ?? undefined,
        config: input.config ?? undefined,
      }),
  }),
);

builder.mutationField('deleteDestination', (t) =>
  t.field({
    type: DestinationDeletedRef,
    description: 'Deletes a named destination (not the default one), unless a routing rule uses it.',
    args: { id: t.arg.id({ required: true, description: 'The webhook.' }), destinationId: t.arg.id({ required: true }) },
    resolve: (_root, args, ctx) => deleteDestination(ctx.rt, ctx.auth.projectId, String(args.id), String(args.destinationId)),
  }),
);
