import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createScenarioDatabase } from '../database.ts';
import type { SweepInput, SweepOutput, SweepPhase } from '../load/steady-sweep-process.ts';
import { formatRate, resolveRate, type SweepRate } from '../options.ts';
import { ofFloor } from '../report.ts';
import type { Result, Scenario, ScenarioContext } from '../scenario.ts';
import { createBenchProject, startService, startWorker } from '../service.ts';

const BURST = 13_000;
const E2E_P99_BAR_MS = 100;
const INGEST_P99_BAR_MS = 50;
/** Issue 29's targets hold at these fractions of the run's one-statement floor, fresh and after a burst. */
const TARGET_FRACTIONS = [0.1, 0.2];
/** /healthz is probed during the phase whose rate is nearest this fraction of the floor. */
const HEALTHZ_OF_FLOOR = 0.2;

interface Layout {
  name: string;
  /** Starts the service on `databaseUrl`; resolves with its URL, its processes and how to stop it. */
  start(databaseUrl: string, dataDir: string): Promise<{ url: string; pids: number[]; stop(): Promise<void> }>;
}

/** How the sweep's webhook is created: nothing but a url (the contract's defaults), or tuned. */
interface Setting {
  label: string;
  maxInFlight?: number;
}

// The service's own defaults (npm start): only what the bench needs to reach it and a loopback
// receiver is set; LOG_LEVEL back to the default `info` that startService lowers.
const SERVICE_DEFAULTS = { LOG_LEVEL: 'info' };

const NPM_START: Layout = {
  name: 'npm start',
  async start(databaseUrl, dataDir) {
    const s = await startService(databaseUrl, dataDir, { label: 'steady-sweep: src/main.ts', env: SERVICE_DEFAULTS });
    return { url: s.url, pids: [s.pid], stop: s.stop };
  },
};

const SPLIT: Layout = {
  name: 'start:api + start:worker',
  async start(databaseUrl, dataDir) {
    const env = { ...SERVICE_DEFAULTS, SECRETS_KEY: randomBytes(32).toString('base64') };
    const api = await startService(databaseUrl, path.join(dataDir, 'api'), { script: 'src/api.ts', label: 'steady-sweep: src/api.ts', env });
    const worker = startWorker(databaseUrl, path.join(dataDir, 'worker'), { label: 'steady-sweep: src/worker.ts', env });
    return {
      url: api.url,
      pids: [api.pid, worker.pid],
      async stop() {
        await Promise.all([api.stop(), worker.stop()]);
      },
    };
  },
};

const DEFAULTS: Setting = { label: 'defaults (maxInFlight 10)' };
const TUNED: Setting = { label: 'maxInFlight 100', maxInFlight: 100 };

/**
 * The contract's defaults first, the tuned setting beside them on `npm start`; the split layout on
 * the defaults only (the question it answers is the layout's, and a fourth sweep would add minutes).
 */
const SWEEPS: { layout: Layout; setting: Setting }[] = [
  { layout: NPM_START, setting: DEFAULTS },
  { layout: NPM_START, setting: TUNED },
  { layout: SPLIT, setting: DEFAULTS },
];

const ms = (n: number) => (n >= 100 ? n.toFixed(0) : n.toFixed(1));
const cpuMs = (n: number | undefined) => (n === undefined ? 'n/a' : n.toFixed(2));

/** A phase's rate as asked: its spec (`0.2f` or `400`) and events/s. */
interface PlannedRate {
  spec: SweepRate;
  perSec: number;
}

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

/** Issue 29's verdict for one run of a sweep: each target fraction's phase, met or what missed. */
function targetVerdict(phases: SweepPhase[], rates: PlannedRate[]): string {
  const checks = TARGET_FRACTIONS.map((f) => {
    const i = rates.findIndex((r) => 'ofFloor' in r.spec && r.spec.ofFloor === f);
    const p = i >= 0 ? phases[i] : undefined;
    if (!p) return `${f.toFixed(2)}×: not in this sweep's rates`;
    if (meetsTargets(p)) return `${f.toFixed(2)}× (${p.rate}/s): met`;
    const why = [
      p.e2e.p99 >= E2E_P99_BAR_MS ? `e2e p99 ${ms(p.e2e.p99)} ms` : '',
      p.ingest.p99 >= INGEST_P99_BAR_MS ? `ingest p99 ${ms(p.ingest.p99)} ms` : '',
      p.sent !== p.delivered ? `${p.sent - p.delivered} not delivered` : '',
      p.failures ? `${p.failures} failed` : '',
    ].filter(Boolean);
    return `${f.toFixed(2)}× (${p.rate}/s): missed (${why.join(', ')})`;
  });
  return `targets (e2e p99 < ${E2E_P99_BAR_MS} ms, ingest p99 < ${INGEST_P99_BAR_MS} ms): ${checks.join('; ')}`;
}

async function runSweep(ctx: ScenarioContext, layout: Layout, setting: Setting, rates: PlannedRate[], healthzRate: number, index: number): Promise<SweepOutput> {
  const db = await createScenarioDatabase(ctx.databaseUrl, `sweep${index}`);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'bench-sweep-'));
  let service: Awaited<ReturnType<Layout['start']>> | undefined;
  try {
    service = await layout.start(db.url, dataDir);
    const project = await createBenchProject(db.url);
    const burst = ctx.burstEvents ?? BURST;
    ctx.log(`${layout.name}, ${setting.label}: sweeping ${rates.map((r) => r.perSec).join(', ')} events/s, ${ctx.sweep.seconds} s each, fresh and after a burst of ${burst}`);
    const out = await ctx.runLoadProcess<SweepOutput>(
      'bench/load/steady-sweep-process.ts',
      {
        serviceUrl: service.url,
        apiKey: project.apiKey,
        rates: rates.map((r) => r.perSec),
        seconds: ctx.sweep.seconds,
        warmupEvents: 250,
        burstEvents: burst,
        burstConnections: ctx.settings.connections,
        healthzRate,
        healthzEveryMs: 20,
        maxInFlight: setting.maxInFlight,
        cpu: { service: service.pids, postmaster: ctx.postmasterPid },
      } satisfies SweepInput,
      // Each phase, its drain (≤ 20 s) and the burst's (≤ 120 s), twice, with room to spare.
      { timeoutMs: 4 * 60_000 + 2 * rates.length * (ctx.sweep.seconds + 25) * 1000 },
    );
    // When each phase ran, beside the cluster's checkpoints in the bench log (a stall lines up with one or not).
    for (const run of out.runs) {
      for (const p of run.phases) ctx.log(`${layout.name}, ${setting.label}, ${run.label} ${p.rate}/s: from ${p.startedAt}, slow seconds [${p.slowPerSecond.join(' ')}]`);
    }
    return out;
  } finally {
    await service?.stop();
    await db.dispose().catch((e) => ctx.log(`could not drop the sweep database: ${e.message}`));
  }
}

/** The sweep's own table (report section), with every figure of every phase. */
function sweepTable(outputs: { name: string; out: SweepOutput }[], rates: PlannedRate[], floorPerSec: number, healthzRate: number, burst: number): string {
  const targets = TARGET_FRACTIONS.map((f) => `${f * 100} % (${resolveRate({ ofFloor: f }, floorPerSec)}/s)`).join(' and ');
  const lines = [
    `The one-statement floor (baseline:ingest) of this run: ${Math.round(floorPerSec).toLocaleString('en-US')} events/s; the rates asked: ${rates.map((r) => formatRate(r.spec)).join(', ')} ` +
      `(f: a fraction of the floor). A producer sends one ~1 KB event every 1/rate s to one webhook on keep-alive connections, opening another when all are waiting ` +
      `(it never queues behind its own requests), and stamps each event in its body right before the request is written; a loopback receiver answers 200 at once ` +
      `and records arrival − stamp. Webhooks: created with nothing but a url (the contract's defaults, maxInFlight 10), or with maxInFlight 100. ` +
      `"Seconds with e2e > 100 ms": how many seconds of the phase had an event that slow (a stall shows as one or two, saturation as most). ` +
      `CPU: ms per delivered event of the service's processes and of PostgreSQL's (bench/cpu.ts), from the phase's first event until its last arrived. ` +
      `Each service on a fresh database with its defaults; 250 events of warm-up, then each rate; then a burst of ${burst.toLocaleString('en')} events ` +
      `(${'`--connections`'} connections) is drained and the sweep runs again. Targets (issue 29): at ${targets} of the floor, fresh and after the burst, ` +
      `ingest answer p99 < ${INGEST_P99_BAR_MS} ms and e2e p99 < ${E2E_P99_BAR_MS} ms; /healthz p99 < 20 ms (issue 14) during the ${healthzRate}/s phase (probed every 20 ms).`,
    '',
    '| service, webhook | state | rate | of floor | sent/s | ingest p50 | ingest p99 | ingest max | e2e p50 | e2e p99 | e2e max | /healthz p99 | sender lag p99 / max | seconds with e2e > 100 ms | lost / failed | CPU ms/event service / PostgreSQL |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  const summary: string[] = [];
  for (const { name, out } of outputs) {
    for (const run of out.runs) {
      for (const p of run.phases) {
        lines.push(
          `| ${name} | ${run.label} | ${p.rate}/s | ${(p.rate / floorPerSec).toFixed(2)}× | ${p.sentPerSec.toFixed(0)} | ${ms(p.ingest.p50)} | ${ms(p.ingest.p99)} | ${ms(p.ingest.max)} | ${ms(p.e2e.p50)} | ${ms(p.e2e.p99)} | ${ms(p.e2e.max)} | ` +
            `${p.healthz ? ms(p.healthz.p99) : ''} | ${ms(p.senderLag.p99)} / ${ms(p.senderLag.max)} | ${p.slowPerSecond.filter((n) => n > 0).length} of ${p.slowPerSecond.length} | ${p.sent - p.delivered} / ${p.failures} | ` +
            `${cpuMs(p.cpu?.serviceMsPerEvent)} / ${cpuMs(p.cpu?.postgresMsPerEvent)} |`,
        );
      }
      const e2e = highestRate(run.phases, meetsE2e);
      const both = highestRate(run.phases, meetsTargets);
      summary.push(
        `- ${name}, ${run.label}: ${targetVerdict(run.phases, rates)}. Highest rate with e2e p99 < ${E2E_P99_BAR_MS} ms: **${e2e ? `${e2e}/s (${(e2e / floorPerSec).toFixed(2)}×)` : 'none'}**; ` +
          `with ingest p99 < ${INGEST_P99_BAR_MS} ms too: ${both ? `${both}/s (${(both / floorPerSec).toFixed(2)}×)` : 'none'}`,
      );
    }
    const reasons = Object.entries(out.failureReasons ?? {});
    if (reasons.length) summary.push(`- ${name}: failed requests: ${reasons.map(([why, n]) => `${n} × ${why}`).join('; ')}`);
    if (out.burst) summary.push(`- ${name}: burst of ${out.burst.events} ingested at ${out.burst.ingestPerSec.toFixed(0)} events/s, all delivered ${out.burst.drainedSeconds.toFixed(1)} s after it started`);
  }
  return [...lines, '', ...summary, ''].join('\n');
}

const steadySweep: Scenario = {
  name: 'steady-sweep',
  description:
    'Steady rates given as fractions of the run\'s one-statement floor (5, 10, 20 and 40 % by default; `--sweep-rates` takes events/s or fractions such as 0.2f), 10 s each, ' +
    'fresh and after a burst, each service started with its defaults on a fresh database: `npm start` (API and runner in one process) with a webhook on the contract\'s defaults ' +
    '(nothing but a url: maxInFlight 10), then with maxInFlight 100, then `start:api` + `start:worker` on the defaults. Ingest answer and ingest→receiver latency from a stamp taken when ' +
    'the request is written, /healthz during the phase nearest 20 % of the floor, and CPU per delivered event (service and PostgreSQL apart). Targets (issue 29): e2e p99 < 100 ms and ingest answer ' +
    'p99 < 50 ms at 10 % and 20 % of the floor. Rows: e2e p50/p99, "vs floor" the rate sent as a fraction of the floor; the rest in the notes and in the steady-sweep section below.',
  timeoutMs: 45 * 60_000,
  // Its own services, on databases of their own: the run's shared service would take CPU from them.
  ownServices: true,
  async run(ctx) {
    const floor = await ctx.floor();
    const rates: PlannedRate[] = ctx.sweep.rates.map((spec) => ({ spec, perSec: resolveRate(spec, floor.throughput) }));
    const healthzTarget = HEALTHZ_OF_FLOOR * floor.throughput;
    const healthzRate = rates.reduce((best, r) => (Math.abs(r.perSec - healthzTarget) < Math.abs(best - healthzTarget) ? r.perSec : best), rates[0].perSec);
    ctx.log(`floor ${floor.throughput.toFixed(0)} events/s: rates ${rates.map((r) => `${formatRate(r.spec)} = ${r.perSec}/s`).join(', ')}`);
    const outputs: { name: string; out: SweepOutput }[] = [];
    const failed: Result[] = [];
    for (const [i, { layout, setting }] of SWEEPS.entries()) {
      const name = `${layout.name}, ${setting.label}`;
      try {
        outputs.push({ name, out: await runSweep(ctx, layout, setting, rates, healthzRate, i) });
      } catch (e) {
        // One sweep's failure (or time limit) does not lose the others' figures.
        if (ctx.signal.aborted) throw e;
        ctx.log(`${name} failed: ${(e as Error).message.split('\n')[0]}`);
        failed.push({ name: `steady-sweep ${name}: failed`, throughput: 0, p50Ms: 0, p99Ms: 0, notes: (e as Error).message.split('\n')[0] });
      }
    }
    if (outputs.length === 0) throw new Error(String(failed[0]?.notes));
    ctx.addSection(sweepTable(outputs, rates, floor.throughput, healthzRate, ctx.burstEvents ?? BURST));
    const results: Result[] = [...failed];
    for (const { name, out } of outputs) {
      for (const run of out.runs) {
        for (const p of run.phases) {
          results.push({
            name: `steady-sweep ${name}, ${run.label}, ${p.rate}/s (${(p.rate / floor.throughput).toFixed(2)}× floor)`,
            throughput: p.sentPerSec,
            unit: 'events/s',
            floorRatio: ofFloor(p.sentPerSec, floor),
            p50Ms: p.e2e.p50,
            p99Ms: p.e2e.p99,
            cpu: p.cpu,
            notes:
              `ingest→receiver max ${ms(p.e2e.max)} ms; ingest answer p50 ${ms(p.ingest.p50)}, p99 ${ms(p.ingest.p99)}, max ${ms(p.ingest.max)} ms` +
              (p.healthz ? `; /healthz p99 ${ms(p.healthz.p99)} ms (${p.healthz.probes} probes)` : '') +
              (p.sent !== p.delivered || p.failures ? `; ${p.sent - p.delivered} not delivered, ${p.failures} failed` : '') +
              `; CPU ms/event: service ${cpuMs(p.cpu?.serviceMsPerEvent)}, PostgreSQL ${cpuMs(p.cpu?.postgresMsPerEvent)}`,
          });
        }
        const highest = highestRate(run.phases, meetsE2e);
        results.push({
          name: `steady-sweep ${name}, ${run.label}: highest rate with e2e p99 < ${E2E_P99_BAR_MS} ms`,
          throughput: highest,
          unit: 'events/s',
          floorRatio: ofFloor(highest, floor),
          p50Ms: 0,
          p99Ms: 0,
          notes: `with ingest answer p99 < ${INGEST_P99_BAR_MS} ms too: ${highestRate(run.phases, meetsTargets)} events/s; ${targetVerdict(run.phases, rates)}`,
        });
      }
    }
    return results;
  },
};

export default steadySweep;
