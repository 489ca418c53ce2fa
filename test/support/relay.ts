// The `relay` command as a child process (node with tsx's loader on src/relay/main.ts, as
// bin/relay.mjs runs it), its --json lines kept for assertions.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { serviceEnv } from './test-env.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TSX = ['--import', pathToFileURL(path.join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href];
const MAIN = path.join(ROOT, 'bin/relay.mjs');

export interface RelayProcess {
  child: ChildProcess;
  /** stdout's JSON lines so far (with --json). */
  lines: Record<string, any>[];
  stdout(): string;
  stderr(): string;
  exited: Promise<number | null>;
  /** The first line matching, waited for at most `timeoutMs`; fails early if the process exits. */
  waitLine(match: (l: Record<string, any>) => boolean, timeoutMs?: number): Promise<Record<string, any>>;
  /** SIGINT (Ctrl-C), then the exit code (SIGKILL after 10 s). */
  stop(): Promise<number | null>;
}

export function startRelay(args: string[], env: Record<string, string> = {}): RelayProcess {
  const child = spawn(process.execPath, [...TSX, MAIN, ...args], { cwd: ROOT, env: serviceEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let partial = '';
  const lines: Record<string, any>[] = [];
  child.stdout!.on('data', (c) => {
    out += c;
    partial += c;
    const parts = partial.split('\n');
    partial = parts.pop()!;
    for (const p of parts) {
      try {
        lines.push(JSON.parse(p));
      } catch {
        /* not a JSON line */
      }
    }
  });
  child.stderr!.on('data', (c) => (err += c));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return {
    child,
    lines,
    stdout: () => out,
    stderr: () => err,
    exited,
    async waitLine(match, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = lines.find(match);
        if (found) return found;
        if (child.exitCode !== null || Date.now() > deadline) {
          throw new Error(`relay ${args[0]}: no such line within ${timeoutMs} ms (exit ${child.exitCode})\nstdout:\n${out.slice(-3000)}\nstderr:\n${err.slice(-3000)}`);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

/** Runs a relay command to its end (bounded): exit code, stdout, stderr. */
export async function runRelay(args: string[], env: Record<string, string> = {}, timeoutMs = 30_000) {
  const p = startRelay(args, env);
  const timer = setTimeout(() => p.child.kill('SIGKILL'), timeoutMs);
  const code = await p.exited;
  clearTimeout(timer);
  return { code, stdout: p.stdout(), stderr: p.stderr(), lines: p.lines };
}
