// The capacity model's arithmetic (issue 31, docs/scaling.md), apart from the scenario that measures
// it (bench/scenarios/capacity.ts) so that it can be tested without starting anything.
import type { CapacityOutput } from './load/capacity-process.ts';

export const PROCESS_COUNTS = [1, 2];
export const WEBHOOKS = 4;
export const CONNECTIONS = 50;
export const WARMUP_SECONDS = 5;
export const SECONDS = 15;
/** Ingest waits while more events than this are ingested and not yet delivered: ingest and delivery at one rate. */
export const MAX_BACKLOG = 500;
/** Cores planned at this utilisation: a rate needs rate × CPU per event / HEADROOM cores. */
export const HEADROOM = 0.7;
export const TARGET_RATES = [1_000, 10_000, 50_000];
export const POSTGRES_SIZES = [16, 32, 64];

/** One measured layout: N API processes and N job runners. */
export interface CapacityRun {
  processes: number;
  out: CapacityOutput;
}

/** Per delivered event, from one run. */
export interface PerEvent {
  deliveredPerSec: number;
  ingestedPerSec: number;
  apiMs: number;
  runnerMs: number;
  postgresMs: number;
  loadMs: number;
  totalMs: number;
  walBytes: number;
  /** Peak connections per API + runner pair. */
  connectionsPerPair: number;
  /** Cores this setup's processes kept busy (API, runners, PostgreSQL, load + receiver). */
  ownCores: number;
  /** Cores other work on the machine took over the window (machine busy − ownCores); undefined off Linux. */
  otherCores?: number;
}

export function perEvent(run: CapacityRun): PerEvent {
  const { out } = run;
  const n = Math.max(1, out.delivered);
  const per = (ms: number | undefined) => (ms === undefined ? NaN : ms / n);
  const apiMs = per(out.cpuMs.api);
  const runnerMs = per(out.cpuMs.runner);
  const postgresMs = per(out.cpuMs.postgres);
  const loadMs = per(out.cpuMs.load);
  return {
    deliveredPerSec: out.delivered / out.seconds,
    ingestedPerSec: out.ingested / out.seconds,
    apiMs,
    runnerMs,
    postgresMs,
    loadMs,
    totalMs: apiMs + runnerMs + postgresMs + loadMs,
    walBytes: out.walBytes / n,
    connectionsPerPair: out.peakConnections / run.processes,
    ownCores: (apiMs + runnerMs + postgresMs + loadMs) * n / 1000 / out.seconds,
    otherCores: out.machineBusyCores === undefined ? undefined : Math.max(0, out.machineBusyCores - ((apiMs + runnerMs + postgresMs + loadMs) * n) / 1000 / out.seconds),
  };
}

/** All processes share the machine's cores: the rate at which the per-event CPU fills them. */
export function predictedRate(costs: PerEvent, cores: number): number {
  return (cores * 1000) / costs.totalMs;
}

/** The same, on the cores other work left over the run's window (a shared machine). */
export function predictedOnCoresLeft(costs: PerEvent, cores: number, run: PerEvent): number | undefined {
  return run.otherCores === undefined ? undefined : predictedRate(costs, Math.max(0, cores - run.otherCores));
}

/** Cores a rate needs at HEADROOM utilisation. */
export const coresFor = (rate: number, msPerEvent: number, headroom = HEADROOM) => (rate * msPerEvent) / 1000 / headroom;

export const f1 = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : 'n/a');
export const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : 'n/a');
export const f3 = (n: number) => (Number.isFinite(n) ? n.toFixed(3) : 'n/a');
export const int = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a');

/** The markdown the scenario prints: measured costs, predicted vs measured, and the scale-out table. */
export function capacityMarkdown(runs: CapacityRun[], cores: number): string {
  const costs = runs.map((r) => ({ run: r, c: perEvent(r) }));
  const base = costs[0].c;
  const predicted = predictedRate(base, cores);
  const lines = [
    `Measured: ${runs.map((r) => `${r.processes} + ${r.processes}`).join(' and ')} processes (\`src/api.ts\` + \`src/worker.ts\`, the contract's defaults), ${WEBHOOKS} webhooks on their defaults, ` +
      `a loopback receiver answering 200; 1 KB events over HTTP from ${CONNECTIONS} connections spread over the API processes, held back while more than ${MAX_BACKLOG.toLocaleString('en-US')} are undelivered; ` +
      `${WARMUP_SECONDS} s warm-up, then ${SECONDS} s measured. CPU per delivered event from /proc (bench/cpu.ts); PostgreSQL is every process of the cluster; load is the load generator and the receiver (one process).`,
    '',
    '| processes | ingested/s | delivered/s | API ms | runner ms | PostgreSQL ms | load + receiver ms | total ms | WAL bytes | peak connections | backlog at end |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...costs.map(({ run, c }) =>
      `| ${run.processes} + ${run.processes} | ${int(c.ingestedPerSec)} | ${int(c.deliveredPerSec)} | ${f3(c.apiMs)} | ${f3(c.runnerMs)} | ${f3(c.postgresMs)} | ${f3(c.loadMs)} | ${f3(c.totalMs)} | ${int(c.walBytes)} | ${run.out.peakConnections} | ${run.out.backlogAtEnd} |`,
    ),
    '',
    `Prediction from the ${runs[0].processes} + ${runs[0].processes} costs on this machine (${cores} cores shared by every process): ${cores} × 1000 / ${f3(base.totalMs)} ms = **${int(predicted)} deliveries/s**.`,
    '',
    '| processes | predicted/s | measured/s | predicted ÷ measured | cores busy: this setup / other work | predicted on the cores other work left | that ÷ measured |',
    '|---|---:|---:|---:|---:|---:|---:|',
    ...costs.map(({ run, c }) => {
      const left = predictedOnCoresLeft(base, cores, c);
      return `| ${run.processes} + ${run.processes} | ${int(predicted)} | ${int(c.deliveredPerSec)} | ${f2(predicted / c.deliveredPerSec)} | ${f2(c.ownCores)} / ${c.otherCores === undefined ? 'n/a' : f2(c.otherCores)} | ${left === undefined ? 'n/a' : int(left)} | ${left === undefined ? 'n/a' : f2(left / c.deliveredPerSec)} |`;
    }),
    '',
    `Sizing (from the ${runs[0].processes} + ${runs[0].processes} costs, cores at ${HEADROOM * 100} % utilisation; API and runners scale out by processes, PostgreSQL is one server):`,
    '',
    '| deliveries/s | API cores | runner cores | PostgreSQL cores | WAL MB/s | connections at the defaults (one API process per API core, one runner per runner core) |',
    '|---:|---:|---:|---:|---:|---:|',
    ...TARGET_RATES.map((rate) => {
      const api = coresFor(rate, base.apiMs);
      const runner = coresFor(rate, base.runnerMs);
      const pairs = Math.max(1, Math.ceil(Math.max(api, runner)));
      return `| ${int(rate)} | ${f1(api)} | ${f1(runner)} | ${f1(coresFor(rate, base.postgresMs))} | ${f1((rate * base.walBytes) / 1e6)} | ${int(pairs * base.connectionsPerPair)} |`;
    }),
    '',
    `A PostgreSQL server of ${POSTGRES_SIZES.map((s) => `${s} cores saturates (at ${HEADROOM * 100} %) at ${int((s * HEADROOM * 1000) / base.postgresMs)}`).join(', ')} deliveries/s. ` +
      'It is the first bottleneck: API and runner cores are added by processes, the server is one.',
  ];
  return lines.join('\n');
}
