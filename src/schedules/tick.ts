import type pg from 'pg';
import { inTransaction } from '../db/client.ts';
import { DomainError, NotFound } from '../errors.ts';
import { acceptCronTick, type CronTick } from '../ingest/cron-ingest.ts';
import { log } from '../log.ts';
import { hasFeature } from '../projects/gates.ts';
import type { Runtime } from '../runtime.ts';
import { nextTick } from './cron.ts';
import { planTick } from './plan.ts';
import { getSchedule } from './service.ts';

export { TICK_TASK, type TickJobPayload } from './plan.ts';

/** What a tick came to: an event, a skip (paused or archived webhook, tier below schedules) or a refusal (a quota). */
export type TickOutcome = { status: 'fired'; eventId: string } | { status: 'skipped' | 'refused'; code: string } | { status: 'stale' };

interface ScheduleRow {
  id: string;
  cron: string;
  timezone: string;
  payload: unknown;
  content_type: string;
  headers: Record<string, string>;
  public_id: string;
  tier: string;
}

function tickOf(s: ScheduleRow, tickAt: Date): CronTick {
  return { scheduleId: s.id, publicId: s.public_id, payload: s.payload, contentType: s.content_type, headers: s.headers ?? {}, tickAt };
}

/**
 * Fires the tick planned for `at` and plans the next one, in ONE transaction: the schedule row is
 * locked and must still plan `at` (else the job is stale: the tick fired already, or an edit
 * re-planned it), the event is stored through the cron channel, and the row and the next job are
 * written before the commit. So a tick fires once however many runners run, and a runner dying
 * anywhere in between leaves the tick to fire again (the job's retry), not twice.
 *
 * The next tick is the first after now, not after `at`: ticks missed while no runner ran fire as
 * this one catch-up tick, never as a burst.
 *
 * A paused or archived webhook's tick (or a project below the schedules tier) is skipped: counted
 * on the schedule (`skipped_count`, `last_status`), and `last_run_at` moves. A quota refusal is
 * recorded as `refused`. Anything else (the database away) rolls back and the job retries.
 */
export async function runTick(rt: Runtime, scheduleId: string, at: string): Promise<TickOutcome> {
  const planned = new Date(at);
  if (Number.isNaN(planned.getTime())) return { status: 'stale' };
  const outcome = await inTransaction(rt.db.pool, async (client): Promise<TickOutcome> => {
    const { rows } = await client.query<ScheduleRow>(
      `SELECT s.id, s.cron, s.timezone, s.payload, s.content_type, s.headers, w.public_id, p.tier
         FROM schedules s JOIN webhooks w ON w.id = s.webhook_id JOIN projects p ON p.id = s.project_id
        WHERE s.id = $1 AND s.enabled AND s.next_run_at = $2::timestamptz
        FOR UPDATE OF s`,
      [scheduleId, planned],
    );
    const s = rows[0];
    if (!s) return { status: 'stale' };
    const result = hasFeature(s.tier, 'recurring_schedules') ? await fireIn(rt, client, s, planned) : ({ status: 'skipped', code: 'tier_required' } as const);
    const next = nextTick(s.cron, s.timezone, new Date(Math.max(Date.now(), planned.getTime())));
    await client.query(
      `UPDATE schedules SET last_run_at = now(), last_status = $2, next_run_at = $3,
              last_event_id = coalesce($4, last_event_id), skipped_count = skipped_count + $5
        WHERE id = $1`,
      [s.id, result.status, next, result.status === 'fired' ? result.eventId : null, result.status === 'skipped' ? 1 : 0],
    );
    await planTick(client, s.id, next);
    return result;
  });
  // The event's attempt job was written without a NOTIFY (as on every channel): wake the runners now that it is committed.
  if (outcome.status === 'fired') rt.runners.nudge();
  else if (outcome.status !== 'stale') log.debug({ scheduleId, outcome }, 'schedule tick not fired');
  return outcome;
}

/** The tick's event, in a savepoint: a refusal leaves the transaction usable to record it and plan the next tick. */
async function fireIn(rt: Runtime, client: pg.PoolClient, s: ScheduleRow, tickAt: Date): Promise<TickOutcome> {
  await client.query('SAVEPOINT tick');
  try {
    const accepted = await acceptCronTick(rt, tickOf(s, tickAt), client);
    await client.query('RELEASE SAVEPOINT tick');
    return { status: 'fired', eventId: accepted.eventId };
  } catch (err) {
    await client.query('ROLLBACK TO SAVEPOINT tick');
    if (!(err instanceof DomainError)) throw err;
    const skipped = err.code === 'webhook_paused' || err.code === 'not_found';
    return { status: skipped ? 'skipped' : 'refused', code: err.code };
  }
}

/**
 * `POST …/schedules/{id}/trigger`: one tick now, outside the plan (the planned tick still fires
 * when due). Answers what ingest answers: the accepted event, or its refusal (409 paused, 404
 * archived, a quota), and records the tick on the schedule.
 */
export async function triggerSchedule(rt: Runtime, projectId: string, webhookId: string, scheduleId: string) {
  await getSchedule(rt, projectId, webhookId, scheduleId);
  const { rows } = await rt.db.pool.query<ScheduleRow>(
    `SELECT s.id, s.cron, s.timezone, s.payload, s.content_type, s.headers, w.public_id, p.tier
       FROM schedules s JOIN webhooks w ON w.id = s.webhook_id JOIN projects p ON p.id = s.project_id WHERE s.id = $1`,
    [scheduleId],
  );
  if (!rows[0]) throw new NotFound('schedule', scheduleId);
  const accepted = await acceptCronTick(rt, tickOf(rows[0], new Date()));
  await rt.db.pool.query(`UPDATE schedules SET last_run_at = now(), last_status = 'fired', last_event_id = $2 WHERE id = $1`, [scheduleId, accepted.eventId]);
  return accepted;
}
