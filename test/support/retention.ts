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
