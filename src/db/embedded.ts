import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';
import { chmod, lstat, mkdir, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import lockfile from 'proper-lockfile';
import pg from 'pg';
import { postgresBinaries, ROOT_PLACE } from './postgres-binaries.ts';
import { OWN_APPLICATION_NAME } from './session-name.ts';
import { isAlive, processStat } from '../process-identity.ts';
import { EmbeddedDatabaseError, initCluster, PASSWORD, postgresUser, spawnPostmaster, stopPostmaster, USER, type Postmaster } from './postgres-process.ts';

export { EmbeddedDatabaseError };

/**
 * One cluster per data directory, shared by every process pointed at it (`npm start`, the CLI,
 * `start:api`, a second `npm start`). Beside the data directory:
 * - `<dir>.lock`: a directory held (proper-lockfile: created atomically, its mtime refreshed every
 *   second) while a process decides who runs the cluster, so two processes never start two
 *   postmasters on one directory; a lock not refreshed for LOCK_STALE_MS (its holder was killed)
 *   is broken by the next process;
 * - `<dir>.owner`: the process that runs the cluster (its pid and start time, written whole or not
 *   at all). Only the owner stops it, and only when nobody else is connected; a cluster whose
 *   owner is gone (killed) is adopted by the next process, never stopped under its users.
 * The postmaster's own `postmaster.pid` names the running cluster's pid and port.
 */
export interface EmbeddedDatabase {
  /** Connection string for the `postgres` database of the cluster. */
  url: string;
  port: number;
  /** Where the cluster's data lives (differs from `askedDir` when it had to move, as root). */
  dataDir: string;
  /** The data directory asked for. */
  askedDir: string;
  /** The directory of the PostgreSQL binaries this process starts the cluster with. */
  binDir: string;
  /** Whether this process runs the cluster now (started or adopted it). */
  owns(): boolean;
  /** Stops the cluster if this process owns it and no other process is connected to it. At most about 6 s. */
  stop(): Promise<void>;
}

const LOCK_WAIT_MS = 120_000;
const STOP_LOCK_WAIT_MS = 1_000;
const LOCK_STALE_MS = 2_000; // proper-lockfile's least
const LOCK_UPDATE_MS = 1_000;
const READY_TIMEOUT_MS = 30_000;
const WATCH_INTERVAL_MS = 500;
const RESTART_WINDOW_MS = 12_000;
const FLAGS = ['-c', 'max_connections=300', '-c', 'fsync=on', '-c', 'listen_addresses=127.0.0.1', '-c', 'autovacuum_naptime=5s'];

/**
 * A port on 127.0.0.1 that nothing listens on now, other than those in `avoid` (the ports the
 * service itself is about to listen on: a cluster that took the HTTP port first made the
 * start-up fail). An avoided port the kernel hands out stays bound while another is asked for.
 */
export async function freePort(avoid: Iterable<number> = []): Promise<number> {
  const avoided = new Set(avoid);
  const held: net.Server[] = [];
  const listen = () =>
    new Promise<net.Server>((resolve, reject) => {
      const server = net.createServer();
      server.unref();
      server.on('error', reject);
      server.listen(0, '127.0.0.1', () => resolve(server));
    });
  try {
    for (let tries = 0; tries < 100; tries++) {
      const server = await listen();
      const { port } = server.address() as net.AddressInfo;
      if (avoided.has(port)) {
        held.push(server);
        continue;
      }
      await new Promise((r) => server.close(r));
      return port;
    }
    throw new Error('no free port found outside the ones this process listens on');
  } finally {
    await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
  }
}

/** The kernel's start time of a process (Linux), so a reused pid is not taken for its predecessor; '' when unknown. */
const startTimeOf = (pid: number): string => processStat(pid)?.start ?? '';

type OwnerRecord = { pid: number; start: string };

function processIs(record: OwnerRecord | null): record is OwnerRecord {
  return !!record && isAlive(record.pid) && (record.start === '' || startTimeOf(record.pid) === '' || startTimeOf(record.pid) === record.start);
}

/** A record is one line, `<pid> <start time>\n`; anything else (empty, cut short) is no record. */
async function readRecord(file: string): Promise<OwnerRecord | null> {
  try {
    const m = /^([1-9]\d*) (\d*)\n$/.exec(await readFile(file, 'utf8'));
    return m ? { pid: Number(m[1]), start: m[2] } : null;
  } catch {
    return null;
  }
}

/** Written beside and renamed into place: a reader sees the whole record or the previous one. */
async function writeRecord(file: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, `${process.pid} ${startTimeOf(process.pid)}\n`);
  await rename(tmp, file);
}

async function removeOwnRecord(file: string): Promise<void> {
  if ((await readRecord(file))?.pid === process.pid) await unlink(file).catch(() => {});
}

/** Whether `pid` is a live PostgreSQL process (not a zombie, not a stranger that got the pid of a killed postmaster). */
function isPostgres(pid: number): boolean {
  if (!isAlive(pid)) return false;
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return existsSync('/proc/self/stat') ? false : true; // no /proc (not Linux): trust the pid
  }
  const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
  return comm === 'postgres' && stat[stat.lastIndexOf(')') + 2] !== 'Z';
}

/** The cluster running on `dataDir`, from its postmaster.pid: pid, port and status line. */
function runningCluster(dataDir: string): { pid: number; port: number; status: string } | null {
  let lines: string[];
  try {
    lines = readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n');
  } catch {
    return null;
  }
  const pid = Number(lines[0]);
  if (!pid || !isPostgres(pid) || !runsIn(pid, dataDir)) return null;
  return { pid, port: Number(lines[3]), status: (lines[7] ?? '').trim() };
}

/**
 * Whether the PostgreSQL process `pid` serves `dataDir` (a postmaster works in its data
 * directory): a postmaster.pid left by a killed postmaster may name a pid that another cluster's
 * postgres has taken since. Where the working directory cannot be read (another user's process
 * without the right to), the pid is trusted.
 */
function runsIn(pid: number, dataDir: string): boolean {
  try {
    return readlinkSync(`/proc/${pid}/cwd`) === realpathSync(dataDir);
  } catch {
    return true;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

class LockTimeout extends EmbeddedDatabaseError {}

/** Runs `fn` holding `<dataDir>.lock` (waiting at most `waitMs` for it); a lock whose holder died goes stale and is broken. */
async function withDirectoryLock<T>(dataDir: string, fn: () => Promise<T>, waitMs: number, onLog: (m: string) => void): Promise<T> {
  const lockPath = `${dataDir}.lock`;
  // Before proper-lockfile the lock was a file holding its holder's pid: one left behind is held by nobody.
  if ((await lstat(lockPath).catch(() => null))?.isFile()) await unlink(lockPath).catch(() => {});
  let release: (() => Promise<void>) | undefined;
  for (const deadline = Date.now() + waitMs; !release; ) {
    try {
      release = await lockfile.lock(dataDir, {
        lockfilePath: lockPath,
        realpath: false,
        stale: LOCK_STALE_MS,
        update: LOCK_UPDATE_MS,
        // The lock only orders decisions that PostgreSQL's own postmaster.pid and atomic renames
        // also guard: losing it (this process stalled for seconds) is worth a line, not a crash.
        onCompromised: (err) => onLog(`the lock ${lockPath} was lost: ${err.message}`),
      });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ELOCKED') throw e;
      if (Date.now() > deadline) throw new LockTimeout(`the embedded PostgreSQL in ${dataDir} stayed locked for ${Math.round(waitMs / 1000)} s by another process starting or stopping it (${lockPath}); stop that process, or set DATA_DIR`);
      await sleep(100);
    }
  }
  try {
    return await fn();
  } finally {
    await release().catch(() => {});
  }
}

function client(port: number, timeoutMs: number) {
  const c = new pg.Client({ host: '127.0.0.1', port, user: USER, password: PASSWORD, database: 'postgres', connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  c.on('error', () => {});
  return c;
}

async function accepts(port: number): Promise<boolean> {
  const c = client(port, 2_000);
  try {
    await c.connect();
    await c.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => {});
  }
}

async function waitReady(port: number, timeoutMs: number): Promise<boolean> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await sleep(100)) if (await accepts(port)) return true;
  return false;
}

/**
 * Number of other processes' client sessions on the cluster. This process's own (named
 * OWN_APPLICATION_NAME) do not count: a stop that ran out of time runs this with its pools still open.
 */
async function otherSessions(port: number): Promise<number> {
  const c = client(port, 1_000);
  try {
    await c.connect();
    const { rows } = await c.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND application_name IS DISTINCT FROM $1`,
      [OWN_APPLICATION_NAME],
    );
    return rows[0].n;
  } catch {
    return 0;
  } finally {
    await c.end().catch(() => {});
  }
}

/**
 * Whether other processes' sessions remain on the cluster. The backends of this process's own
 * pools, just closed, may still be listed for a moment: sessions must stay for a second to count.
 */
async function othersStay(port: number): Promise<boolean> {
  for (const deadline = Date.now() + 1_000; ; await sleep(100)) {
    if ((await otherSessions(port)) === 0) return false;
    if (Date.now() > deadline) return true;
  }
}

/**
 * As root, PostgreSQL runs as the `postgres` user, which must be able to reach the data
 * directory. A directory under a private home (/root is 0700) is moved to /var/lib, keyed by the
 * path asked for, so every process pointed at the same DATA_DIR finds the same cluster.
 */
function placeForRoot(dataDir: string, ids: { uid: number; gid: number }): string {
  const reachable = spawnSync('/bin/sh', ['-c', 'test -x "$1"', 'sh', path.dirname(dataDir)], ids).status === 0;
  return reachable ? dataDir : path.join(ROOT_PLACE, `pg-${createHash('sha256').update(dataDir).digest('hex').slice(0, 16)}`);
}

interface StartOptions {
  port?: number;
  onLog?: (m: string) => void;
  /**
   * Keep the cluster up: restart it (or adopt it when its owner is gone) when its postmaster
   * dies; `onLost` is told when that fails within RESTART_WINDOW_MS.
   */
  watch?: { onRestart?: () => void; onLost: (err: Error) => void };
  /** Ports this process is about to listen on itself: a new cluster never takes one of them. */
  avoidPorts?: number[];
  /** Nobody else uses this cluster (test and bench harnesses): stop it even if sessions remain. */
  exclusive?: boolean;
  /** Server settings of this start beside the service's own (which they override): a test run's cluster. */
  settings?: Record<string, string>;
}

/**
 * Starts (initialising on first use) a PostgreSQL cluster from the npm-distributed binaries in
 * `dir`, or connects to the one already running there. Reusing the directory keeps the data.
 * Every failure is an EmbeddedDatabaseError: one line saying what to do.
 */
export async function startEmbeddedPostgres(dir: string, options: StartOptions = {}): Promise<EmbeddedDatabase> {
  const asked = path.resolve(dir);
  const log = options.onLog ?? (() => {});
  const makeParent = async (of: string) => {
    try {
      await mkdir(path.dirname(of), { recursive: true, mode: 0o755 });
    } catch (e) {
      throw new EmbeddedDatabaseError(`cannot create the directory ${path.dirname(of)} (${(e as NodeJS.ErrnoException).code}); set DATA_DIR to a writable directory, or DATABASE_URL`);
    }
  };
  await makeParent(asked);
  const runAs = process.getuid?.() === 0 ? postgresUser() : undefined;
  const dataDir = runAs ? placeForRoot(asked, runAs) : asked;
  if (dataDir !== asked) {
    await makeParent(dataDir);
    await chmod(path.dirname(dataDir), 0o755).catch(() => {}); // whatever the umask: the postgres user goes through it
  }
  const ownerFile = `${dataDir}.owner`;
  const bin = await postgresBinaries(runAs);
  let port = options.port ?? 0;
  const flags = [...FLAGS, ...Object.entries(options.settings ?? {}).flatMap(([name, value]) => ['-c', `${name}=${value}`])];
  let postmaster: Postmaster | undefined;
  let owner = false;
  let stopped = false;

  /** Under the directory lock: connect to the running cluster, adopt it, or start one. */
  const ensureRunning = () =>
    withDirectoryLock(
      dataDir,
      async () => {
        for (let attempt = 0, hurried = 0; ; attempt++) {
          const running = runningCluster(dataDir);
          if (running?.status === 'stopping' && hurried++ < 3) {
            // On its way down (a smart shutdown waiting for its clients, or an owner killed while stopping it): hurry it.
            await stopPostmaster(running.pid);
            continue;
          }
          if (running) {
            port = running.port;
            const ownerRecord = await readRecord(ownerFile);
            if (!processIs(ownerRecord) || ownerRecord.pid === process.pid) {
              await writeRecord(ownerFile);
              owner = true;
            }
            if (!(await waitReady(port, READY_TIMEOUT_MS))) throw new EmbeddedDatabaseError(`the PostgreSQL running in ${dataDir} (pid ${running.pid}, port ${port}) does not accept connections`);
            return;
          }
          // No live postmaster: a postmaster.pid left by a killed one whose pid now names another
          // process would make PostgreSQL refuse to start.
          const pidFile = path.join(dataDir, 'postmaster.pid');
          const leftPid = Number((await readFile(pidFile, 'utf8').catch(() => '')).split('\n')[0]);
          if (leftPid && isAlive(leftPid)) await unlink(pidFile).catch(() => {});
          if (!existsSync(path.join(dataDir, 'PG_VERSION'))) await initCluster(bin, dataDir, runAs, log);
          if (!port) port = await freePort(options.avoidPorts);
          try {
            postmaster = await spawnPostmaster(bin, dataDir, port, flags, runAs, log, () => accepts(port), READY_TIMEOUT_MS);
          } catch (e) {
            // Started meanwhile by another process (one that took over a lock this process held too long): share it.
            if (attempt < 2 && runningCluster(dataDir)) continue;
            throw e;
          }
          await writeRecord(ownerFile);
          owner = true;
          return;
        }
      },
      LOCK_WAIT_MS,
      log,
    );

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
        const ownerRecord = await readRecord(ownerFile);
        if (owner || !processIs(ownerRecord)) {
          postmaster = undefined;
          await ensureRunning();
          downSince = 0;
          onRestart?.();
        } else if (Date.now() - downSince > RESTART_WINDOW_MS) {
          onLost(new EmbeddedDatabaseError(`the embedded PostgreSQL in ${dataDir} stopped and its owner (pid ${ownerRecord.pid}) did not restart it`));
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

  /** Stops the cluster, or leaves it to the other processes still connected to it. */
  const halt = async () => {
    const running = runningCluster(dataDir);
    if (running && !options.exclusive && (await othersStay(port))) {
      await removeOwnRecord(ownerFile);
      return;
    }
    if (running) await stopPostmaster(running.pid, postmaster?.child.pid === running.pid ? postmaster.exited : undefined);
    await removeOwnRecord(ownerFile);
  };

  let stopping: Promise<void> | undefined;
  return {
    get url() {
      return `postgresql://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`;
    },
    get port() {
      return port;
    },
    dataDir,
    askedDir: asked,
    binDir: bin.dir,
    owns: () => owner,
    stop() {
      stopping ??= (async () => {
        stopped = true;
        if (timer) clearInterval(timer);
        if (!owner) return;
        // Bounded: a shutdown must not wait for a lock that another process holds for long.
        await withDirectoryLock(dataDir, halt, STOP_LOCK_WAIT_MS, log).catch(async (e) => {
          if (!(e instanceof LockTimeout)) throw e;
          await halt();
        });
      })();
      return stopping;
    },
  };
}
