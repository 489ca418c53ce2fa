import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createScenarioDatabase } from '../database.ts';
import type { BacklogInput, BacklogOutput } from '../load/ingest-backlog-process.ts';
import type { E2eInput, E2eOutput } from '../load/delivery-e2e-process.ts';
import type { GraphileInput, GraphileOutput } from '../load/graphile-post-process.ts';
import { startTimingReceiver } from '../load/receiver.ts';
import type { Scenario, ScenarioContext } from '../scenario.ts';
import { createBenchProject, startService, startWorker } from '../service.ts';

const BURST = 20_000;
const MAX_IN_FLIGHT = 100;

/**
 * The delivery engine alone: BURST events ingested while no job runner runs (an API-only
 * instance on a database of its own), then one job runner started to drain the backlog.
 * Deliveries/s from the first receipt to the last.
 */
async function drainBacklog(ctx: ScenarioContext) {
  const db = await createScenarioDatabase(ctx.databaseUrl, 'drain');
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'bench-drain-'));
  // The runner decrypts the signing secrets the API instance created.
  const env = { SECRETS_KEY: randomBytes(32).toString('base64') };
  const receiver = await startTimingReceiver();
  let api: Awaited<ReturnType<typeof startService>> | undefined;
  let worker: ReturnType<typeof startWorker> | undefined;
  try {
    api = await startService(db.url, path.join(dataDir, 'api'), { script: 'src/api.ts', label: 'API only (backlog)', env });
    const project = await createBenchProject(db.url);
    const backlog = await ctx.runLoadProcess<BacklogOutput>(
      'bench/load/ingest-backlog-process.ts',
      { serviceUrl: api.url, apiKey: project.apiKey, receiverUrl: receiver.url, events: BURST, connections: ctx.settings.connections, maxInFlight: MAX_IN_FLIGHT } satisfies BacklogInput,
      { timeoutMs: 6 * 60_000 },
    );
    ctx.log(`backlog of ${backlog.events} events ingested (${backlog.ingestPerSec.toFixed(0)} events/s); starting a job runner`);
    worker = startWorker(db.url, path.join(dataDir, 'worker'), { env });
    await receiver.waitFor(BURST, 300_000);
    const times = [...receiver.firstSeen.values()].sort((a, b) => a - b);
    const seconds = (times[times.length - 1] - times[0]) / 1000;
    return { deliveries: BURST, seconds, perSec: (BURST - 1) / seconds, requests: receiver.requests };
  } finally {
    await worker?.stop();
    await api?.stop();
    await receiver.close();
    await db.dispose().catch((e) => ctx.log(`could not drop the drain database: ${e.message}`));
  }
}

const deliveryE2e: Scenario = {
  name: 'delivery-e2e',
  description:
    `Engine alone: ${BURST.toLocaleString('en')} 1 KB events ingested over HTTP to one webhook (maxInFlight ${MAX_IN_FLIGHT}) while no job runner runs, ` +
    'then one job runner drains them to a loopback receiver; deliveries/s from the first receipt to the last. ' +
    `End to end: the same burst ingested into the service (API and job runner in one process) while it delivers, with ingest→receiver latency; then a steady 200 events/s for 10 s. ` +
    'Baseline: graphile-worker with the same runner settings running a trivial HTTP-POST task for the same number of jobs.',
  timeoutMs: 20 * 60_000,
  async run(ctx) {
    const base = await ctx.runLoadProcess<GraphileOutput>('bench/load/graphile-post-process.ts', { databaseUrl: ctx.databaseUrl, jobs: BURST, concurrency: 32 } satisfies GraphileInput, { timeoutMs: 6 * 60_000 });
    ctx.log(`graphile-worker baseline: ${base.jobsPerSec.toFixed(0)} jobs/s`);
    const drain = await drainBacklog(ctx);
    ctx.log(`engine alone: ${drain.perSec.toFixed(0)} deliveries/s`);
    const r = await ctx.runLoadProcess<E2eOutput>(
      'bench/load/delivery-e2e-process.ts',
      { serviceUrl: ctx.serviceUrl, apiKey: ctx.apiKey, burstEvents: BURST, steadyRate: 200, steadySeconds: 10, connections: ctx.settings.connections } satisfies E2eInput,
      { timeoutMs: 10 * 60_000 },
    );
    return [
      { name: 'graphile-worker HTTP-POST baseline', throughput: base.jobsPerSec, unit: 'jobs/s', p50Ms: 0, p99Ms: 0, notes: `${base.jobs} jobs in ${base.seconds.toFixed(1)} s` },
      {
        name: 'delivery-e2e drain (engine alone)',
        throughput: drain.perSec,
        unit: 'deliveries/s',
        p50Ms: 0,
        p99Ms: 0,
        baseline: 'graphile-worker HTTP-POST baseline',
        notes: `a backlog of ${drain.deliveries} deliveries drained by one job runner in ${drain.seconds.toFixed(1)} s (${drain.requests} requests received)`,
      },
      {
        name: 'delivery-e2e burst',
        throughput: r.burst.deliveriesPerSec,
        unit: 'deliveries/s',
        p50Ms: r.burst.p50Ms,
        p99Ms: r.burst.p99Ms,
        baseline: 'graphile-worker HTTP-POST baseline',
        notes: `ingest ${r.burst.ingestPerSec.toFixed(0)} events/s; all ${r.burst.events} delivered in ${r.burst.totalSeconds.toFixed(1)} s; ingest and delivery share the 2 cores, latency is ingest→receiver under the burst backlog`,
      },
      { name: 'delivery-e2e steady 200/s', throughput: r.steady.events / 10, unit: 'events/s', p50Ms: r.steady.p50Ms, p99Ms: r.steady.p99Ms, notes: 'ingest→receiver latency at a steady 200 events/s' },
    ];
  },
};

export default deliveryE2e;
