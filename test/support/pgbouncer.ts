// PgBouncer in transaction mode in front of the test cluster, as managed PostgreSQL puts it:
// Debian's `pgbouncer` package (1.18 here: no protocol-level prepared statements in transaction
// mode), started by the test on a free loopback port, in the foreground, as the `postgres` user
// when this is root (PgBouncer refuses to run as root).
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from '../../src/db/embedded.ts';

const CANDIDATES = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer'];

/** The pgbouncer binary, or null when it is not installed (`apt-get install -y pgbouncer`). */
export function findPgBouncer(): string | null {
  for (const p of [...CANDIDATES, ...(process.env.PATH ?? '').split(':').map((d) => path.join(d, 'pgbouncer'))]) {
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      /* not here */
    }
  }
  return null;
}

export interface PgBouncer {
  port: number;
  /** `serverUrl` with the database `database`, through PgBouncer. */
  url(database: string): string;
  /** PgBouncer's own log (connections, errors such as an unsupported startup parameter). */
  output(): string;
  stop(): Promise<void>;
}

const quote = (v: string) => `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

/**
 * Starts PgBouncer in transaction mode in front of the server of `serverUrl` (every database of it,
 * logging in as that URL's user). `serverPoolSize`: server connections per database, small so that
 * one client's consecutive transactions land on different server connections. No startup
 * parameter is ignored: a client that sends one PgBouncer does not track is refused, as PgBouncer's
 * defaults do.
 */
export async function startPgBouncer(serverUrl: string, opts: { serverPoolSize?: number } = {}): Promise<PgBouncer> {
  const binary = findPgBouncer();
  if (!binary) throw new Error('pgbouncer is not installed (apt-get install -y pgbouncer)');
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username || 'postgres');
  const password = decodeURIComponent(server.password);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pgbouncer-'));
  await chmod(dir, 0o755);
  const port = await freePort();
  const conn = [`host=${server.hostname || '127.0.0.1'}`, `port=${server.port || '5432'}`, `user=${quote(user)}`, password ? `password=${quote(password)}` : ''].filter(Boolean).join(' ');
  const ini = [
    '[databases]',
    `* = ${conn}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${path.join(dir, 'userlist.txt')}`,
    'pool_mode = transaction',
    `default_pool_size = ${opts.serverPoolSize ?? 8}`,
    'max_client_conn = 1000',
    'ignore_startup_parameters =',
    'log_connections = 0',
    'log_disconnections = 0',
    '',
  ].join('\n');
  await writeFile(path.join(dir, 'pgbouncer.ini'), ini, { mode: 0o644 });
  // With auth_type = trust, a client's user must still be listed.
  await writeFile(path.join(dir, 'userlist.txt'), `"${user}" ""\n`, { mode: 0o644 });
  const asRoot = process.getuid?.() === 0;
  const [cmd, args] = asRoot ? ['runuser', ['-u', 'postgres', '--', binary, path.join(dir, 'pgbouncer.ini')]] : [binary, [path.join(dir, 'pgbouncer.ini')]];
  // Its own process group, so that stop() reaches pgbouncer under runuser.
  const child: ChildProcess = spawn(cmd, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (out += c));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch {
        /* gone */
      }
      const killer = setTimeout(() => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          /* gone */
        }
      }, 5_000);
      await exited;
      clearTimeout(killer);
    }
    await rm(dir, { recursive: true, force: true });
  };
  const url = (database: string) => {
    const u = new URL(serverUrl);
    u.hostname = '127.0.0.1';
    u.port = String(port);
    u.password = '';
    u.pathname = `/${database}`;
    return u.toString();
  };
  // Ready once a query goes through it to the server.
  const database = decodeURIComponent(server.pathname.slice(1)) || 'postgres';
  for (const deadline = Date.now() + 15_000; ; ) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`pgbouncer exited with ${child.exitCode}:\n${out}`);
    }
    const c = new pg.Client({ connectionString: url(database) });
    c.on('error', () => {});
    try {
      await c.connect();
      await c.query('SELECT 1');
      await c.end();
      break;
    } catch (err) {
      await c.end().catch(() => {});
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`pgbouncer did not answer within 15 s (${(err as Error).message}):\n${out}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { port, url, output: () => out, stop };
}
