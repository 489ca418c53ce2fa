import type pg from 'pg';

/**
 * A schedule's next tick is ONE graphile-worker job keyed by the schedule (`sch:<id>`), whose
 * payload names the tick's time; the schedule row's `next_run_at` holds the same time. Whoever
 * changes the plan (create, edit, a fired tick) does both in one transaction, so a job whose time
 * is no longer the row's is stale and does nothing, and adding a job under the key replaces the
 * waiting one (a running one keeps running without its key: graphile-worker's add_job).
 */

/** The graphile-worker task that fires a tick (jobs/schedules__tick.ts). */
export const TICK_TASK = 'schedules__tick';

/** graphile-worker's retries of a tick whose transaction failed (the database was away): the same tick, once it commits. */
const TICK_JOB_MAX_ATTEMPTS = 10;

export const tickJobKey = (scheduleId: string) => `sch:${scheduleId}`;

export interface TickJobPayload {
  scheduleId: string;
  /** ISO time of the tick: equal to the row's next_run_at while the job is current. */
  at: string;
}

/** Plans the tick at `at` (replacing the schedule's waiting job), or none (null), in the caller's transaction. */
export async function planTick(client: pg.PoolClient, scheduleId: string, at: Date | null): Promise<void> {
  if (!at) {
    await client.query('SELECT graphile_worker.remove_job($1)', [tickJobKey(scheduleId)]);
    return;
  }
  await client.query(
    `SELECT graphile_worker.add_job($1, json_build_object('scheduleId', $2::text, 'at', $3::text), run_at := $4::timestamptz,
            job_key := $5, max_attempts := ${TICK_JOB_MAX_ATTEMPTS})`,
    [TICK_TASK, scheduleId, at.toISOString(), at, tickJobKey(scheduleId)],
  );
}
