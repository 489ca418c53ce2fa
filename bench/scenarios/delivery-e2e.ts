import type { Scenario } from '../scenario.ts';
import type { E2eInput, E2eOutput } from '../load/delivery-e2e-process.ts';
import type { GraphileInput, GraphileOutput } from '../load/graphile-post-process.ts';

const BURST = 20_000;

const deliveryE2e: Scenario = {
  name: 'delivery-e2e',
  description:
    `Ingest ${BURST.toLocaleString('en')} 1 KB events over HTTP to one webhook (maxInFlight 100) delivering to a loopback receiver; ` +
    'deliveries/s from the first ingest to the last receipt, ingest→receiver latency; then a steady 200 events/s for 10 s. ' +
    'Baseline: graphile-worker with the same runner settings running a trivial HTTP-POST task for the same number of jobs.',
  timeoutMs: 15 * 60_000,
  async run(ctx) {
    const base = await ctx.runLoadProcess<GraphileOutput>('bench/load/graphile-post-process.ts', { databaseUrl: ctx.databaseUrl, jobs: BURST, concurrency: 32 } satisfies GraphileInput, { timeoutMs: 6 * 60_000 });
    ctx.log(`graphile-worker baseline: ${base.jobsPerSec.toFixed(0)} jobs/s`);
    const r = await ctx.runLoadProcess<E2eOutput>(
      'bench/load/delivery-e2e-process.ts',
      { serviceUrl: ctx.serviceUrl, apiKey: ctx.apiKey, burstEvents: BURST, steadyRate: 200, steadySeconds: 10, connections: ctx.settings.connections } satisfies E2eInput,
      { timeoutMs: 10 * 60_000 },
    );
    return [
      { name: 'graphile-worker HTTP-POST baseline', throughput: base.jobsPerSec, unit: 'jobs/s', p50Ms: 0, p99Ms: 0, notes: `${base.jobs} jobs in ${base.seconds.toFixed(1)} s` },
      {
        name: 'delivery-e2e burst',
        throughput: r.burst.deliveriesPerSec,
        unit: 'deliveries/s',
        p50Ms: r.burst.p50Ms,
        p99Ms: r.burst.p99Ms,
        baseline: 'graphile-worker HTTP-POST baseline',
        notes: `ingest ${r.burst.ingestPerSec.toFixed(0)} events/s; all ${r.burst.events} delivered in ${r.burst.totalSeconds.toFixed(1)} s; latency is ingest→receiver under the burst backlog`,
      },
      {
        name: 'delivery-e2e drain (engine alone)',
        throughput: r.burst.drainPerSec,
        unit: 'deliveries/s',
        p50Ms: 0,
        p99Ms: 0,
        baseline: 'graphile-worker HTTP-POST baseline',
        notes: `${r.burst.drained} deliveries that arrived after the last event was accepted, per second: the delivery engine without ingest competing for the 2 cores`,
      },
      { name: 'delivery-e2e steady 200/s', throughput: r.steady.events / 10, unit: 'events/s', p50Ms: r.steady.p50Ms, p99Ms: r.steady.p99Ms, notes: 'ingest→receiver latency at a steady 200 events/s' },
    ];
  },
};

export default deliveryE2e;
