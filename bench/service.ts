// The service under test, as separate processes: `src/main.ts` (API + job runner) on the
// run's database, and its project created through the admin CLI.
import { execFile } from 'node:child_process';
import { connectDatabase } from '../src/db/client.ts';
import { setProjectQuota } from '../src/projects/service.ts';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { freePort } from '../src/db/embedded.ts';
import { REPO_ROOT, startTsProcess, waitForHttp } from './processes.ts';

export interface RunningService {
  url: string;
  /** Email ingest's SMTP port. */
  smtpPort: number;
  pid: number;
  stop(): Promise<void>;
}

export interface BenchProject {
  projectId: string;
  apiKey: string;
}

export interface ServiceOptions {
  /** For error messages; default 'service (src/main.ts)'. */
  label?: string;
  /** Set on top of the defaults, e.g. one SECRETS_KEY for several instances, or an operator setting. */
  env?: Record<string, string>;
  /** The environment the settings go on top of (default this process's; a test passes one without its own settings). */
  baseEnv?: NodeJS.ProcessEnv;
  /** Run the service under `node --cpu-prof`; the profile is written there when it stops. */
  cpuProfileDir?: string;
  /** The entry point: default src/main.ts (API + job runner); src/api.ts for the API alone. */
  script?: string;
}

export async function startService(databaseUrl: string, dataDir: string, options: ServiceOptions = {}): Promise<RunningService> {
  const port = await freePort();
  const smtpPort = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const script = options.script ?? 'src/main.ts';
  const proc = startTsProcess(script, {
    label: options.label ?? `service (${script})`,
    nodeOptions: options.cpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfileDir}`] : undefined,
    baseEnv: options.baseEnv,
    env: {
      NODE_ENV: 'production',
      DATABASE_URL: databaseUrl,
      PORT: String(port),
      HOST: '127.0.0.1',
      PUBLIC_URL: url,
      SMTP_PORT: String(smtpPort),
      DATA_DIR: dataDir,
      SECRETS_KEY: randomBytes(32).toString('base64'),
      DEFAULT_TIER: 'enterprise',
      // Scenarios deliver to receivers on loopback.
      ALLOW_PRIVATE_DESTINATIONS: 'true',
      LOG_LEVEL: 'warn',
      SHUTDOWN_TIMEOUT_MS: '2000',
      ...options.env,
    },
  });
  const stop = () => proc.stop(10_000);
  try {
    await waitForHttp(`${url}/readyz`, proc, 60_000);
  } catch (e) {
    await stop();
    throw e;
  }
  return { url, smtpPort, pid: proc.child.pid!, stop };
}

/**
 * A job runner alone (`src/worker.ts`) on `databaseUrl`, with the service's settings; give it the
 * SECRETS_KEY of the API instance that created the webhooks (`options.env`).
 */
export function startWorker(databaseUrl: string, dataDir: string, options: Omit<ServiceOptions, 'script'> = {}): { pid: number; stop(): Promise<void> } {
  const proc = startTsProcess('src/worker.ts', {
    label: options.label ?? 'job runner (src/worker.ts)',
    nodeOptions: options.cpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfileDir}`] : undefined,
    baseEnv: options.baseEnv,
    env: {
      NODE_ENV: 'production',
      DATABASE_URL: databaseUrl,
      DATA_DIR: dataDir,
      ALLOW_PRIVATE_DESTINATIONS: 'true',
      LOG_LEVEL: 'warn',
      SHUTDOWN_TIMEOUT_MS: '2000',
      ...options.env,
    },
  });
  return { pid: proc.child.pid!, stop: () => proc.stop(10_000) };
}

/** `npm run cli -- project create --name bench --tier enterprise`: enterprise, so quotas never throttle the load. */
export async function createBenchProject(databaseUrl: string): Promise<BenchProject> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', 'src/cli.ts', 'project', 'create', '--name', 'bench', '--tier', 'enterprise'],
    {
      cwd: REPO_ROOT,
      env: { ...process.env, DATABASE_URL: databaseUrl, LOG_TO_STDERR: 'true', LOG_LEVEL: 'warn' },
      timeout: 60_000,
    },
  );
  const out = JSON.parse(stdout.trim().split('\n').pop()!);
  if (!out?.project?.id || !out?.apiKey) throw new Error(`unexpected CLI answer: ${stdout}`);
  // Enterprise limits (100 ingest req/s, 50,000 backlog) would shape the figures: lift them far
  // above what the machine can do, with the CLI's Enterprise custom quotas. Checks still run.
  const db = connectDatabase(databaseUrl, 1);
  try {
    for (const quota of ['ingest_rate', 'backlog_depth', 'stored_payload_bytes', 'monthly_deliveries', 'replay_volume']) {
      await setProjectQuota({ db }, out.project.id, quota, String(1_000_000_000_000));
    }
  } finally {
    await db.close();
  }
  return { projectId: out.project.id, apiKey: out.apiKey };
}
