import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createScenarioDatabase } from '../database.ts';
import type { SweepInput, SweepOutput, SweepPhase } from '../load/steady-sweep-process.ts';
import type { Result, Scenario, ScenarioContext } from '../scenario.ts';
import { createBenchProject, startService, startWorker } from '../service.ts';

const BURST = 13_000;
const E2E_P99_BAR_MS = 100;
const INGEST_P99_BAR_MS = 50;
const HEALTHZ_RATE = 400;

interface Layout {
  name: string;
  /** Starts the service on `databaseUrl`; resolves with its URL and how to stop it. */
  start(databaseUrl: string, dataDir: string): Promise<{ url: string; stop(): Promise<void> }>;
}

// The service's own defaults (npm start): only what the bench needs to reach it and a loopback
// receiver is set; LOG_LEVEL back to the default `info` that startService lowers.
const DEFAULTS = { LOG_LEVEL: 'info' };

const LAYOUTS: Layout[] = [
  {
    name: 'npm start',
    async start(databaseUrl, dataDir) {
      const s = await startService(databaseUrl, dataDir, { label: 'steady-sweep: src/main.ts', env: DEFAULTS });
      return { url: s.url, stop: s.stop };
    },
  },
  {
    name: 'start:api + start:worker',
    async start(databaseUrl, dataDir) {
      const env = { ...DEFAULTS, SECRETS_KEY: randomBytes(32).toString('base64') };
      const api = await startService(databaseUrl, path.join(dataDir, 'api'), { script: 'src/api.ts', label: 'steady-sweep: src/api.ts', env });
      const worker = startWorker(databaseUrl, path.join(dataDir, 'worker'), { label: 'steady-sweep: src/worker.ts', env });
      return {
        url: api.url,
        async stop() {
          await Promise.all([api.stop(), worker.stop()]);
        },
      };
    },
  },
];

const ms = (n: number) => (n >= 100 ? n.toFixed(0) : n.toFixed(1));

/** The highest rate up to which every phase (from the lowest) meets `ok`; 0 when the first does not. */
function highestRate(phases: SweepPhase[], ok: (p: SweepPhase) => boolean): number {
  let best = 0;
  for (const p of phases) {
    if (!ok(p)) break;
    best = p.rate;
  }
  return best;
}

const meetsE2e = (p: SweepPhase) => p.failures === 0 && p.delivered === p.sent && p.e2e.p99 < E2E_P99_BAR_MS;
const meetsTargets = (p: SweepPhase) => meetsE2e(p) && p.ingest.p99 < INGEST_P99_BAR_MS;

async function sweepLayout(ctx: ScenarioContext, layout: Layout, index: number): Promise<SweepOutput> {
  const db = await createScenarioDatabase(ctx.databaseUrl, `sweep${index}`);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'bench-sweep-'));
  let service: Awaited<ReturnType<Layout['start']>> | undefined;
  try {
    service = await layout.start(db.url, dataDir);
    const project = await createBenchProject(db.url);
    ctx.log(`${layout.name}: sweeping ${ctx.sweep.rates.join(', ')} events/s, ${ctx.sweep.seconds} s each, fresh and after a burst of ${BURST}`);
    return await ctx.runLoadProcess<SweepOutput>(
      'bench/load/steady-sweep-process.ts',
      {
        serviceUrl: service.url,
        apiKey: project.apiKey,
        rates: ctx.sweep.rates,
        seconds: ctx.sweep.seconds,
        warmupEvents: 250,
        burstEvents: BURST,
        burstConnections: ctx.settings.connections,
        healthzRate: HEALTHZ_RATE,
        healthzEveryMs: 20,
        maxInFlight: 100,
      } satisfies SweepInput,
      // Each phase, its drain (≤ 20 s) and the burst's (≤ 120 s), twice, with room to spare.
      { timeoutMs: 4 * 60_000 + 2 * ctx.sweep.rates.length * (ctx.sweep.seconds + 25) * 1000 },
    );
  } finally {
    await service?.stop();
    await db.dispose().catch((e) => ctx.log(`could not drop the sweep database: ${e.message}`));
  }
}

/** The sweep's own table (report section), with every figure of every phase. */
function sweepTable(outputs: { layout: string; out: SweepOutput }[]): string {
  const lines = [
    `A producer sends one ~1 KB event every 1/rate s to one webhook (maxInFlight 100) on keep-alive connections, opening another when all are waiting ` +
      `(it never queues behind its own requests), and stamps each event in its body right before the request is written; a loopback receiver answers 200 at once ` +
      `and records arrival − stamp. "Seconds with e2e > 100 ms": how many seconds of the phase had an event that slow (a stall shows as one or two, saturation as most). Each service on a fresh database with its defaults; 250 events of warm-up, then each rate; then a burst of ${BURST.toLocaleString('en')} events ` +
      `(${'`--connections`'} connections) is drained and the sweep runs again. Targets (issue 14): ingest answer p99 < ${INGEST_P99_BAR_MS} ms and e2e p99 < ${E2E_P99_BAR_MS} ms at 200 and 400 events/s; ` +
      `/healthz p99 < 20 ms during the ${HEALTHZ_RATE}/s phase (probed every 20 ms).`,
    '',
    '| service | state | rate | sent/s | ingest p50 | ingest p99 | ingest max | e2e p50 | e2e p99 | e2e max | /healthz p99 | sender lag p99 / max | seconds with e2e > 100 ms | lost / failed |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  const summary: string[] = [];
  for (const { layout, out } of outputs) {
    for (const run of out.runs) {
      for (const p of run.phases) {
        lines.push(
          `| ${layout} | ${run.label} | ${p.rate}/s | ${p.sentPerSec.toFixed(0)} | ${ms(p.ingest.p50)} | ${ms(p.ingest.p99)} | ${ms(p.ingest.max)} | ${ms(p.e2e.p50)} | ${ms(p.e2e.p99)} | ${ms(p.e2e.max)} | ` +
            `${p.healthz ? ms(p.healthz.p99) : ''} | ${ms(p.senderLag.p99)} / ${ms(p.senderLag.max)} | ${p.slowPerSecond.filter((n) => n > 0).length} of ${p.slowPerSecond.length} | ${p.sent - p.delivered} / ${p.failures} |`,
        );
      }
      summary.push(
        `- ${layout}, ${run.label}: highest rate with e2e p99 < ${E2E_P99_BAR_MS} ms: **${highestRate(run.phases, meetsE2e) || 'none'}${highestRate(run.phases, meetsE2e) ? '/s' : ''}**; ` +
          `with ingest p99 < ${INGEST_P99_BAR_MS} ms too: ${highestRate(run.phases, meetsTargets) || 'none'}${highestRate(run.phases, meetsTargets) ? '/s' : ''}`,
      );
    }
    const reasons = Object.entries(out.failureReasons ?? {});
    if (reasons.length) summary.push(`- ${layout}: failed requests: ${reasons.map(([why, n]) => `${n} × ${why}`).join('; ')}`);
    if (out.burst) summary.push(`- ${layout}: burst of ${out.burst.events} ingested at ${out.burst.ingestPerSec.toFixed(0)} events/s, all delivered ${out.burst.drainedSeconds.toFixed(1)} s after it started`);
  }
  return [...lines, '', ...summary, ''].join('\n');
}

const steadySweep: Scenario = {
  name: 'steady-sweep',
  description:
    'Steady rates (50, 100, 200, 400, 800 events/s by default, 10 s each) on `npm start` (API and runner in one process) and on `start:api` + `start:worker`, each with its defaults on a fresh database, fresh and after a burst: ' +
    'ingest answer and ingest→receiver latency from a stamp taken when the request is written, and /healthz during the 400/s phase. Rows: e2e p50/p99; the rest in the notes and in the steady-sweep section below.',
  timeoutMs: 30 * 60_000,
  // Its own services, on databases of their own: the run's shared service would take CPU from them.
  ownServices: true,
  async run(ctx) {
    const outputs: { layout: string; out: SweepOutput }[] = [];
    const failed: Result[] = [];
    for (const [i, layout] of LAYOUTS.entries()) {
      try {
        outputs.push({ layout: layout.name, out: await sweepLayout(ctx, layout, i) });
      } catch (e) {
        // One layout's failure (or time limit) does not lose the other's figures.
        if (ctx.signal.aborted) throw e;
        ctx.log(`${layout.name} failed: ${(e as Error).message.split('\n')[0]}`);
        failed.push({ name: `steady-sweep ${layout.name}: failed`, throughput: 0, p50Ms: 0, p99Ms: 0, notes: (e as Error).message.split('\n')[0] });
      }
    }
    if (outputs.length === 0) throw new Error(String(failed[0]?.notes));
    ctx.addSection(sweepTable(outputs));
    const results: Result[] = [...failed];
    for (const { layout, out } of outputs) {
      for (const run of out.runs) {
        for (const p of run.phases) {
          results.push({
            name: `steady-sweep ${layout}, ${run.label}, ${p.rate}/s`,
            throughput: p.sentPerSec,
            unit: 'events/s',
            p50Ms: p.e2e.p50,
            p99Ms: p.e2e.p99,
            notes:
              `ingest→receiver max ${ms(p.e2e.max)} ms; ingest answer p50 ${ms(p.ingest.p50)}, p99 ${ms(p.ingest.p99)}, max ${ms(p.ingest.max)} ms` +
              (p.healthz ? `; /healthz p99 ${ms(p.healthz.p99)} ms (${p.healthz.probes} probes)` : '') +
              (p.sent !== p.delivered || p.failures ? `; ${p.sent - p.delivered} not delivered, ${p.failures} failed` : ''),
          });
        }
        results.push({
          name: `steady-sweep ${layout}, ${run.label}: highest rate with e2e p99 < ${E2E_P99_BAR_MS} ms`,
          throughput: highestRate(run.phases, meetsE2e),
          unit: 'events/s',
          p50Ms: 0,
          p99Ms: 0,
          notes: `with ingest answer p99 < ${INGEST_P99_BAR_MS} ms too: ${highestRate(run.phases, meetsTargets)} events/s`,
        });
      }
    }
    return results;
  },
};

export default steadySweep;
