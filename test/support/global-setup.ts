// Once per test run: a PostgreSQL (DATABASE_URL, or an embedded cluster) with a migrated
// template database; every test file clones its own database from it.
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import type { EmbeddedDatabase } from '../../src/db/embedded.ts';

export const TEMPLATE_DB = `test_template_${process.pid}`;

interface Cluster {
  serverUrl: string;
  embedded?: EmbeddedDatabase;
  dir?: string;
}

function withDatabase(url: string, name: string) {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function start(): Promise<Cluster> {
  // Imported here, once per run: each project loads this file anew, and the service's modules
  // (embedded.ts's process hooks) must not be evaluated twice in one process.
  const [{ startEmbeddedPostgres }, { migrate }, { ATTEMPT_TASK }] = await Promise.all([
    import('../../src/db/embedded.ts'),
    import('../../src/db/migrate.ts'),
    import('../../src/deliveries/job.ts'),
  ]);
  const cluster: Cluster = { serverUrl: process.env.DATABASE_URL ?? '' };
  if (!cluster.serverUrl) {
    cluster.dir = await mkdtemp(path.join(os.tmpdir(), 'test-pg-'));
    await chmod(cluster.dir, 0o755);
    // The run's own cluster keeps at most 256 MB of WAL (PostgreSQL's default is 1 GB): every
    // test database is a WAL-logged copy of the template, and a CI machine's disk may be small.
    // Nor does it wait for the disk: three test files at once each copy a database of 12-45 MB
    // through the WAL, and on a slow disk the checkpoints and WAL flushes that follow can hold the
    // run's commits back for seconds. Durability across an operating system crash is nothing a
    // test run needs (a commit still writes its WAL before it answers, so a killed process loses
    // nothing). Services a test starts on a cluster of their own keep the service's settings.
    cluster.embedded = await startEmbeddedPostgres(path.join(cluster.dir, 'data'), {
      exclusive: true,
      settings: { max_wal_size: '256MB', fsync: 'off', full_page_writes: 'off' },
    });
    cluster.serverUrl = cluster.embedded.url;
  }
  const admin = new pg.Client({ connectionString: cluster.serverUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${TEMPLATE_DB}`);
  await admin.query(`CREATE DATABASE ${TEMPLATE_DB}`);
  await admin.end();
  await migrate(withDatabase(cluster.serverUrl, TEMPLATE_DB), [ATTEMPT_TASK]);
  await mkdir('.tmp', { recursive: true });
  return cluster;
}

async function stop(cluster: Cluster) {
  if (cluster.embedded) await cluster.embedded.stop();
  else {
    const admin = new pg.Client({ connectionString: cluster.serverUrl });
    await admin.connect();
    const { rows } = await admin.query(`SELECT datname FROM pg_database WHERE datname LIKE 'test\\_%'`);
    for (const r of rows) await admin.query(`DROP DATABASE IF EXISTS "${r.datname}" WITH (FORCE)`).catch(() => {});
    await admin.end();
  }
  if (cluster.dir) await rm(cluster.dir, { recursive: true, force: true });
}

// Every vitest project (the suite, and the process tests after it) runs this file in the one
// main process, each with its own copy of the module: they share one cluster through globalThis,
// and the last project's teardown stops it.
const SHARED = Symbol.for('relay-service.test-postgres');
type Shared = { cluster: Promise<Cluster>; users: number };
const shared = globalThis as unknown as { [SHARED]?: Shared };

export async function setup(project: TestProject) {
  const s = (shared[SHARED] ??= { cluster: start(), users: 0 });
  s.users++;
  const { serverUrl } = await s.cluster;
  project.provide('pgServerUrl', serverUrl);
  project.provide('pgTemplate', TEMPLATE_DB);
}

export async function teardown() {
  const s = shared[SHARED];
  if (!s || --s.users > 0) return;
  delete shared[SHARED];
  await stop(await s.cluster);
}

declare module 'vitest' {
  export interface ProvidedContext {
    pgServerUrl: string;
    pgTemplate: string;
  }
}
