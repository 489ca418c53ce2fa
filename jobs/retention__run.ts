import type { Task } from 'graphile-worker';
import { runRetention } from '../src/retention/run.ts';
import type { Runtime } from '../src/runtime.ts';

/** The retention pass, from graphile-worker's crontab (src/retention/run.ts RETENTION_CRONTAB). */
export const retentionRun =
  (rt: Runtime): Task =>
  async () => {
    await runRetention(rt);
  };
