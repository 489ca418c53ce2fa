// Child processes of a bench run: every one is tracked so that the run stops them all,
// on success, on failure and on Ctrl-C, within a bounded time.
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const TAIL_LINES = 40;
const EXIT_WITH_PARENT = pathToFileURL(path.join(REPO_ROOT, 'bench/exit-with-parent.ts')).href;

export interface TrackedProcess {
  child: ChildProcess;
  label: string;
  /** Last lines the process wrote (stdout and stderr), for error messages. */
  tail(): string;
  /** Resolves with the exit code (or signal) once the process has exited. */
  exited: Promise<string>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once it has exited. */
  stop(graceMs?: number): Promise<void>;
}

const running = new Set<TrackedProcess>();

/**
 * Starts `node --import tsx <script>` (the same as `tsx <script>`, minus tsx's own wrapper
 * process, so signals reach the script directly) with an IPC channel, whose closing makes
 * the child SIGTERM itself (bench/exit-with-parent.ts). Its environment is `baseEnv` (default
 * this process's) with `env` on top.
 */
export function startTsProcess(script: string, options: { label: string; env?: NodeJS.ProcessEnv; baseEnv?: NodeJS.ProcessEnv; args?: string[]; nodeOptions?: string[] }): TrackedProcess {
  const lines: string[] = [];
  const child = fork(path.resolve(REPO_ROOT, script), options.args ?? [], {
    cwd: REPO_ROOT,
    execArgv: [...(options.nodeOptions ?? []), '--import', 'tsx', '--import', EXIT_WITH_PARENT],
    env: { ...(options.baseEnv ?? process.env), ...options.env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const keep = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line.trim()) continue;
      lines.push(line.length > 500 ? `${line.slice(0, 500)}…` : line);
      if (lines.length > TAIL_LINES) lines.shift();
    }
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<string>((resolve) => {
    child.once('exit', (code, signal) => resolve(signal ?? `exit code ${code}`));
    child.once('error', (err) => resolve(`spawn error: ${err.message}`));
  });
  const tracked: TrackedProcess = {
    child,
    label: options.label,
    tail: () => lines.join('\n'),
    exited,
    async stop(graceMs = 10_000) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
        await exited;
        clearTimeout(timer);
      }
      running.delete(tracked);
    },
  };
  running.add(tracked);
  void exited.then(() => running.delete(tracked));
  return tracked;
}

/** Stops every process still running (in parallel, each bounded by `graceMs`). */
export async function stopAllProcesses(graceMs = 10_000): Promise<void> {
  await Promise.allSettled([...running].map((p) => p.stop(graceMs)));
}

/**
 * Polls `url` until it answers 2xx. Fails at `timeoutMs`, or at once when `process` exits
 * (with its last output, which says why).
 */
export async function waitForHttp(url: string, process: TrackedProcess, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exit: string | undefined;
  void process.exited.then((e) => (exit = e));
  let lastError = '';
  for (let attempt = 0; Date.now() < deadline && attempt < 10_000; attempt++) {
    if (exit) throw new Error(`${process.label} exited (${exit}) before answering ${url}:\n${process.tail()}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      if (res.ok) return;
      lastError = `status ${res.status}`;
    } catch (e) {
      lastError = (e as Error).message;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${process.label} did not answer ${url} within ${timeoutMs} ms (${lastError}):\n${process.tail()}`);
}

/**
 * Runs a load-generator script (written with `serveLoadProcess`, bench/load/protocol.ts)
 * to completion: sends it `input` and resolves with its result. The script runs in its own process so the
 * load never shares an event loop with the harness or the server.
 */
export async function runLoadProcess<T>(script: string, input: unknown, options: { timeoutMs: number; signal?: AbortSignal; label?: string }): Promise<T> {
  const proc = startTsProcess(script, { label: options.label ?? path.basename(script), env: { NODE_ENV: 'production' } });
  try {
    return await new Promise<T>((resolve, reject) => {
      let settled = false;
      const finish = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        fn();
      };
      const timer = setTimeout(() => finish(() => reject(new Error(`${proc.label} did not finish within ${options.timeoutMs} ms`))), options.timeoutMs);
      const onAbort = () => finish(() => reject(new Error(`${proc.label} aborted: ${String(options.signal?.reason ?? 'aborted')}`)));
      if (options.signal?.aborted) return onAbort();
      options.signal?.addEventListener('abort', onAbort, { once: true });
      proc.child.once('message', (message: any) => {
        finish(() => (message?.ok ? resolve(message.result as T) : reject(new Error(`${proc.label}: ${message?.error ?? 'malformed answer'}`))));
      });
      void proc.exited.then((how) => finish(() => reject(new Error(`${proc.label} exited (${how}) without a result:\n${proc.tail()}`))));
      proc.child.send(input as any);
    });
  } finally {
    await proc.stop(5_000);
  }
}
