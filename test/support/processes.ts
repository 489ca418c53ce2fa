// Real service processes for process tests: `npm start` (src/main.ts), start:api, start:worker and
// the CLI, each a node child on loopback, with its output kept for assertions.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import path from 'node:path';
import { serviceEnv } from './test-env.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// tsx resolved from the repository, so a child may run in any directory (a private one, as root).
const TSX = ['--import', pathToFileURL(path.join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href];

export type Entry = 'main' | 'api' | 'worker' | 'cli';

export interface ServiceProcess {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

/**
 * Starts `src/<entry>.ts` in `cwd` as a shell would run `npm start` (`start:api`, …): with this
 * process's environment less the test run's own settings (`serviceEnv`, so the service runs its
 * defaults), on loopback with a free SMTP port, `env` on top, minus `unset`.
 */
export function startProcess(entry: Entry, env: Record<string, string>, opts: { cwd?: string; args?: string[]; unset?: string[] } = {}): ServiceProcess {
  const merged: Record<string, string | undefined> = serviceEnv({ LOG_LEVEL: 'info', HOST: '127.0.0.1', SMTP_PORT: '0', ...env });
  for (const k of opts.unset ?? []) delete merged[k];
  const child = spawn(process.execPath, [...TSX, path.join(ROOT, 'src', `${entry}.ts`), ...(opts.args ?? [])], {
    cwd: opts.cwd ?? ROOT,
    env: merged,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (out += c));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, output: () => out, exited };
}

/** Runs the CLI to its end: exit code and stdout. */
export async function runCli(env: Record<string, string>, args: string[], opts: { cwd?: string; unset?: string[] } = {}) {
  const p = startProcess('cli', { LOG_TO_STDERR: 'true', ...env }, { ...opts, args });
  let stdout = '';
  p.child.stdout!.on('data', (c) => (stdout += c));
  const code = await p.exited;
  return { code, stdout, output: p.output() };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until `GET path` on the port answers `status` (bounded); fails early if the process exits. */
export async function waitStatus(port: number, path: string, status: number, timeoutMs: number, proc?: ServiceProcess): Promise<number> {
  const started = Date.now();
  while (Date.now() - started < timeoutMs) {
    if (proc && proc.child.exitCode !== null) throw new Error(`process exited with ${proc.child.exitCode}:\n${proc.output().slice(-3000)}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(2_000) });
      await res.arrayBuffer();
      if (res.status === status) return Date.now() - started;
    } catch {
      /* not yet */
    }
    await sleep(100);
  }
  throw new Error(`GET ${path} on ${port} did not answer ${status} within ${timeoutMs} ms${proc ? `:\n${proc.output().slice(-3000)}` : ''}`);
}

/** SIGTERM, then the exit code (SIGKILL after `timeoutMs`). */
export async function stopProcess(p: ServiceProcess, timeoutMs = 20_000): Promise<number | null> {
  if (p.child.exitCode !== null) return p.child.exitCode;
  p.child.kill('SIGTERM');
  const timer = setTimeout(() => p.child.kill('SIGKILL'), timeoutMs);
  const code = await p.exited;
  clearTimeout(timer);
  return code;
}

/** The API key `npm start` prints once on an empty database. */
export function printedKey(p: ServiceProcess): string | undefined {
  return /(sk_[A-Za-z0-9_-]+)/.exec(p.output())?.[1];
}
