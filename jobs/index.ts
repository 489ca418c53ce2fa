import type { TaskList } from 'graphile-worker';
import type { DeliveryEngine } from '../src/deliveries/engine.ts';
import { ATTEMPT_TASK } from '../src/deliveries/job.ts';
import { BULK_REPLAY_TASK } from '../src/deliveries/replay.ts';
import type { Runtime } from '../src/runtime.ts';
import { log } from '../src/log.ts';
import { TICK_TASK } from '../src/schedules/tick.ts';
import { RETENTION_CRONTAB, RETENTION_TASK } from '../src/retention/run.ts';
import { BACKLOG_SAMPLE_CRONTAB, BACKLOG_SAMPLE_TASK } from '../src/metrics/backlog.ts';
import { metricsSampleBacklog } from './metrics__sample_backlog.ts';
import { createDrainClient, DRAIN_SEND_TASK } from '../src/drains/send.ts';
import { drainsSend } from './drains__send.ts';
import { ALERT_DISPATCH_TASK, ALERTS_CRONTAB, ALERTS_TASK } from '../src/alerts/evaluate.ts';
import { alertsEvaluate } from './alerts__evaluate.ts';
import { alertsDispatch } from './alerts__dispatch.ts';
import { deliveriesAttempt } from './deliveries__attempt.ts';
import { replaysRun } from './replays__run.ts';
import { schedulesTick } from './schedules__tick.ts';
import { retentionRun } from './retention__run.ts';
import { ORPHAN_SWEEP_CRONTAB, ORPHAN_SWEEP_TASK } from '../src/files/orphans.ts';
import { filesSweepOrphans } from './files__sweep_orphans.ts';
import { ensureHistoryPartitions, PARTITION_CRONTAB, PARTITION_TASK } from '../src/retention/run.ts';
import { historyPartitions } from './history__partitions.ts';

/** graphile-worker's crontab: every recurring job, one line each. */
export const CRONTAB = [RETENTION_CRONTAB, BACKLOG_SAMPLE_CRONTAB, ALERTS_CRONTAB, ORPHAN_SWEEP_CRONTAB, PARTITION_CRONTAB].join('\n');

/**
 * Every graphile-worker task, by name (`domain__action`). Task files are thin: they
 * parse the payload and call a domain service.
 */
export function createTaskList(rt: Runtime, engine: DeliveryEngine): TaskList {
  return {
    [ATTEMPT_TASK]: deliveriesAttempt(engine),
    [BULK_REPLAY_TASK]: replaysRun(rt),
    [TICK_TASK]: schedulesTick(rt),
    [RETENTION_TASK]: retentionRun(rt),
    [BACKLOG_SAMPLE_TASK]: metricsSampleBacklog(rt),
    [DRAIN_SEND_TASK]: drainsSend(rt, createDrainClient(rt)),
    [ALERTS_TASK]: alertsEvaluate(rt),
    [ALERT_DISPATCH_TASK]: alertsDispatch(rt),
    [ORPHAN_SWEEP_TASK]: filesSweepOrphans(rt),
    [PARTITION_TASK]: historyPartitions(rt),
  };
}

/**
 * What a job runner does once before it starts: the history tables' partitions of today and the
 * days ahead (the hourly job keeps them ahead; a failure here is logged and left to it).
 */
export async function beforeRunnerStart(rt: Runtime): Promise<void> {
  await ensureHistoryPartitions(rt.db.pool).catch((err: unknown) => log.warn({ err: (err as Error).message }, 'history partitions not created at start; the hourly job tries again'));
}
