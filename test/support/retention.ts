import { runRetention, type RetentionOptions, type RetentionReport } from '../../src/retention/run.ts';

type RetentionRuntime = Parameters<typeof runRetention>[0];

/**
 * One retention pass that ran. A test app with a job runner runs retention from its crontab every
 * minute under the same advisory lock, and a pass that finds the lock taken gives way at once
 * (`ran: false`, nothing done): the test's pass is tried again until it runs (at most 10 s).
 */
export async function retentionPass(rt: RetentionRuntime, opts: RetentionOptions = {}): Promise<RetentionReport> {
  for (let tries = 1; ; tries++) {
    const report = await runRetention(rt, opts);
    if (report.ran || tries >= 100) return report;
    await new Promise((r) => setTimeout(r, 100));
  }
}
