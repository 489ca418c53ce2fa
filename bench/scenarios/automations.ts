import { median } from '../alternated-rounds.ts';
import type { AutomationE2eInput, AutomationE2eOutput } from '../load/automation-e2e-process.ts';
import type { Scenario } from '../scenario.ts';

const STEADY_RATE = 100;
const STEADY_SECONDS = 5;
const ROUNDS = 4;
const BURST = 2_000;
const SANDBOX_RUNS = 5_000;
const SANDBOX_WORKERS = 2;

const automations: Scenario = {
  name: 'automations',
  description:
    `Two webhooks of one project, both on the contract's defaults (maxInFlight 10), in alternated rounds in the same run (${ROUNDS} each): one plain, one whose transform is a trivial Automation ` +
    `(reshapes the 1 KB event). Each round: a steady ${STEADY_RATE} events/s for ${STEADY_SECONDS} s (ingest→receiver latency), then a burst of ` +
    `${BURST.toLocaleString('en')} events (deliveries/s). Then the sandbox alone: a new pool's first run (cold start), and runs/s of a trivial ` +
    `transform through one runner's pool (${SANDBOX_WORKERS} worker threads, fresh QuickJS runtime per run). The baseline is the plain webhook.`,
  timeoutMs: 15 * 60_000,
  async run(ctx) {
    const r = await ctx.runLoadProcess<AutomationE2eOutput>(
      'bench/load/automation-e2e-process.ts',
      {
        serviceUrl: ctx.serviceUrl,
        apiKey: ctx.apiKey,
        steadyRate: STEADY_RATE,
        steadySeconds: STEADY_SECONDS,
        rounds: ROUNDS,
        burstEvents: BURST,
        connections: ctx.settings.connections,
        sandboxRuns: SANDBOX_RUNS,
        sandboxWorkers: SANDBOX_WORKERS,
      } satisfies AutomationE2eInput,
      { timeoutMs: 14 * 60_000 },
    );
    const p50Added = median(r.automation.p50Ms) - median(r.plain.p50Ms);
    return [
      { name: 'steady without automation', throughput: STEADY_RATE, unit: 'events/s', p50Ms: median(r.plain.p50Ms), p99Ms: median(r.plain.p99Ms), notes: `p50 per round: ${r.plain.p50Ms.map((x) => x.toFixed(1)).join(', ')} ms` },
      {
        name: 'steady with a trivial automation',
        throughput: STEADY_RATE,
        unit: 'events/s',
        p50Ms: median(r.automation.p50Ms),
        p99Ms: median(r.automation.p99Ms),
        baseline: 'steady without automation',
        notes: `p50 added per delivery: ${p50Added.toFixed(2)} ms (target ≤ 2 ms); p50 per round: ${r.automation.p50Ms.map((x) => x.toFixed(1)).join(', ')} ms`,
      },
      { name: 'burst without automation', throughput: median(r.plain.burstPerSec), unit: 'deliveries/s', p50Ms: 0, p99Ms: 0, notes: `per round: ${r.plain.burstPerSec.map((x) => x.toFixed(0)).join(', ')}` },
      {
        name: 'burst with a trivial automation',
        throughput: median(r.automation.burstPerSec),
        unit: 'deliveries/s',
        p50Ms: 0,
        p99Ms: 0,
        baseline: 'burst without automation',
        notes: `per round: ${r.automation.burstPerSec.map((x) => x.toFixed(0)).join(', ')}; runs take the project's concurrency slots a block at a time and their records are written in batches`,
      },
      {
        name: 'sandbox runs (one runner pool)',
        throughput: r.sandboxRunsPerSec,
        unit: 'runs/s',
        p50Ms: r.sandboxSerialMs,
        p99Ms: 0,
        notes: `${SANDBOX_RUNS} trivial runs, 64 at a time, ${SANDBOX_WORKERS} worker threads (target ≥ 1,000 runs/s); p50 column: one run alone, ms (serial mean); cold start of a new pool's first run: ${r.coldStartMs.toFixed(0)} ms`,
      },
    ];
  },
};

export default automations;
