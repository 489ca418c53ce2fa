// Passes of the service's background work that take an advisory lock (a test app's own runner
// may hold it at that moment), asked for by a test: each runs until one ran.
import { sweepDeliveries } from '../../src/deliveries/sweep.ts';
import { runRetention, type RetentionOptions, type RetentionReport } from '../../src/retention/run.ts';
import { waitFor } from './app.ts';

type RetentionRuntime = Parameters<typeof runRetention>[0];

/**
 * One retention pass that ran. A test app with a job runner runs retention from its crontab every
 * minute under the same advisory lock, and a pass that finds the lock taken gives way at once
 * (`ran: false`, nothing done): the test's pass is tried again until it runs (at most 10 s), as
 * observability.alerts does with its evaluations.
 */
export async function retentionPass(rt: RetentionRuntime, opts: RetentionOptions = {}): Promise<RetentionReport> {
  const ran = await waitFor(async () => {
    const report = await runRetention(rt, opts);
    return report.ran ? report : null;
  }, 10_000, 100);
  return ran!;
}

/**
 * One delivery sweep that ran: a test app's own sweeper (every 5 s) takes the same advisory lock,
 * and a sweep that finds it taken does nothing (`ran: false`); tried again until one runs. Answers
 * how many deliveries it gave a job.
 */
export async function sweepPass(rt: Parameters<typeof sweepDeliveries>[0]): Promise<number> {
  const swept = await waitFor(async () => {
    const sweep = await sweepDeliveries(rt);
    return sweep.ran ? sweep : null;
  }, 10_000, 50);
  return swept!.requeued;
}
