import type { Task } from 'graphile-worker';
import { runBulkReplay } from '../src/deliveries/replay.ts';
import type { Runtime } from '../src/runtime.ts';

export const replaysRun =
  (rt: Runtime): Task =>
  async (payload) => {
    const { replayJobId } = payload as { replayJobId?: unknown };
    if (typeof replayJobId !== 'string') return;
    await runBulkReplay(rt, replayJobId);
  };
