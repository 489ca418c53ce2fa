import type { Task } from 'graphile-worker';
import { sampleBacklog } from '../src/metrics/backlog.ts';
import type { Runtime } from '../src/runtime.ts';

/** The backlog sample, from graphile-worker's crontab (src/metrics/backlog.ts BACKLOG_SAMPLE_CRONTAB). */
export const metricsSampleBacklog =
  (rt: Runtime): Task =>
  async () => {
    await sampleBacklog(rt);
  };
