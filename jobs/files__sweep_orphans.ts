import type { Task } from 'graphile-worker';
import { sweepOrphanFiles } from '../src/files/orphans.ts';
import type { Runtime } from '../src/runtime.ts';

/** The orphan file sweep, from graphile-worker's crontab (src/files/orphans.ts ORPHAN_SWEEP_CRONTAB). */
export const filesSweepOrphans =
  (rt: Runtime): Task =>
  async () => {
    await sweepOrphanFiles(rt);
  };
