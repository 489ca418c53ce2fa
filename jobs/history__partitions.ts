import type { Task } from 'graphile-worker';
import { ensureHistoryPartitions } from '../src/retention/run.ts';
import type { Runtime } from '../src/runtime.ts';

/** Creates the history tables' daily partitions ahead, from graphile-worker's crontab (src/retention/partitions.ts PARTITION_CRONTAB). */
export const historyPartitions =
  (rt: Runtime): Task =>
  async () => {
    await ensureHistoryPartitions(rt.db.pool);
  };
