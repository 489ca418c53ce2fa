import { builder, type BuilderTypes } from '../graphql/builder.ts';
import { connectionOf, pageArgs, pageOf, pageRequestOf } from '../pagination/graphql.ts';
import { createDrain, deleteDrain, DRAIN_KINDS, getDrain, listDrains, rotateDrainSecret, updateDrain, type DrainInput, type DrainView } from './service.ts';

// Shared by EventDrain and CreatedEventDrain.
function drainFields(t: PothosSchemaTypes.ObjectFieldBuilder<BuilderTypes, DrainView>) {
  return {
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    url: t.exposeString('url', { description: 'Receives `POST {"events": [...]}`, Standard-Webhooks-signed.' }),
    events: t.exposeStringList('events', { description: `Kinds it receives: ${DRAIN_KINDS.join(', ')}.` }),
    enabled: t.exposeBoolean('enabled'),
    droppedCount: t.exposeInt('droppedCount', { description: 'Events dropped because the outbox was over its bound (oldest first).' }),
    lastError: t.exposeString('lastError', { nullable: true, description: 'The last failed send, until one succeeds.' }),
    lastSentAt: t.expose('lastSentAt', { type: 'DateTime', nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  };
}

const DrainRef = builder.objectRef<DrainView>('EventDrain').implement({
  description: "An event drain: the project's state changes, streamed in signed batches.",
  fields: (t) => drainFields(t),
});
const CreatedDrainRef = builder.objectRef<DrainView & { signingSecret: string }>('CreatedEventDrain').implement({
  description: 'A new drain, with its signing secret (shown only here).',
  fields: (t) => ({ ...drainFields(t), signingSecret: t.exposeString('signingSecret') }),
});
const DrainPageRef = pageOf<DrainView>('EventDrainPage', DrainRef);
const DrainDeletedRef = builder.objectRef<{ id: string; deleted: boolean }>('EventDrainDeleted').implement({
  fields: (t) => ({ id: t.exposeID('id'), deleted: t.exposeBoolean('deleted') }),
});
const DrainSecretRef = builder.objectRef<{ id: string; signingSecret: string }>('EventDrainSecret').implement({
  fields: (t) => ({ id: t.exposeID('id'), signingSecret: t.exposeString('signingSecret', { description: 'The new secret, shown only here.' }) }),
});

builder.queryFields((t) => ({
  drains: t.field({
    type: DrainPageRef,
    description: "The project's event drains, oldest first (Pro and above).",
    args: { ...pageArgs },
    resolve: (_r, a, ctx) => listDrains(ctx.rt, ctx.auth.projectId, a),
  }),
  drainsConnection: t.connection({
    type: DrainRef,
    description: "The project's event drains, oldest first, as a Relay connection (Pro and above).",
    resolve: async (_r, a, ctx) => connectionOf(await listDrains(ctx.rt, ctx.auth.projectId, pageRequestOf(a))),
  }),
  drain: t.field({
    type: DrainRef,
    description: 'One event drain.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, a, ctx) => getDrain(ctx.rt, ctx.auth.projectId, String(a.id)),
  }),
}));

builder.mutationFields((t) => {
  const fields = {
    name: t.arg.string({ required: false }),
    url: t.arg.string({ required: false, description: 'http or https URL (required on create).' }),
    events: t.arg.stringList({ required: false, description: `Kinds to receive (default all): ${DRAIN_KINDS.join(', ')}.` }),
    enabled: t.arg.boolean({ required: false, description: 'Default true.' }),
  };
  const input = (a: Record<string, unknown>): DrainInput => ({ name: a.name ?? undefined, url: a.url ?? undefined, events: a.events ?? undefined, enabled: a.enabled ?? undefined });
  return {
    createDrain: t.field({
      type: CreatedDrainRef,
      description: 'Adds an event drain: 1 on Pro, 3 on Business, unlimited on Enterprise; none below Pro.',
      args: fields,
      resolve: (_r, a, ctx) => createDrain(ctx.rt, ctx.auth.projectId, input(a)),
    }),
    updateDrain: t.field({
      type: DrainRef,
      description: 'Changes a drain.',
      args: { id: t.arg.id({ required: true }), ...fields },
      resolve: (_r, { id, ...a }, ctx) => updateDrain(ctx.rt, ctx.auth.projectId, String(id), input(a)),
    }),
    deleteDrain: t.field({
      type: DrainDeletedRef,
      description: 'Deletes a drain and its unsent events.',
      args: { id: t.arg.id({ required: true }) },
      resolve: (_r, a, ctx) => deleteDrain(ctx.rt, ctx.auth.projectId, String(a.id)),
    }),
    rotateDrainSecret: t.field({
      type: DrainSecretRef,
      description: "A new signing secret; the previous one still signs (beside it) for graceSeconds (default 86400).",
      args: { id: t.arg.id({ required: true }), graceSeconds: t.arg.int({ required: false }) },
      resolve: (_r, a, ctx) => rotateDrainSecret(ctx.rt, ctx.auth.projectId, String(a.id), a.graceSeconds ?? undefined),
    }),
  };
});
