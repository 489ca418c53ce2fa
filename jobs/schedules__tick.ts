import type { Task } from 'graphile-worker';
import { runTick } from '../src/schedules/tick.ts';
import type { Runtime } from '../src/runtime.ts';

export const schedulesTick =
  (rt: Runtime): Task =>
  async (payload) => {
    const { scheduleId, at } = payload as { scheduleId?: unknown; at?: unknown };
    if (typeof scheduleId !== 'string' || typeof at !== 'string') return; // malformed job: nothing to fire
    await runTick(rt, scheduleId, at);
  };
