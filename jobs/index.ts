import type { TaskList } from 'graphile-worker';
import type { DeliveryEngine } from '../src/deliveries/attempt.ts';
import { ATTEMPT_TASK } from '../src/deliveries/job.ts';
import { BULK_REPLAY_TASK } from '../src/deliveries/replay.ts';
import type { Runtime } from '../src/runtime.ts';
import { TICK_TASK } from '../src/schedules/tick.ts';
import { RETENTION_TASK } from '../src/retention/run.ts';
import { deliveriesAttempt } from './deliveries__attempt.ts';
import { replaysRun } from './replays__run.ts';
import { schedulesTick } from './schedules__tick.ts';
import { retentionRun } from './retention__run.ts';

export { RETENTION_CRONTAB } from '../src/retention/run.ts';

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
  };
}
