// The contract between the harness (bench/run.ts) and the scenario files (bench/scenarios/*.ts).
import type { CpuPerEvent } from './cpu.ts';
import type { SweepSettings } from './options.ts';

/** Load settings shared by a scenario and the baseline it is compared with. */
export interface LoadSettings {
  /** Concurrent connections (autocannon `connections`). */
  connections: number;
  /** Measured seconds (after the warm-up). */
  duration: number;
  /** Unmeasured seconds of the same load first, so JIT and pools settle. */
  warmup: number;
}

export interface HttpRequestSpec {
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

/** One autocannon run: a single request, or `requests` cycled through per connection. */
export interface AutocannonOptions extends HttpRequestSpec, Partial<LoadSettings> {
  /** Base URL; defaults to the service. */
  url?: string;
  /** Several requests each connection sends in turn (all relative to `url`). Overrides method/path/headers/body. */
  requests?: HttpRequestSpec[];
  /** Fraction of non-2xx answers or socket errors that makes the run fail (default 0.01). */
  maxFailureRatio?: number;
  /** Replace `[<id>]` in each request (headers and body) with a unique id (autocannon's `idReplacement`). */
  idReplacement?: boolean;
}

/** What a load run measured. Spread it into a Result: `{ name, ...figures }`. */
export interface LoadFigures {
  /** Mean requests per second over the measured seconds. */
  throughput: number;
  unit: string;
  p50Ms: number;
  p99Ms: number;
  connections: number;
  duration: number;
  /** Requests answered during the measured seconds. */
  requests: number;
  /** Answers outside 2xx, plus socket errors and timeouts. */
  failures: number;
}

/** One line of the report. */
export interface Result {
  name: string;
  /** Requests per second, or events per second for scenarios that count something else (set `unit`). */
  throughput: number;
  /** Defaults to 'req/s'. */
  unit?: string;
  p50Ms: number;
  p99Ms: number;
  /** Name of the baseline (or of another result of this run) this one is compared with. */
  baseline?: string;
  /** throughput / baseline throughput; filled in by the harness when left out. */
  ratio?: number;
  /** p99 / baseline p99; filled in by the harness when left out. */
  p99Ratio?: number;
  /** throughput / the run's one-statement floor (ScenarioContext.floor()), for figures measured against it. */
  floorRatio?: number;
  /** CPU per delivered event over the figure's phase, the service and PostgreSQL apart (bench/cpu.ts). */
  cpu?: CpuPerEvent;
  /** Settings the figure was measured with; the baseline is measured with the same ones. */
  connections?: number;
  duration?: number;
  requests?: number;
  failures?: number;
  /** Anything a reader needs to interpret the figure. */
  notes?: string;
}

export interface ScenarioContext {
  /** The service under test, e.g. http://127.0.0.1:41234 (a separate process). */
  serviceUrl: string;
  /** The service's SMTP port (email ingest), on 127.0.0.1. */
  smtpPort: number;
  /** API key of a project on the enterprise tier, so quotas never throttle the load. */
  apiKey: string;
  projectId: string;
  /** The service's database (fresh for this run, migrated). */
  databaseUrl: string;
  /** The service's process id (for bench/cpu.ts). */
  servicePid: number;
  /** The PostgreSQL cluster's postmaster when it runs on this machine (bench/cpu.ts), else undefined. */
  postmasterPid?: number;
  /** Settings from the command line (`--connections`, `--duration`, `--warmup`). */
  settings: LoadSettings;
  /** steady-sweep's rates (events/s or fractions of the floor) and seconds per rate (`--sweep-rates`, `--sweep-seconds`). */
  sweep: SweepSettings;
  /** `--burst-events`: events per burst instead of the scenario's own (delivery-e2e, steady-sweep), for quick iteration. */
  burstEvents?: number;
  /** Runs autocannon in its own process (warm-up, then the measured run). Throws when too many requests fail. */
  autocannon(options: AutocannonOptions): Promise<LoadFigures>;
  /**
   * Figures of a bare baseline ('insert', 'read', or one added under bench/baselines/),
   * measured with the given settings (default: the run's). Measured once per settings and cached.
   */
  baseline(name: string, settings?: Partial<LoadSettings>): Promise<Result>;
  /**
   * The one-statement floor of this run: baseline:ingest (bare node:http + pg writing the event,
   * its delivery and its job in one statement) with the run's settings, measured before the
   * service started. Delivery and sweep figures are given as fractions of it (`floorRatio`).
   */
  floor(): Promise<Result>;
  /**
   * Runs a custom load generator in its own process: `script` (a .ts path, relative to the
   * repository root or absolute) receives `input` as its first IPC message and must answer
   * with exactly one message (its result). Killed on timeout or when the run aborts.
   */
  runLoadProcess<T>(script: string, input: unknown, options?: { timeoutMs?: number }): Promise<T>;
  /** Aborted when the scenario times out or the run is interrupted: stop custom loops on it. */
  signal: AbortSignal;
  /** Markdown printed under the report's table in a section of the scenario's own (e.g. a table with more columns). */
  addSection(markdown: string): void;
  /** Progress line on stderr (stdout carries the report). */
  log(message: string): void;
}

export interface Scenario {
  /** Unique; what `--only` selects. */
  name: string;
  /** What the figure measures, one or two sentences (copied into the report). */
  description: string;
  /** Baseline for the results that do not name their own. */
  baseline?: 'insert' | 'read' | (string & {});
  /**
   * The scenario measures only services it starts itself (never ctx.serviceUrl): the run's
   * shared service is paused (SIGSTOP) while it runs and resumed after, so that an idle
   * process's garbage collection and periodic jobs take no CPU from the services measured.
   */
  ownServices?: boolean;
  /** Upper bound for the whole scenario; default 2 minutes plus 4 load runs of the run's settings. */
  timeoutMs?: number | ((settings: LoadSettings) => number);
  run(ctx: ScenarioContext): Promise<Result[]>;
}
