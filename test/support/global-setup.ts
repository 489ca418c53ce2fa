// Once per test run: a PostgreSQL (DATABASE_URL, or an embedded cluster) with a migrated
// template database; every test file clones its own database from it.
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../src/db/embedded.ts';
import { migrate } from '../../src/db/migrate.ts';
import { ATTEMPT_TASK } from '../../src/deliveries/job.ts';

export const TEMPLATE_DB = `test_template_${process.pid}`;

let embedded: EmbeddedDatabase | undefined;
let dir: string | undefined;

function withDatabase(url: string, name: string) {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

export async function setup(project: TestProject) {
  let serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) {
    dir = await mkdtemp(path.join(os.tmpdir(), 'test-pg-'));
    await chmod(dir, 0o755);
    embedded = await startEmbeddedPostgres(path.join(dir, 'data'), { exclusive: true });
    serverUrl = embedded.url;
  }
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${TEMPLATE_DB}`);
  await admin.query(`CREATE DATABASE ${TEMPLATE_DB}`);
  await admin.end();
  await migrate(withDatabase(serverUrl, TEMPLATE_DB), [ATTEMPT_TASK]);
  await mkdir('.tmp', { recursive: true });
  project.provide('pgServerUrl', serverUrl);
  project.provide('pgTemplate', TEMPLATE_DB);
}

export async function teardown() {
  if (embedded) await embedded.stop();
  else if (process.env.DATABASE_URL) {
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    const { rows } = await admin.query(`SELECT datname FROM pg_database WHERE datname LIKE 'test\\_%'`);
    for (const r of rows) await admin.query(`DROP DATABASE IF EXISTS "${r.datname}" WITH (FORCE)`).catch(() => {});
    await admin.end();
  }
  if (dir) await rm(dir, { recursive: true, force: true });
}

declare module 'vitest' {
  export interface ProvidedContext {
    pgServerUrl: string;
    pgTemplate: string;
  }
}
