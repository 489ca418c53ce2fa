// `npm run bench`: a fresh database, the service and the bare baselines as separate processes,
// load from separate autocannon processes, one report (bench/results/) and its table on stdout.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BASELINES, BaselineRuns, FLOOR_BASELINE } from './baselines/index.ts';
import { findPostmaster } from './cpu.ts';
import { leaveSignalsToTheHarness, provisionDatabase, withTimeout, type BenchDatabase } from './database.ts';
import { runAutocannon } from './load/autocannon.ts';
import { parseOptions, USAGE, type BenchOptions } from './options.ts';
import { REPO_ROOT, runLoadProcess, stopAllProcesses } from './processes.ts';
import { machineInfo, RESULTS_DIR, withRatio, writeReport, type Report, type ScenarioReport } from './report.ts';
import type { Result, Scenario, ScenarioContext } from './scenario.ts';
import { loadScenarios, selectScenarios } from './scenarios.ts';
import { createBenchProject, startService, type RunningService } from './service.ts';
import { createWorkDir, type WorkDir } from './workdir.ts';

const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);

let options: BenchOptions;
let scenarios: Scenario[];
try {
  options = parseOptions(process.argv.slice(2));
  scenarios = selectScenarios(await loadScenarios(), options.only);
} catch (e) {
  process.stderr.write(`${(e as Error).message}\n\n${USAGE}`);
  process.exit(2);
}

if (options.list) {
  for (const b of BASELINES) process.stdout.write(`baseline:${b.name}\n  ${b.description}\n`);
  for (const s of scenarios) process.stdout.write(`${s.name}${s.baseline ? ` (vs ${s.baseline})` : ''}\n  ${s.description}\n`);
  process.exit(0);
}

// Figures are of the Node the service supports (package.json's engines; CI tests on 24 LTS): on an
// older one they are not the service's (Node 20 spent ~20 % more CPU per delivery than 24).
{
  const wanted = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')).engines?.node as string | undefined;
  const min = /^>=\s*(\d+)(?:\.(\d+))?/.exec(wanted ?? '');
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (min && (major < Number(min[1]) || (major === Number(min[1]) && minor < Number(min[2] ?? 0)))) {
    process.stderr.write(
      `npm run bench measures the service on the Node it supports (${wanted}, package.json's engines); this is Node ${process.version}.\n` +
        `Put a supported Node first on PATH, e.g. the Node 24 that .ci/run installs: PATH=$HOME/.cache/relay-node24/node_modules/node/bin:$PATH npm run bench\n`,
    );
    process.exit(2);
  }
}

const { settings } = options;
const interrupted = new AbortController();
let workDir: WorkDir | undefined;
let database: BenchDatabase | undefined;
let service: RunningService | undefined;
let cleaning: Promise<void> | undefined;

/** Stops the service, every load and baseline process, then the database; bounded. */
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    // Resumed first, in case a scenario with its own services was interrupted (withSharedServicePaused).
    resumeSharedService();
    await service?.stop().catch((e) => log(`stopping the service: ${e.message}`));
    await stopAllProcesses(10_000);
    await database?.dispose();
    await workDir?.remove();
  })();
  return cleaning;
}

leaveSignalsToTheHarness();
let interruptedBy: string | undefined;
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  // `on`, not `once`: npm and tsx forward the terminal's Ctrl-C, so it arrives more than once.
  process.on(signal, () => {
    if (interruptedBy) return;
    interruptedBy = signal;
    log(`${signal}: stopping`);
    interrupted.abort(new Error(signal));
    setTimeout(() => process.exit(130), 45_000).unref();
    void cleanup().finally(() => process.exit(130));
  });
}

/** Default bound for a scenario (and for each baseline): setup time plus four load runs. */
const defaultTimeoutMs = 120_000 + 4 * (settings.warmup + settings.duration) * 1000;

/**
 * Runs `fn` with the shared service stopped (SIGSTOP: no CPU at all, its connections idle) and
 * resumes it after (SIGCONT), also when `fn` fails.
 */
async function withSharedServicePaused<T>(fn: () => Promise<T>, aborted: Promise<never>): Promise<T> {
  const pid = service?.pid;
  if (!pid) return Promise.race([fn(), aborted]);
  process.kill(pid, 'SIGSTOP');
  try {
    // A scenario that times out is left running: the service is resumed for the next one anyway.
    return await Promise.race([fn(), aborted]);
  } finally {
    resumeSharedService();
  }
}

function resumeSharedService(): void {
  try {
    if (service?.pid) process.kill(service.pid, 'SIGCONT');
  } catch {
    // already gone
  }
}

async function runScenario(scenario: Scenario, baselines: BaselineRuns, project: { projectId: string; apiKey: string }, earlier: Result[], postmasterPid: number | undefined): Promise<ScenarioReport> {
  const started = Date.now();
  const timeoutMs = typeof scenario.timeoutMs === 'function' ? scenario.timeoutMs(settings) : (scenario.timeoutMs ?? defaultTimeoutMs);
  const signal = AbortSignal.any([interrupted.signal, AbortSignal.timeout(timeoutMs)]);
  const sections: string[] = [];
  const ctx: ScenarioContext = {
    serviceUrl: service!.url,
    smtpPort: service!.smtpPort,
    apiKey: project.apiKey,
    projectId: project.projectId,
    databaseUrl: database!.url,
    servicePid: service!.pid,
    postmasterPid,
    settings,
    sweep: options.sweep,
    burstEvents: options.burstEvents,
    autocannon: (o) => runAutocannon({ ...o, url: o.url ?? service!.url }, settings, signal),
    baseline: (name, s) => baselines.get(name, s, signal),
    floor: () => baselines.get(FLOOR_BASELINE, {}, signal),
    runLoadProcess: (script, input, o) => runLoadProcess(script, input, { timeoutMs: o?.timeoutMs ?? timeoutMs, signal }),
    signal,
    addSection: (markdown) => sections.push(markdown),
    log: (m) => log(`${scenario.name}: ${m}`),
  };
  const report = (status: 'ok' | 'failed', results: Result[], error?: string): ScenarioReport => ({
    name: scenario.name,
    description: scenario.description,
    status,
    error,
    elapsedS: Math.round((Date.now() - started) / 100) / 10,
    results,
    ...(sections.length ? { sections } : {}),
  });
  try {
    const aborted = new Promise<never>((_, reject) => {
      const fail = () => reject(new Error(signal.reason instanceof Error && signal.reason.name === 'TimeoutError' ? `timed out after ${timeoutMs} ms` : String(signal.reason?.message ?? signal.reason)));
      if (signal.aborted) fail();
      signal.addEventListener('abort', fail, { once: true });
    });
    aborted.catch(() => {});
    const raw = scenario.ownServices ? await withSharedServicePaused(() => scenario.run(ctx), aborted) : await Promise.race([scenario.run(ctx), aborted]);
    if (!Array.isArray(raw) || raw.length === 0) throw new Error('run() returned no results');
    const results: Result[] = [];
    for (const r of raw) {
      const baselineName = r.baseline ?? scenario.baseline;
      if (!baselineName) {
        results.push(r);
        continue;
      }
      const base = BASELINES.some((b) => b.name === baselineName)
        ? await Promise.race([ctx.baseline(baselineName, { connections: r.connections, duration: r.duration }), aborted])
        : [...earlier, ...raw].find((o) => o.name === baselineName);
      if (!base) throw new Error(`result ${r.name} names an unknown baseline "${baselineName}"`);
      results.push(withRatio({ ...r, baseline: baselineName }, base));
    }
    return report('ok', results);
  } catch (e) {
    return report('failed', [], (e as Error).message);
  }
}

const startedAt = new Date();
const loadAtStart = os.loadavg();
let exitCode = 0;
try {
  workDir = await createWorkDir(log);
  database = await provisionDatabase(process.env.DATABASE_URL, workDir, log);
  const machine = await machineInfo(database.postgresVersion, loadAtStart);
  const project = await createBenchProject(database.url);
  log(`project ${project.projectId} (enterprise)`);

  // The three bare baselines, always, before the service exists, with the run's settings; `ingest`
  // is the one-statement floor the delivery and sweep figures are given as fractions of.
  const baselines = new BaselineRuns(database.url, settings, log);
  for (const b of ['insert', 'read', FLOOR_BASELINE]) await withTimeout(baselines.get(b, {}, interrupted.signal), defaultTimeoutMs, `baseline ${b}`);
  const postmasterPid = await findPostmaster(database.url);
  log(postmasterPid ? `PostgreSQL's postmaster: pid ${postmasterPid} (CPU per event counts it and its children)` : 'PostgreSQL runs where /proc does not show it: no PostgreSQL CPU figures');

  const started = Date.now();
  const profileDir = options.cpuProf ? path.join(RESULTS_DIR, 'profiles') : undefined;
  service = await startService(database.url, await workDir.sub('service'), { cpuProfileDir: profileDir });
  if (profileDir) log(`service CPU profile: ${path.relative(REPO_ROOT, profileDir)}/CPU.*.${service.pid}.*.cpuprofile, written when the service stops`);
  log(`service on ${service.url} (pid ${service.pid}, ${Date.now() - started} ms)`);

  const reports: ScenarioReport[] = [];
  for (const scenario of scenarios) {
    if (interrupted.signal.aborted) break;
    log(`scenario ${scenario.name}`);
    const r = await runScenario(scenario, baselines, project, reports.flatMap((x) => x.results), postmasterPid);
    if (r.status === 'failed') {
      exitCode = 1;
      log(`scenario ${scenario.name} failed: ${r.error}`);
    }
    reports.push(r);
  }

  const report: Report = {
    startedAt: startedAt.toISOString(),
    elapsedS: Math.round((Date.now() - startedAt.getTime()) / 100) / 10,
    settings,
    machine,
    baselines: await baselines.measured(),
    scenarios: reports,
  };
  const { markdown, files } = await writeReport(report);
  process.stdout.write(markdown);
  log(`wrote ${files.join(', ')}`);
} catch (e) {
  exitCode = 1;
  if (!interruptedBy) log(`failed: ${(e as Error).stack ?? e}`);
} finally {
  await withTimeout(cleanup(), 45_000, 'cleanup').catch((e) => log(e.message));
}
process.exit(exitCode);
