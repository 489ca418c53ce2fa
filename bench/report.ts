// The run's report: machine info, every figure with its ratio to its baseline, as JSON and markdown.
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { BASELINES, FLOOR_BASELINE } from './baselines/index.ts';
import { REPO_ROOT } from './processes.ts';
import type { LoadSettings, Result } from './scenario.ts';

export const RESULTS_DIR = path.join(REPO_ROOT, 'bench/results');

export interface MachineInfo {
  cores: number;
  cpu: string;
  memoryGb: number;
  os: string;
  node: string;
  postgres: string;
  commit: string;
  /** 1, 5 and 15-minute load averages when the run started: other work on the machine skews every figure. */
  loadAverage: number[];
}

export interface ScenarioReport {
  name: string;
  description: string;
  status: 'ok' | 'failed';
  error?: string;
  elapsedS: number;
  results: Result[];
  /** Markdown of the scenario's own, under the table (ScenarioContext.addSection). */
  sections?: string[];
}

export interface Report {
  startedAt: string;
  elapsedS: number;
  settings: LoadSettings;
  machine: MachineInfo;
  baselines: Result[];
  scenarios: ScenarioReport[];
}

/** `loadAverage`: os.loadavg() taken before the run started its own processes, so it shows other work only. */
export async function machineInfo(postgres: string, loadAverage: number[]): Promise<MachineInfo> {
  const cpus = os.cpus();
  const commit = await promisify(execFile)('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_ROOT, timeout: 5_000 })
    .then(({ stdout }) => stdout.trim())
    .catch(() => 'unknown');
  const dirty = await promisify(execFile)('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: REPO_ROOT, timeout: 5_000 })
    .then(({ stdout }) => (stdout.trim() ? ' (with local changes)' : ''))
    .catch(() => '');
  return {
    cores: cpus.length,
    cpu: cpus[0]?.model?.trim() ?? 'unknown',
    memoryGb: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    postgres,
    commit: commit + dirty,
    loadAverage: loadAverage.map((l) => Math.round(l * 100) / 100),
  };
}

/** Fills in `ratio` and `p99Ratio` (unless the scenario set them) from the baseline's figures. */
export function withRatio(result: Result, baseline: Result | undefined): Result {
  if (!baseline) return result;
  return {
    ...result,
    ratio: result.ratio ?? round(result.throughput / baseline.throughput, 3),
    p99Ratio: result.p99Ratio ?? (baseline.p99Ms > 0 ? round(result.p99Ms / baseline.p99Ms, 3) : undefined),
  };
}

/** A figure's events/s as a fraction of the run's one-statement floor (`floorRatio`). */
export function ofFloor(throughput: number, floor: Result): number {
  return round(throughput / floor.throughput, 3);
}

function round(n: number, digits: number) {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

const fmtInt = (n: number) => Math.round(n).toLocaleString('en-US');
const fmtMs = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(2));
const fmtRatio = (n: number | undefined) => (n === undefined ? '' : `${n.toFixed(2)}×`);
const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

function row(r: Result, defaults: LoadSettings): string {
  const load = r.connections !== undefined && (r.connections !== defaults.connections || r.duration !== defaults.duration) ? ` (${r.connections} conn, ${r.duration} s)` : '';
  return `| ${cell(r.name)}${load} | ${fmtInt(r.throughput)} ${r.unit ?? 'req/s'} | ${fmtRatio(r.floorRatio)} | ${fmtMs(r.p50Ms)} | ${fmtMs(r.p99Ms)} | ${r.baseline ?? ''} | ${fmtRatio(r.ratio)} | ${fmtRatio(r.p99Ratio)} | ${cell(r.notes ?? '')} |`;
}

const fmtCpu = (n: number | undefined) => (n === undefined ? 'n/a' : n.toFixed(2));

/** Every figure measured with its CPU (bench/cpu.ts): ms per delivered event, the service and PostgreSQL apart. */
function cpuTable(report: Report): string[] {
  const rows = report.scenarios.flatMap((sc) => (sc.status === 'ok' ? sc.results.filter((r) => r.cpu) : []));
  if (rows.length === 0) return [];
  return [
    '## CPU per delivered event',
    '',
    'CPU time (utime + stime from /proc, in clock ticks) of the service\'s processes and of every PostgreSQL process of the cluster (the postmaster and all its children: ' +
      'backends, WAL writer, checkpointer, autovacuum), read before and after the phase and divided by the events delivered in it. ' +
      'A drain counts the job runner and the idle API instance (delivery alone); burst, steady and sweep phases count ingest and delivery of each event. ' +
      'The run\'s other processes (an idle shared service, the load generator) are not counted on the service\'s side; their queries are on PostgreSQL\'s.',
    '',
    '| Figure | events | seconds | service CPU ms/event | PostgreSQL CPU ms/event | service + PostgreSQL | service cores | PostgreSQL cores |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map((r) => {
      const c = r.cpu!;
      const total = c.serviceMsPerEvent !== undefined && c.postgresMsPerEvent !== undefined ? c.serviceMsPerEvent + c.postgresMsPerEvent : undefined;
      return `| ${cell(r.name)} | ${fmtInt(c.events)} | ${c.seconds} | ${fmtCpu(c.serviceMsPerEvent)} | ${fmtCpu(c.postgresMsPerEvent)} | ${fmtCpu(total)} | ${fmtCpu(c.serviceCores)} | ${fmtCpu(c.postgresCores)} |`;
    }),
    '',
  ];
}

/** The floor every "vs floor" figure is divided by, when the run measured it. */
function floorLine(report: Report): string[] {
  const floor = report.baselines.find((b) => b.name === `baseline:${FLOOR_BASELINE}` && b.connections === report.settings.connections && b.duration === report.settings.duration);
  if (!floor) return [];
  return [
    `One-statement floor (baseline:${FLOOR_BASELINE}: bare node:http + pg writing the event, its delivery and its job in one statement) of this run: ` +
      `**${fmtInt(floor.throughput)} events/s** (p99 ${fmtMs(floor.p99Ms)} ms). "vs floor" divides a figure's events/s by it.`,
    '',
  ];
}

export function renderMarkdown(report: Report): string {
  const { machine: m, settings: s } = report;
  const lines = [
    '# Benchmark results',
    '',
    `Run ${report.startedAt} (${Math.round(report.elapsedS)} s), commit ${m.commit}. ` +
      `Each figure: ${s.connections} connections, ${s.warmup} s warm-up, then ${s.duration} s measured (autocannon in its own process) unless noted.`,
    '',
    `Machine: ${m.cores} cores (${m.cpu}), ${m.memoryGb} GB RAM, ${m.os}; Node ${m.node}; PostgreSQL ${m.postgres}. ` +
      `Load average when the run started: ${m.loadAverage.join(', ')}. Service, baselines, load generator and PostgreSQL share this machine.`,
    '',
    ...floorLine(report),
    '| Figure | Throughput | vs floor | p50 ms | p99 ms | Baseline | Throughput vs baseline | p99 vs baseline | Notes |',
    '|---|---:|---:|---:|---:|---|---:|---:|---|',
    ...report.baselines.map((r) => row(r, s)),
    ...report.scenarios.flatMap((sc) => (sc.status === 'ok' ? sc.results.map((r) => row(r, s)) : [`| ${sc.name} | failed | | | | | | | ${cell(sc.error ?? '')} |`])),
    '',
    'Latencies have autocannon\'s 1 ms resolution. "vs baseline": the figure divided by the baseline\'s (throughput: higher is better; p99: lower is better). ' +
      '"vs floor": the figure\'s events/s divided by the one-statement floor\'s (baseline:ingest) of this run; for a steady rate, the fraction of the floor it was sent at.',
    '',
    ...cpuTable(report),
    ...report.scenarios.flatMap((sc) => (sc.status === 'ok' && sc.sections?.length ? [`## ${sc.name}`, '', ...sc.sections, ''] : [])),
    '## What each figure measures',
    '',
    ...BASELINES.map((b) => `- **baseline:${b.name}**: ${b.description}`),
    ...report.scenarios.map((sc) => `- **${sc.name}**: ${sc.description}`),
    '',
  ];
  return lines.join('\n');
}

export async function writeReport(report: Report): Promise<{ markdown: string; files: string[] }> {
  await mkdir(RESULTS_DIR, { recursive: true });
  const stamp = report.startedAt.replace(/:/g, '-').replace(/\.\d+Z$/, 'Z');
  const markdown = renderMarkdown(report);
  const json = JSON.stringify(report, null, 2) + '\n';
  const files: string[] = [];
  for (const base of [stamp, 'latest']) {
    for (const [ext, text] of [['md', markdown], ['json', json]] as const) {
      const file = path.join(RESULTS_DIR, `${base}.${ext}`);
      await writeFile(file, text);
      files.push(path.relative(REPO_ROOT, file));
    }
  }
  return { markdown, files };
}
