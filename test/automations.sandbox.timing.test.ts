// How closely the sandbox's CPU budget ends a run: wall-clock figures, so this file runs in the
// project that runs alone (vitest.config.ts). What ends a run, and that it holds no thread of the
// service, is checked in automations.sandbox.test.ts without timing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sandbox, type RunLimits } from '../src/automations/sandbox.ts';

const LIMITS: RunLimits = { cpuMs: 1_000, memoryBytes: 32 * 1024 * 1024, stackBytes: 512 * 1024, subrequests: 5, logBytes: 16 * 1024, wallMs: 10_000, subrequestTimeoutMs: 5_000 };
const EVENT = JSON.stringify({ id: 'evt_1', receivedAt: '2026-11-24T00:00:00.000Z', channel: 'http', method: 'POST', path: '/', query: {}, headers: {}, contentType: 'application/json', body: {} });

let sandbox: Sandbox;
beforeAll(async () => {
  sandbox = new Sandbox({ workers: 1, allowPrivate: true });
  await sandbox.run({ code: 'export default () => 1', eventJson: EVENT, limits: LIMITS, allowedHosts: [] }); // worker up
});
afterAll(async () => {
  await sandbox?.close();
});

describe('automations sandbox: the CPU budget, timed', () => {
  it('an infinite loop ends within 10% of its CPU budget, and the run answers soon after', async () => {
    // 1,000 ms: a thread descheduled for a moment does not blur the figure.
    const started = performance.now();
    const r = await sandbox.run({ code: 'export default () => { while (true) {} }', eventJson: EVENT, limits: LIMITS, allowedHosts: [] });
    const elapsed = performance.now() - started;
    expect(r.status).toBe('cpu_limit');
    expect(r.cpuMs).toBeGreaterThanOrEqual(LIMITS.cpuMs);
    expect(r.cpuMs).toBeLessThanOrEqual(LIMITS.cpuMs * 1.1);
    // Generous: the point is that the budget, not the 10 s wall-time limit, ended it.
    expect(elapsed).toBeLessThan(LIMITS.cpuMs * 1.1 + 2_000);
  });
});
