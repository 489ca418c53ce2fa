// `npm start` killed as a process manager's last word does it (SIGKILL to its whole process group)
// at random moments of its start and of its stop: every time, the next `npm start` on the same data
// directory is healthy within 10 s, and nothing of the killed one (a postgres) is left running.
// Real `npm start` processes, each in a process group of its own; the schedule comes from a seed
// (RESTART_SEED to replay one), printed with any failure.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../src/db/embedded.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const KILLS = 20;
const HEALTHY_WITHIN_MS = 10_000;
/**
 * A start whose directory holds no cluster yet (the first start was killed during initdb) is a
 * first start again: initdb and every migration, which alone take 5-10 s on this 2-core machine.
 */
const FIRST_START_WITHIN_MS = 30_000;
/** SIGTERM to the group: gone within this (the runner's SIGKILL comes at 10 s). */
const GONE_WITHIN_MS = 8_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A small seeded generator (mulberry32), so a failing schedule can be replayed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const work = path.join(ROOT, '.tmp', `restart-${process.pid}`);
const dataDir = path.join(work, 'data');
const groups = new Set<number>();
let clusterDir = path.join(dataDir, 'pg');

interface Run {
  child: ChildProcess;
  pgid: number;
  log: string;
  started: number;
  exited: Promise<number | null>;
}

let runs = 0;
/** `npm start` in its own process group, as a shell would run it (none of the test run's settings), its output in a file. */
function npmStart(port: number): Run {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !/^(VITEST|SECRETS_KEY$|DATABASE_|PUBLIC_URL$|EMAIL_DOMAIN$|NODE_ENV$|LOG_LEVEL$|TEST$)/.test(k)) env[k] = v;
  const log = path.join(work, `run-${++runs}.log`);
  const fd = openSync(log, 'w');
  const child = spawn('npm', ['start'], {
    cwd: ROOT,
    detached: true,
    env: { ...env, DATA_DIR: dataDir, PORT: String(port), SMTP_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' },
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  groups.add(child.pid!);
  return { child, pgid: child.pid!, log, started: Date.now(), exited: new Promise((r) => child.once('exit', (code) => r(code))) };
}

const output = (run: Run) => readFileSync(run.log, 'utf8');

/** Where in its start or stop a kill found the run: the last thing it logged, and the cluster's files and processes. */
function stage(run: Run): string {
  const logged = output(run)
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => (JSON.parse(l) as { msg?: string }).msg?.split(':')[0])
    .filter(Boolean)
    .at(-1);
  const parent = path.dirname(clusterDir);
  const state = [
    existsSync(`${clusterDir}.lock`) && 'lock held',
    existsSync(parent) && readdirSync(parent).some((n) => n.startsWith(`${path.basename(clusterDir)}.init-`)) && 'initdb',
    leftovers().length > 0 && 'postgres up',
  ].filter(Boolean);
  return [logged ?? 'nothing logged yet', ...state].join(', ');
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitGone(pgid: number, ms: number): Promise<boolean> {
  for (const deadline = Date.now() + ms; Date.now() < deadline; await sleep(25)) if (!groupAlive(pgid)) return true;
  return !groupAlive(pgid);
}

async function killGroup(run: Run) {
  try {
    process.kill(-run.pgid, 'SIGKILL');
  } catch {
    /* already gone */
  }
  expect(await waitGone(run.pgid, 5_000), `process group ${run.pgid} still there 5 s after SIGKILL`).toBe(true);
  groups.delete(run.pgid);
}

/** Processes (postgres among them) still running on the cluster's data directory. */
function leftovers(): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (cmd.includes(clusterDir)) found.push(`${pid}: ${cmd}`);
    } catch {
      /* gone */
    }
  }
  return found;
}

async function readyWithin(run: Run, port: number, ms: number, context: () => string): Promise<number> {
  for (const deadline = run.started + ms; Date.now() < deadline; await sleep(50)) {
    if (run.child.exitCode !== null) break;
    try {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(1_000) });
      await res.arrayBuffer();
      if (res.status === 200) return Date.now() - run.started;
    } catch {
      /* not yet */
    }
  }
  throw new Error(`npm start was not ready within ${ms} ms (exit ${run.child.exitCode}) ${context()}\n${output(run).slice(-3_000)}`);
}

afterAll(async () => {
  for (const pgid of groups) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  for (const line of leftovers()) process.kill(Number(line.split(':')[0]), 'SIGKILL');
  await sleep(200);
  await rm(work, { recursive: true, force: true });
  // Moved out of the checkout (root, private parent directory): /var/lib/relay-service/pg-<hash>.
  if (!clusterDir.startsWith(work)) for (const p of [clusterDir, `${clusterDir}.lock`, `${clusterDir}.owner`]) await rm(p, { recursive: true, force: true });
});

describe('npm start killed at random moments', () => {
  it(`recovers from ${KILLS} SIGKILLs of its process group during start and stop: healthy within ${HEALTHY_WITHIN_MS / 1000} s each time (a first start again, after a kill during initdb: ${FIRST_START_WITHIN_MS / 1000} s)`, async () => {
    const seed = Number(process.env.RESTART_SEED) || Date.now() % 2 ** 31;
    const rand = random(seed);
    const kills: string[] = [];
    const context = () => `(seed ${seed}; kills so far: ${kills.join('; ') || 'none'})`;
    await mkdir(work, { recursive: true });
    const port = await freePort();
    let startMs = 6_000;
    let current: Run | undefined;

    for (let k = 0; k < KILLS; k++) {
      if (k % 2 === 0) {
        // During its start (the first one on a new directory: initdb): anywhere from spawn to ready.
        if (current) {
          process.kill(-current.pgid, 'SIGTERM');
          expect(await waitGone(current.pgid, GONE_WITHIN_MS), `npm start still running ${GONE_WITHIN_MS} ms after SIGTERM ${context()}`).toBe(true);
          groups.delete(current.pgid);
        }
        const victim = npmStart(port);
        let delay: number;
        if (k === 0) {
          // The first one on a new directory, during initdb: a random moment once it has begun.
          const parent = path.dirname(clusterDir);
          const initdb = () => existsSync(parent) && readdirSync(parent).some((n) => n.startsWith(`${path.basename(clusterDir)}.init-`));
          for (const deadline = Date.now() + 30_000; !initdb() && Date.now() < deadline; ) await sleep(10);
          await sleep(Math.floor(rand() * 300));
          delay = Date.now() - victim.started;
        } else {
          delay = Math.floor(rand() * (startMs + 500));
          await sleep(delay);
        }
        const at = stage(victim);
        await killGroup(victim);
        kills.push(`start +${delay} ms (${at})`);
      } else {
        // During its stop: SIGTERM to the group, SIGKILL a moment later.
        const run = current!;
        await sleep(Math.floor(rand() * 300));
        process.kill(-run.pgid, 'SIGTERM');
        // Mostly within the stop itself (a few hundred ms), sometimes after it.
        const delay = Math.floor(rand() ** 2 * 1_500);
        await sleep(delay);
        const at = groupAlive(run.pgid) ? stage(run) : 'already gone';
        await killGroup(run);
        kills.push(`stop +${delay} ms (${at})`);
      }
      expect(leftovers(), `left running after kill ${k + 1} ${context()}`).toEqual([]);
      const initialised = existsSync(path.join(clusterDir, 'PG_VERSION'));
      current = npmStart(port);
      startMs = await readyWithin(current, port, initialised ? HEALTHY_WITHIN_MS : FIRST_START_WITHIN_MS, context);
      kills[kills.length - 1] += `, next ready in ${startMs} ms`;
      const started = /"msg":"embedded PostgreSQL [^"]*data in ([^ ,"]+)/.exec(output(current));
      if (started) clusterDir = started[1];
    }
    console.log(`restart test (seed ${seed}):\n  ${kills.join('\n  ')}`);

    // A second npm start beside the running one: one clear line, exit 1, the first untouched.
    const second = npmStart(port);
    const code = await Promise.race([second.exited, sleep(60_000).then(() => 'timeout')]);
    expect(code, output(second)).toBe(1);
    groups.delete(second.pgid);
    expect(output(second).split('\n').filter((l) => l.startsWith('error: '))).toEqual([expect.stringMatching(/^error: start-up failed: port \d+ is already in use/)]);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);

    process.kill(-current!.pgid, 'SIGTERM');
    expect(await waitGone(current!.pgid, GONE_WITHIN_MS), `npm start still running ${GONE_WITHIN_MS} ms after SIGTERM`).toBe(true);
    groups.delete(current!.pgid);
    expect(leftovers()).toEqual([]);
  }, 420_000);
});
