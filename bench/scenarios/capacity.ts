// The capacity model (issue 31, docs/scaling.md): what one delivered event costs in CPU of the API
// processes, the job runners and PostgreSQL, in WAL and in connections, measured with 1 + 1 and
// 2 + 2 processes at the highest rate the machine sustains; from the 1 + 1 costs, the throughput
// predicted for both (checked against the measured one) and the cores needed at 1,000, 10,000 and
// 50,000 deliveries/s.
import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createScenarioDatabase } from '../database.ts';
import { CONNECTIONS, MAX_BACKLOG, PROCESS_COUNTS, SECONDS, WARMUP_SECONDS, WEBHOOKS, capacityMarkdown, f2, f3, int, perEvent, predictedOnCoresLeft, predictedRate, type CapacityRun } from '../capacity-model.ts';
import type { CapacityInput, CapacityOutput } from '../load/capacity-process.ts';
import type { Result, Scenario, ScenarioContext } from '../scenario.ts';
import { createBenchProject, startService, startWorker } from '../service.ts';

async function measure(ctx: ScenarioContext, processes: number): Promise<CapacityRun> {
  const db = await createScenarioDatabase(ctx.databaseUrl, `capacity${processes}`);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'bench-capacity-'));
  // One SECRETS_KEY for all: the runners decrypt the signing secrets an API process created.
  const env = { SECRETS_KEY: randomBytes(32).toString('base64') };
  const stops: (() => Promise<void>)[] = [];
  try {
    const apis = [];
    const workers = [];
    for (let i = 0; i < processes; i++) {
      const api = await startService(db.url, path.join(dataDir, `api${i}`), { script: 'src/api.ts', label: `capacity: src/api.ts #${i + 1}`, env });
      stops.push(api.stop);
      apis.push(api);
      const worker = startWorker(db.url, path.join(dataDir, `worker${i}`), { label: `capacity: src/worker.ts #${i + 1}`, env });
      stops.push(worker.stop);
      workers.push(worker);
    }
    const project = await createBenchProject(db.url);
    ctx.log(`${processes} + ${processes}: ${CONNECTIONS} connections, ${WARMUP_SECONDS} s warm-up, ${SECONDS} s measured`);
    const out = await ctx.runLoadProcess<CapacityOutput>(
      'bench/load/capacity-process.ts',
      {
        apiUrls: apis.map((a) => a.url),
        apiKey: project.apiKey,
        databaseUrl: db.url,
        webhooks: WEBHOOKS,
        connections: CONNECTIONS,
        warmupSeconds: WARMUP_SECONDS,
        seconds: SECONDS,
        maxBacklog: MAX_BACKLOG,
        apiPids: apis.map((a) => a.pid),
        workerPids: workers.map((w) => w.pid),
        postmasterPid: ctx.postmasterPid,
      } satisfies CapacityInput,
      { timeoutMs: (WARMUP_SECONDS + SECONDS) * 1000 + 120_000 },
    );
    return { processes, out };
  } finally {
    await Promise.all(stops.map((s) => s().catch(() => {})));
    await db.dispose().catch((e) => ctx.log(`could not drop the capacity database: ${e.message}`));
  }
}

const capacity: Scenario = {
  name: 'capacity',
  description:
    `The capacity model (docs/scaling.md): N \`src/api.ts\` and N \`src/worker.ts\` processes (N = 1, then 2; the contract's defaults) on a database of their own, ${WEBHOOKS} webhooks on their defaults, ` +
    `a loopback receiver answering 200; 1 KB events over HTTP from ${CONNECTIONS} connections at the highest rate the setup sustains (held back while more than ${MAX_BACKLOG} are undelivered), ` +
    `${SECONDS} s after ${WARMUP_SECONDS} s of warm-up. Per delivered event: CPU ms of the API processes, the runners, PostgreSQL (all its processes) and the load generator + receiver, WAL bytes; peak connections. ` +
    `From the 1 + 1 costs: the throughput predicted on this machine (cores ÷ total CPU per event) for 1 + 1 and 2 + 2, against the measured one, and the cores needed at 1,000, 10,000 and 50,000 deliveries/s.`,
  ownServices: true,
  timeoutMs: 8 * 60_000,
  async run(ctx) {
    const cores = os.availableParallelism();
    const runs: CapacityRun[] = [];
    for (const n of PROCESS_COUNTS) {
      const run = await measure(ctx, n);
      const c = perEvent(run);
      ctx.log(
        `${n} + ${n}: ${int(c.deliveredPerSec)} delivered/s (${int(c.ingestedPerSec)} ingested/s); CPU ms/event API ${f3(c.apiMs)}, runner ${f3(c.runnerMs)}, PostgreSQL ${f3(c.postgresMs)}, load ${f3(c.loadMs)}; ` +
          `WAL ${int(c.walBytes)} B/event; peak connections ${run.out.peakConnections}`,
      );
      runs.push(run);
    }
    const section = capacityMarkdown(runs, cores);
    ctx.addSection(section);
    process.stderr.write(`\n${section}\n\n`);
    const base = perEvent(runs[0]);
    const predicted = predictedRate(base, cores);
    const results: Result[] = [];
    for (const run of runs) {
      const c = perEvent(run);
      const name = `capacity ${run.processes} + ${run.processes}, measured`;
      results.push({
        name,
        throughput: c.deliveredPerSec,
        unit: 'deliveries/s',
        p50Ms: run.out.ingestP50Ms,
        p99Ms: run.out.ingestP99Ms,
        connections: CONNECTIONS,
        duration: SECONDS,
        requests: run.out.ingested,
        failures: run.out.failures,
        cpu: {
          events: run.out.delivered,
          seconds: Math.round(run.out.seconds * 10) / 10,
          serviceMsPerEvent: Math.round((c.apiMs + c.runnerMs) * 1000) / 1000,
          postgresMsPerEvent: Math.round(c.postgresMs * 1000) / 1000,
          serviceCores: Math.round((((run.out.cpuMs.api ?? NaN) + (run.out.cpuMs.runner ?? NaN)) / 1000 / run.out.seconds) * 100) / 100,
          postgresCores: Math.round(((run.out.cpuMs.postgres ?? NaN) / 1000 / run.out.seconds) * 100) / 100,
        },
        notes:
          `${int(c.ingestedPerSec)} ingested/s; CPU ms per delivered event: API ${f3(c.apiMs)}, runner ${f3(c.runnerMs)}, PostgreSQL ${f3(c.postgresMs)}, load + receiver ${f3(c.loadMs)}; ` +
          `WAL ${int(c.walBytes)} bytes/event; peak ${run.out.peakConnections} connections; p50/p99: ingest answer; ${run.out.failures} failed ingest requests`,
      });
      results.push({
        name: `capacity ${run.processes} + ${run.processes}, predicted from the 1 + 1 costs`,
        throughput: predicted,
        unit: 'deliveries/s',
        p50Ms: 0,
        p99Ms: 0,
        ratio: Math.round((predicted / c.deliveredPerSec) * 1000) / 1000,
        notes:
          `${cores} cores × 1000 / ${f3(base.totalMs)} CPU ms per event (API + runner + PostgreSQL + load + receiver); "vs baseline" is predicted ÷ measured (${name})` +
          (c.otherCores === undefined ? '' : `; other work took ${f2(c.otherCores)} cores over the window: on the ${f2(cores - c.otherCores)} left, ${int(predictedOnCoresLeft(base, cores, c)!)} deliveries/s predicted, ${f2(predictedOnCoresLeft(base, cores, c)! / c.deliveredPerSec)}× the measured`),
      });
    }
    return results;
  },
};

export default capacity;
