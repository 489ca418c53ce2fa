import type { Schedule } from '../generated/prisma/client.ts';
import { builder } from '../graphql/builder.ts';
import { connectionOf, pageArgs, pageOf, pageRequestOf } from '../pagination/graphql.ts';
import { FEATURE_TIERS } from '../projects/tiers.ts';
import { createSchedule, deleteSchedule, getSchedule, listSchedules, updateSchedule, type ScheduleInput } from './service.ts';
import { triggerSchedule } from './tick.ts';

export const ScheduleRef = builder.prismaObject('Schedule', {
  description: 'A recurring schedule: each tick is an event of its webhook on channel `cron`.',
  fields: (t) => ({
    id: t.exposeID('id'),
    webhookId: t.exposeID('webhookId'),
    name: t.exposeString('name'),
    cron: t.exposeString('cron', { description: 'Five fields, or six with seconds first.' }),
    timezone: t.exposeString('timezone', { description: 'IANA time zone the expression is read in.' }),
    payload: t.field({ type: 'JSON', description: 'The event body: a string is sent as is, anything else as JSON.', resolve: (s) => s.payload }),
    contentType: t.exposeString('contentType'),
    headers: t.field({ type: 'JSON', description: "The event's request headers (with x-schedule-id), as routing sees them.", resolve: (s) => s.headers }),
    enabled: t.exposeBoolean('enabled'),
    nextRunAt: t.expose('nextRunAt', { type: 'DateTime', nullable: true, description: 'The tick planned next; null while disabled.' }),
    lastRunAt: t.expose('lastRunAt', { type: 'DateTime', nullable: true, description: 'When the last tick ran (fired, skipped or refused).' }),
    lastEventId: t.exposeString('lastEventId', { nullable: true, description: 'The event of the last tick that fired.' }),
    lastStatus: t.exposeString('lastStatus', { nullable: true, description: 'fired, skipped (paused or archived webhook) or refused (a quota).' }),
    skippedCount: t.exposeInt('skippedCount', { description: 'Ticks skipped because the webhook was paused or archived.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const SchedulePageRef = pageOf<Schedule>('SchedulePage', ScheduleRef);

const ScheduleDeletedRef = builder.objectRef<{ id: string; deleted: boolean }>('ScheduleDeleted').implement({
  fields: (t) => ({ id: t.exposeID('id'), deleted: t.exposeBoolean('deleted') }),
});

const TickAcceptedRef = builder.objectRef<{ eventId: string; deliveryId: string; status: string }>('ScheduleTickAccepted').implement({
  description: 'The ingest answer for a tick fired now.',
  fields: (t) => ({
    eventId: t.exposeString('eventId'),
    deliveryId: t.exposeString('deliveryId'),
    status: t.exposeString('status', { description: 'queued, or scheduled (the webhook delays deliveries)' }),
  }),
});

builder.prismaObjectField('Webhook', 'schedulesConnection', (t) =>
  t.relatedConnection('schedules', { cursor: 'id', description: "The webhook's schedules, oldest first.", query: { orderBy: { id: 'asc' } } }),
);

builder.queryFields((t) => ({
  webhookSchedules: t.field({
    type: SchedulePageRef,
    description: `A webhook's schedules, oldest first (cursor-paginated). ${FEATURE_TIERS.recurring_schedules} tier and above.`,
    args: { id: t.arg.id({ required: true, description: 'The webhook.' }), ...pageArgs },
    resolve: (_r, a, ctx) => listSchedules(ctx.rt, ctx.auth.projectId, String(a.id), a),
  }),
  webhookSchedulesConnection: t.connection({
    type: ScheduleRef,
    description: `A webhook's schedules, oldest first, as a Relay connection. ${FEATURE_TIERS.recurring_schedules} tier and above.`,
    args: { id: t.arg.id({ required: true, description: 'The webhook.' }) },
    resolve: async (_r, a, ctx) => connectionOf(await listSchedules(ctx.rt, ctx.auth.projectId, String(a.id), pageRequestOf(a))),
  }),
  webhookSchedule: t.prismaField({
    type: 'Schedule',
    description: 'One schedule of a webhook, with its next and last tick.',
    args: { id: t.arg.id({ required: true, description: 'The webhook.' }), scheduleId: t.arg.id({ required: true }) },
    resolve: (_q, _r, a, ctx) => getSchedule(ctx.rt, ctx.auth.projectId, String(a.id), String(a.scheduleId)),
  }),
}));

builder.mutationFields((t) => {
  const fields = {
    name: t.arg.string({ required: false }),
    cron: t.arg.string({ required: false, description: 'Five fields, or six with seconds first (required on create).' }),
    timezone: t.arg.string({ required: false, description: 'IANA time zone (default UTC).' }),
    payload: t.arg({ type: 'JSON', required: false, description: 'Any JSON (default {}); a string is sent as is.' }),
    contentType: t.arg.string({ required: false, description: 'Default application/json.' }),
    headers: t.arg({ type: 'JSON', required: false, description: "Header names to values: the event's request headers." }),
    enabled: t.arg.boolean({ required: false, description: 'Default true; false stops the ticks.' }),
  };
  const input = (a: Record<string, unknown>): ScheduleInput => ({
    name: a.name ?? undefined,
    cron: a.cron ?? undefined,
    timezone: a.timezone ?? undefined,
    payload: a.payload,
    contentType: a.contentType ?? undefined,
    headers: a.headers ?? undefined,
    enabled: a.enabled ?? undefined,
  });
  return {
    createSchedule: t.prismaField({
      type: 'Schedule',
      description: `Adds a recurring schedule to a webhook (${FEATURE_TIERS.recurring_schedules} tier and above).`,
      args: { id: t.arg.id({ required: true, description: 'The webhook.' }), ...fields },
      resolve: (_q, _r, { id, ...a }, ctx) => createSchedule(ctx.rt, ctx.auth.projectId, String(id), input(a)),
    }),
    updateSchedule: t.prismaField({
      type: 'Schedule',
      description: 'Changes a schedule; a new cron, timezone or enabled state re-plans the next tick at once.',
      args: { id: t.arg.id({ required: true, description: 'The webhook.' }), scheduleId: t.arg.id({ required: true }), ...fields },
      resolve: (_q, _r, { id, scheduleId, ...a }, ctx) => updateSchedule(ctx.rt, ctx.auth.projectId, String(id), String(scheduleId), input(a)),
    }),
    deleteSchedule: t.field({
      type: ScheduleDeletedRef,
      description: 'Deletes a schedule; its planned tick is dropped.',
      args: { id: t.arg.id({ required: true, description: 'The webhook.' }), scheduleId: t.arg.id({ required: true }) },
      resolve: (_r, a, ctx) => deleteSchedule(ctx.rt, ctx.auth.projectId, String(a.id), String(a.scheduleId)),
    }),
    triggerSchedule: t.field({
      type: TickAcceptedRef,
      description: "Fires one tick now, through ingest (the planned ticks go on): answers ingest's answer.",
      args: { id: t.arg.id({ required: true, description: 'The webhook.' }), scheduleId: t.arg.id({ required: true }) },
      resolve: (_r, a, ctx) => triggerSchedule(ctx.rt, ctx.auth.projectId, String(a.id), String(a.scheduleId)),
    }),
  };
});
