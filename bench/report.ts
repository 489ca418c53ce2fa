// The run's report: machine info, every figure with its ratio to its baseline, as JSON and markdown.
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { BASELINES } from './baselines/index.ts';
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
  return `| ${cell(r.name)}${load} | ${fmtInt(r.throughput)} ${r.unit ?? 'req/s'} | ${fmtMs(r.p50Ms)} | ${fmtMs(r.p99Ms)} | ${r.baseline ?? ''} | ${fmtRatio(r.ratio)} | ${fmtRatio(r.p99Ratio)} | ${cell(r.notes ?? '')} |`;
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
    '| Figure | Throughput | p50 ms | p99 ms | Baseline | Throughput vs baseline | p99 vs baseline | Notes |',
    '|---|---:|---:|---:|---|---:|---:|---|',
    ...report.baselines.map((r) => row(r, s)),
    ...report.scenarios.flatMap((sc) => (sc.status === 'ok' ? sc.results.map((r) => row(r, s)) : [`| ${sc.name} | failed | | | | | | ${cell(sc.error ?? '')} |`])),
    '',
    'Latencies have autocannon\'s 1 ms resolution. "vs baseline": the figure divided by the baseline\'s (throughput: higher is better; p99: lower is better).',
    '',
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
