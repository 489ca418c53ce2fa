import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../src/db/embedded.ts';
import { createTestDatabase } from './support/database.ts';
import { serviceEnv } from './support/test-env.ts';

const TSX = ['--import', 'tsx'];
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'svc-'));
  await chmod(dir, 0o755);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** `npm start` as a shell runs it: none of the test run's settings (serviceEnv), `env` on top. */
function startMain(env: Record<string, string>) {
  const child = spawn(process.execPath, [...TSX, 'src/main.ts'], { env: serviceEnv({ LOG_LEVEL: 'info', ...env }), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (out += c));
  return { child, output: () => out };
}

async function waitHealthy(port: number, child: ChildProcess, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`process exited with ${child.exitCode}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/healthz`);
      if (res.ok) return;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('not healthy in time');
}

const exited = (child: ChildProcess) => new Promise<number | null>((r) => (child.exitCode !== null ? r(child.exitCode) : child.once('exit', (code) => r(code))));

describe('npm start on an embedded PostgreSQL', () => {
  it('initialises ./.data on first start, prints the default key once, reuses the data on the next start, and shuts down gracefully', async () => {
    const dataDir = path.join(dir, 'data');
    const port = await freePort();
    const env = { DATA_DIR: dataDir, PORT: String(port), SMTP_PORT: '0', DATABASE_URL: '', HOST: '127.0.0.1' };

    const started = Date.now();
    const first = startMain(env);
    await waitHealthy(port, first.child);
    const firstStartMs = Date.now() - started;
    expect(firstStartMs).toBeLessThan(60_000);
    await new Promise((r) => setTimeout(r, 200));
    const key = /(sk_[A-Za-z0-9_-]+)/.exec(first.output())?.[1];
    expect(key).toBeTruthy();
    const project = await fetch(`http://127.0.0.1:${port}/v1/project`, { headers: { authorization: `Bearer ${key}` } });
    expect(project.status).toBe(200);
    expect((await project.json()).name).toBe('default');
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);

    // A request in flight when SIGTERM arrives still gets its answer.
    const slow = new Promise<number>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, path: '/graphql', method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      });
      req.on('error', reject);
      req.write('{"query":');
      setTimeout(() => {
        first.child.kill('SIGTERM');
        setTimeout(() => req.end('"{ project { id } }"}'), 300);
      }, 200);
    });
    expect(await slow).toBe(200);
    expect(await exited(first.child)).toBe(0);
    expect(existsSync(path.join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);

    const second = startMain(env);
    await waitHealthy(port, second.child);
    const again = await fetch(`http://127.0.0.1:${port}/v1/project`, { headers: { authorization: `Bearer ${key}` } });
    expect(again.status).toBe(200);
    expect(second.output()).not.toMatch(/sk_/);
    second.child.kill('SIGTERM');
    expect(await exited(second.child)).toBe(0);
  }, 120_000);
});

describe('npm start and SIGTERM', () => {
  /** The process and every process under it, from /proc. */
  const tree = (root: number): number[] => {
    const children = new Map<number, number[]>();
    for (const name of readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      try {
        const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
      } catch {
        /* gone meanwhile */
      }
    }
    const out: number[] = [];
    for (const queue = [root]; queue.length; ) {
      const pid = queue.shift()!;
      out.push(pid);
      queue.push(...(children.get(pid) ?? []));
    }
    return out;
  };
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };

  it('SIGTERM to npm itself (as a container platform signals its first process) stops the service and its PostgreSQL within 8 s', async () => {
    const dataDir = path.join(dir, 'npm-data');
    const port = await freePort();
    // npm runs the script through sh: without `exec` in it, sh dies of the signal and the service
    // is left running, orphaned.
    const npm = spawn('npm', ['start'], {
      env: serviceEnv({ DATA_DIR: dataDir, PORT: String(port), SMTP_PORT: '0', DATABASE_URL: '', HOST: '127.0.0.1' }),
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    let pids: number[] = [];
    try {
      await waitHealthy(port, npm);
      pids = tree(npm.pid!);
      // npm, the service and the embedded PostgreSQL's processes.
      expect(pids.length).toBeGreaterThanOrEqual(4);
      const signalled = Date.now();
      npm.kill('SIGTERM');
      while (pids.some(alive) && Date.now() - signalled < 8_000) await new Promise((r) => setTimeout(r, 50));
      expect(pids.filter(alive)).toEqual([]);
      expect(existsSync(path.join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);
    } finally {
      // Whatever is left, orphaned or not.
      for (const pid of new Set([...pids, ...tree(npm.pid!)])) if (alive(pid)) process.kill(pid, 'SIGKILL');
    }
  }, 90_000);
});

describe('process exit', () => {
  // The start-up of the real entry points (src/main.ts, api.ts, worker.ts) under serveUntilSignal,
  // with `start` standing in for the app: it can be told to fail exactly after a signal came.
  const script = `
    const { serveUntilSignal } = await import('./src/bootstrap.ts');
    const scenario = process.env.SCENARIO;
    // Resolves once SIGTERM has been handled (the service's handler is registered before start runs).
    const signalled = () => new Promise((r) => { process.once('SIGTERM', r); process.kill(process.pid, 'SIGTERM'); });
    await serveUntilSignal(async () => {
      if (scenario.startsWith('signal-during-start')) await signalled();
      if (scenario.endsWith('fails')) throw new Error('start-up broke');
      return { stop: async () => console.log('app stopped') };
    }, async () => {
      console.log('cluster stopped');
      await new Promise((r) => setTimeout(r, 50));
    });
    if (scenario === 'signal-after-start') process.kill(process.pid, 'SIGTERM');
  `;
  const run = (scenario: string) =>
    new Promise<{ code: number | null; lines: string[] }>((resolve) => {
      const child = spawn(process.execPath, [...TSX, '--input-type=module', '-e', script], {
        env: { ...process.env, SCENARIO: scenario, LOG_LEVEL: 'fatal', DATABASE_URL: '' },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      child.stdout.on('data', (c) => (out += c));
      child.on('exit', (code) => resolve({ code, lines: out.split('\n').filter((l) => l && !l.startsWith('{')) }));
    });

  it('exits 1 when start-up fails, even after a shutdown signal, and 0 on a clean signal stop; the cluster is stopped once either way', async () => {
    const [failsAfterSignal, fails, signalDuringStart, signalAfterStart] = await Promise.all(
      ['signal-during-start, then start-up fails', 'start-up fails', 'signal-during-start', 'signal-after-start'].map(run),
    );
    expect(failsAfterSignal).toEqual({ code: 1, lines: ['cluster stopped'] });
    expect(fails).toEqual({ code: 1, lines: ['cluster stopped'] });
    expect(signalDuringStart).toEqual({ code: 0, lines: ['app stopped', 'cluster stopped'] });
    expect(signalAfterStart).toEqual({ code: 0, lines: ['app stopped', 'cluster stopped'] });
  }, 30_000);
});

describe('admin CLI', () => {
  it('prints one JSON object on stdout for project create, set-tier and api-key commands', async () => {
    const databaseUrl = await createTestDatabase();
    const run = (args: string[]) =>
      new Promise<{ code: number | null; stdout: string }>((resolve) => {
        const child = spawn(process.execPath, [...TSX, 'src/cli.ts', ...args], { env: { ...process.env, DATABASE_URL: databaseUrl, LOG_TO_STDERR: 'true' } });
        let stdout = '';
        child.stdout.on('data', (c) => (stdout += c));
        child.on('exit', (code) => resolve({ code, stdout }));
      });
    const created = await run(['project', 'create', '--name', 'acme', '--tier', 'pro']);
    expect(created.code).toBe(0);
    expect(created.stdout.trim().split('\n')).toHaveLength(1);
    const body = JSON.parse(created.stdout);
    expect(body).toMatchObject({ project: { name: 'acme', tier: 'pro', id: expect.stringMatching(/^prj_/) }, apiKey: expect.stringMatching(/^sk_/) });

    const tier = JSON.parse((await run(['project', 'set-tier', body.project.id, 'enterprise'])).stdout);
    expect(tier.project.tier).toBe('enterprise');
    const quota = JSON.parse((await run(['project', 'set-quota', body.project.id, 'ingest_rate', '500'])).stdout);
    expect(quota.project.customQuotas).toEqual({ ingest_rate: 500 });
    const key = JSON.parse((await run(['api-key', 'create', body.project.id, '--name', 'ci'])).stdout);
    expect(key.key).toMatch(/^sk_/);
    const list = JSON.parse((await run(['api-key', 'list', body.project.id])).stdout);
    expect(list.items).toHaveLength(2);
    expect(JSON.stringify(list)).not.toContain(key.key);
    const revoked = JSON.parse((await run(['api-key', 'revoke', body.project.id, key.apiKey.id])).stdout);
    expect(revoked.apiKey.revokedAt).toBeTruthy();
    const bad = await run(['project', 'set-tier', body.project.id, 'platinum']);
    expect(bad.code).toBe(1);
  }, 180_000);
});
