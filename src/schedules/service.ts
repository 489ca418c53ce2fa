import { z } from 'zod';
import { inTransaction } from '../db/client.ts';
import { InvalidRequest, NotFound } from '../errors.ts';
import type { Schedule } from '../generated/prisma/client.ts';
import { newId } from '../ids.ts';
import { paginate, type Page, type PageRequest } from '../pagination/cursor.ts';
import { requireFeature } from '../projects/gates.ts';
import { getProject } from '../projects/service.ts';
import type { Runtime } from '../runtime.ts';
import { assertStorable, parseInput } from '../validation.ts';
import { headerMapSchema } from '../webhook-config/custom-headers.ts';
import { getWebhook } from '../webhook-config/get-webhook.ts';
import { assertCron, assertTimeZone, nextTick } from './cron.ts';
import { planTick } from './plan.ts';

type Rt = Pick<Runtime, 'db'>;

export interface ScheduleInput {
  name?: unknown;
  cron?: unknown;
  timezone?: unknown;
  payload?: unknown;
  contentType?: unknown;
  headers?: unknown;
  enabled?: unknown;
}

const nameSchema = z.string().trim().max(200);
const contentTypeSchema = z.string().trim().min(1).max(255).refine((v) => !/[\r\n\0]/.test(v), 'must not contain line breaks');

/** Checks in the contract's order: the webhook (404), then the tier (403); validation follows in the caller. */
async function gate(rt: Rt, projectId: string, webhookId: string) {
  const webhook = await getWebhook(rt, projectId, webhookId);
  const project = await getProject(rt, projectId);
  requireFeature(project.tier, 'recurring_schedules');
  return webhook;
}

/** A schedule of the webhook (404 otherwise), after the tier gate. */
export async function getSchedule(rt: Rt, projectId: string, webhookId: string, scheduleId: string): Promise<Schedule> {
  await getWebhook(rt, projectId, webhookId);
  const schedule = await rt.db.prisma.schedule.findFirst({ where: { id: scheduleId, webhookId, projectId } });
  if (!schedule) throw new NotFound('schedule', scheduleId);
  requireFeature((await getProject(rt, projectId)).tier, 'recurring_schedules');
  return schedule;
}

export async function listSchedules(rt: Rt, projectId: string, webhookId: string, page: PageRequest): Promise<Page<Schedule>> {
  await gate(rt, projectId, webhookId);
  return paginate(page, {
    scope: `schedules:${webhookId}`,
    filters: {},
    order: 'asc',
    fetch: (range, order, take) => rt.db.prisma.schedule.findMany({ where: { webhookId, id: range }, orderBy: { id: order }, take }),
  });
}

/** The validated fields of a create (all) or an edit (those given). 400 with `param` on bad input. */
function validate(input: ScheduleInput, current?: Schedule) {
  const out: { name?: string; cron?: string; timezone?: string; payload?: unknown; contentType?: string; headers?: Record<string, string>; enabled?: boolean } = {};
  if (input.name !== undefined && input.name !== null) out.name = parseInput(nameSchema, input.name, 'name');
  if (current === undefined && (input.cron === undefined || input.cron === null)) throw new InvalidRequest('cron is required: five fields, or six with seconds first.', 'cron');
  if (input.cron !== undefined && input.cron !== null) out.cron = assertCron(input.cron, 'UTC');
  if (input.timezone !== undefined && input.timezone !== null) out.timezone = assertTimeZone(input.timezone);
  const cron = out.cron ?? current?.cron;
  const timezone = out.timezone ?? current?.timezone ?? 'UTC';
  if (cron && (out.cron || out.timezone)) assertCron(cron, timezone);
  if (input.payload !== undefined) out.payload = input.payload === null ? {} : input.payload;
  if (input.contentType !== undefined && input.contentType !== null) out.contentType = parseInput(contentTypeSchema, input.contentType, 'contentType');
  if (input.headers !== undefined && input.headers !== null) out.headers = parseInput(headerMapSchema, input.headers, 'headers');
  if (input.enabled !== undefined && input.enabled !== null) {
    if (typeof input.enabled !== 'boolean') throw new InvalidRequest('enabled must be true or false.', 'enabled');
    out.enabled = input.enabled;
  }
  assertStorable({ name: out.name, payload: out.payload, contentType: out.contentType, headers: out.headers }, '');
  return out;
}

const SELECT_ROW = 'SELECT id FROM schedules WHERE id = $1';

export async function createSchedule(rt: Rt, projectId: string, webhookId: string, input: ScheduleInput): Promise<Schedule> {
  await gate(rt, projectId, webhookId);
  const v = validate(input);
  const id = newId('sch');
  const timezone = v.timezone ?? 'UTC';
  const enabled = v.enabled ?? true;
  const next = enabled ? nextTick(v.cron!, timezone, new Date()) : null;
  await inTransaction(rt.db.pool, async (client) => {
    await client.query(
      `INSERT INTO schedules (id, project_id, webhook_id, name, cron, timezone, payload, content_type, headers, enabled, next_run_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, now())`,
      [id, projectId, webhookId, v.name ?? '', v.cron, timezone, JSON.stringify(v.payload ?? {}), v.contentType ?? 'application/json', JSON.stringify(v.headers ?? {}), enabled, next],
    );
    await planTick(client, id, next);
  }).catch((e) => {
    // The webhook was destroyed since it was read.
    throw (e as { code?: unknown } | null)?.code === '23503' ? new NotFound('webhook', webhookId) : e;
  });
  return (await rt.db.prisma.schedule.findUnique({ where: { id } }))!;
}

/** Changes a schedule; a new cron, timezone or enabled state re-plans the next tick at once. */
export async function updateSchedule(rt: Rt, projectId: string, webhookId: string, scheduleId: string, input: ScheduleInput): Promise<Schedule> {
  const current = await getSchedule(rt, projectId, webhookId, scheduleId);
  const v = validate(input, current);
  const replan = v.cron !== undefined || v.timezone !== undefined || v.enabled !== undefined;
  await inTransaction(rt.db.pool, async (client) => {
    // The row lock orders this edit with a tick firing now: whichever commits second plans last.
    const { rows } = await client.query<{ cron: string; timezone: string; enabled: boolean }>(`${SELECT_ROW} FOR UPDATE`, [scheduleId]);
    if (!rows[0]) throw new NotFound('schedule', scheduleId);
    const sets: string[] = [];
    const values: unknown[] = [scheduleId];
    const set = (column: string, value: unknown) => {
      values.push(value);
      sets.push(`${column} = $${values.length}`);
    };
    if (v.name !== undefined) set('name', v.name);
    if (v.cron !== undefined) set('cron', v.cron);
    if (v.timezone !== undefined) set('timezone', v.timezone);
    if (v.payload !== undefined) set('payload', JSON.stringify(v.payload));
    if (v.contentType !== undefined) set('content_type', v.contentType);
    if (v.headers !== undefined) set('headers', JSON.stringify(v.headers));
    if (v.enabled !== undefined) set('enabled', v.enabled);
    let next: Date | null = null;
    if (replan) {
      const enabled = v.enabled ?? current.enabled;
      next = enabled ? nextTick(v.cron ?? current.cron, v.timezone ?? current.timezone, new Date()) : null;
      set('next_run_at', next);
    }
    await client.query(`UPDATE schedules SET ${[...sets, 'updated_at = now()'].join(', ')} WHERE id = $1`, values);
    if (replan) await planTick(client, scheduleId, next);
  });
  return (await rt.db.prisma.schedule.findUnique({ where: { id: scheduleId } }))!;
}

export async function deleteSchedule(rt: Rt, projectId: string, webhookId: string, scheduleId: string) {
  await getSchedule(rt, projectId, webhookId, scheduleId);
  await inTransaction(rt.db.pool, async (client) => {
    await client.query('DELETE FROM schedules WHERE id = $1', [scheduleId]);
    await planTick(client, scheduleId, null);
  });
  return { id: scheduleId, deleted: true };
}
